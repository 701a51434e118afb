"""Node-side validation checks for podctl.

Each module is a check that runs on a cluster node and prints one JSON object
(see `validation.result`): `python3 -m validation.<check> --help`. Needs only
the standard library, plus torch, numpy and nvidia-ml-py where present.
"""
