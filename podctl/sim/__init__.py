"""The simulated pod: one systemd container per node, on a podman bridge
whose subnet is the site's management network.

Kept import-free so that `python -m podctl.sim.hostconf` runs with nothing
but the standard library (the CI setup script uses it before podctl's
dependencies are guaranteed to be importable).
"""
