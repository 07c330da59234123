#!/usr/bin/env bash
# hack/run.sh is `make run`: it brings the local cluster up if it is not, installs kray's CRDs, applies the
# sample RayCluster from config/samples, and runs the operator in the foreground while a watcher prints
# the RayCluster, its Kruise workloads and its pods until the cluster is ready. Ctrl-C stops the operator;
# the cluster stays up until `make cluster-down`.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
LOCAL="${KRAY_LOCAL_DIR:-${ROOT}/.local}"
export KUBECONFIG="${LOCAL}/kubeconfig"
SAMPLE="${KRAY_SAMPLE:-${ROOT}/config/samples/ray-cluster.sample.yaml}"
NAMESPACE="${KRAY_SAMPLE_NAMESPACE:-default}"

"${ROOT}/hack/cluster.sh" up
"${ROOT}/hack/operator.sh" stop # an operator left by `make e2e` would fight this one
"${ROOT}/hack/operator.sh" prepare # the CRDs (established) and the operator's RBAC, before the sample
kubectl apply -n "${NAMESPACE}" -f "${SAMPLE}"
name="$(kubectl create --dry-run=client -o jsonpath='{.metadata.name}' -f "${SAMPLE}")"

# show prints the cluster's objects once they settle, then again whenever the state is ready.
show() {
  local deadline=$((SECONDS + 120)) state=""
  while ((SECONDS < deadline)); do
    state="$(kubectl get raycluster -n "${NAMESPACE}" "${name}" -o jsonpath='{.status.state}' 2>/dev/null || true)"
    [[ "${state}" == "ready" ]] && break
    sleep 1
  done
  {
    echo
    echo "===== RayCluster ${NAMESPACE}/${name}: state '${state:-pending}' ====="
    kubectl get raycluster -n "${NAMESPACE}" "${name}" -o wide
    echo
    kubectl get statefulsets.apps.kruise.io,clonesets.apps.kruise.io,services -n "${NAMESPACE}" -l "ray.io/cluster=${name}"
    echo
    kubectl get pods -n "${NAMESPACE}" -l "ray.io/cluster=${name}" -o wide
    echo
    echo "The operator keeps running; Ctrl-C stops it. The cluster stays up: export KUBECONFIG=${KUBECONFIG}"
    echo "Stop the cluster with: make cluster-down"
  } >&2
}
show &
watcher=$!
trap 'kill "${watcher}" 2>/dev/null || true' EXIT
"${ROOT}/hack/operator.sh" foreground
