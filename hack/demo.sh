#!/usr/bin/env bash
# `make demo`: the gang-scheduling deadlock from Volcano's talk, replayed by `lapilli simulate`.
#
# Jobs of 2 parameter servers + 4 one-GPU workers on three 2-GPU nodes (room for one job at a time), with 1, 2
# and 5 jobs (examples/sim/seed-gang-deadlock.yaml). Each case runs under Lapilli (gang: a job's pods are bound
# whole or not at all) and under kube-scheduler's own per-pod behaviour, printed side by side, then a summary.
# Every number comes from the simulation; nothing here is precomputed.
set -euo pipefail

cd "$(dirname "$0")/.."
LAPILLI="${LAPILLI:-.venv/bin/lapilli}"
WORKLOAD=examples/sim/seed-gang-deadlock.yaml

echo "Simulating ${WORKLOAD}: lapilli vs. kube-scheduler (default), 1, 2 and 5 jobs"
echo
"${LAPILLI}" simulate "${WORKLOAD}" --scheduler both --jobs 1 --jobs 2 --jobs 5
