"""`podctl deploy`: render the site's inventory and run the stage playbooks
through ansible-runner, with live progress and a per-host recap.

Pieces, each usable (and tested) on its own:
  stages    which stages run (--only/--skip)
  limit     --limit host lists, expanded with ClusterShell
  settings  the Ansible settings (fast or Ansible's defaults)
  recap     per-host results aggregated from ansible-runner events
  run       the run directory and the ansible-runner invocation
  cli       the click command, progress display and recap table
"""
