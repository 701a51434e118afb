#!/bin/bash
# restart-slurmd.sh GATE NODE TIMEOUT_S: restart this node's slurmd and wait, at most TIMEOUT_S
# seconds, until slurmctld has the node back (slurmd active, and sinfo shows NODE neither unknown
# nor not responding). The node's health gate (GATE; '' where the site runs none) is paused for
# slurmd alone meanwhile, by a mark that expires on its own 60 s after the deadline if this dies,
# so that the restart is not taken for a fault and the node is not drained for it. Prints the
# restart's window (when it began, when the node was back) for the run's artifacts.
# The slurm role's handler runs it (ansible.builtin.script); tests/deploy/test_handler_scripts.py.
set -euo pipefail
if (($# != 3)) || [[ ! $3 =~ ^[0-9]+$ ]]; then
    echo "usage: restart-slurmd.sh GATE NODE TIMEOUT_S" >&2
    exit 2
fi
gate=$1 node=$2 timeout_s=$3
if [[ -n $gate ]]; then
    "$gate" --mark slurmd --for $((timeout_s + 60)) --by 'podctl deploy: slurmd restart'
fi
restarted=$(date +%s.%N)
systemctl restart slurmd
deadline=$((SECONDS + timeout_s))
state=
until systemctl is-active --quiet slurmd \
    && state=$(sinfo --noheader --Node --nodes "$node" --format %t) \
    && [[ -n $state && ! $state =~ ^unk|[*~#%]$ ]]; do
    if ((SECONDS >= deadline)); then
        echo "slurmd on $node not back within $timeout_s s (sinfo: ${state:-no answer})" >&2
        exit 1
    fi
    sleep 1
done
if [[ -n $gate ]]; then
    "$gate" --unmark
fi
echo "slurmd restarted at $restarted, back at $(date +%s.%N) ($state)"
