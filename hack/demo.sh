#!/usr/bin/env bash
# `make demo`: the gang-scheduling deadlock from Volcano's talk replayed by `lapilli simulate`, then the
# torchrun gang example running on a real control plane with Lapilli.
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

# ---- part 2: the main job on a real control plane ---------------------------------------------------------
# kube-apiserver + kube-scheduler (built once from Debian's source package, cached), the Lapilli service as
# extender + webhook + controllers, simulated GPU nodes and kubelet. The Volcano manifest applies unchanged.
echo
echo "== vcjob-torchrun-gang.yaml on a real kube-apiserver + kube-scheduler with Lapilli"
LAPILLI_K8S_BIN="$(bash hack/build-k8s.sh | tail -n 1)"
export LAPILLI_K8S_BIN
state="$(mktemp -d)"
cleanup() { "${LAPILLI}" dev down --state-dir "${state}" >/dev/null 2>&1 || true; rm -rf "${state}"; }
trap cleanup EXIT
eval "$("${LAPILLI}" dev up --nodes 4 --gpus-per-node 8 --state-dir "${state}" | tail -n 1)"
k() { kubectl "$@" 2>&1 | grep -v "version difference" || true; }

k apply -f examples/namespace-ml.yaml
k -n ml create serviceaccount default   # no controller-manager here to make it
k apply -f examples/vcjob-torchrun-gang.yaml
kubectl -n ml wait vcjob/torchrun-gang --for=jsonpath='{.status.state.phase}'=Running --timeout=120s 2>/dev/null
echo
k -n ml get vcjob,podgroup
k -n ml get pods -o wide
echo
echo "env the pytorch plugin gave rank 2 (torchrun-gang-worker-1):"
kubectl -n ml get pod torchrun-gang-worker-1 -o jsonpath='{range .spec.containers[0].env[*]}  {.name}={.value}{"\n"}{end}' 2>/dev/null \
  | grep -E "MASTER_ADDR|MASTER_PORT|WORLD_SIZE|RANK"
echo
echo "rank 0 finishes (playing the kubelet: the master pod's status becomes Succeeded) ..."
k -n ml patch pod torchrun-gang-master-0 --subresource=status --type=merge \
  -p '{"status":{"phase":"Succeeded","containerStatuses":[{"name":"master","ready":false,"restartCount":0,"image":"x","imageID":"","state":{"terminated":{"exitCode":0,"reason":"Completed"}}}]}}'
kubectl -n ml wait vcjob/torchrun-gang --for=jsonpath='{.status.state.phase}'=Completed --timeout=120s 2>/dev/null
k -n ml get vcjob torchrun-gang
echo
echo "TaskCompleted -> CompleteJob: the Job is Completed and its workers are stopped."
