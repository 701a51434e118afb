#!/bin/bash
# restart-munge.sh GATE: restart munge (a new key), the node's health gate paused for munge alone
# meanwhile. GATE is the gate's program, or '' where the site runs none. Where the gate is not
# installed yet (a first deploy installs it later) or cannot write the mark (an older gate), munge
# restarts anyway: the gate's re-ask of a unit on its way still covers a quick restart.
# The slurm role's handler runs it (ansible.builtin.script); tests/deploy/test_handler_scripts.py.
set -euo pipefail
if (($# != 1)); then
    echo "usage: restart-munge.sh GATE" >&2
    exit 2
fi
gate=$1
marked=
if [[ -n $gate && -x $gate ]] && "$gate" --mark munge --for 120 --by 'podctl deploy: munge restart'; then
    marked=1
fi
systemctl restart munge
systemctl is-active --quiet munge
if [[ -n $marked ]]; then
    "$gate" --unmark
fi
