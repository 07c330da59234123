#!/usr/bin/env bash
# hack/e2e.sh runs the end-to-end suite on the local cluster: it brings the cluster up (a no-op when it is
# running), starts Kueue, (re)starts bin/kray-operator out of cluster with the RBAC in config/rbac, runs
# test/e2e and test/kuberaytypes, stops the operator, and on failure prints the tails of the logs of the
# operator, kruise-manager, kwok, poddelete, the add-ons and the apiserver.
# The cluster stays up afterwards; `make cluster-down` stops it.
# Environment: E2E_RUN (a -run regexp), E2E_COUNT (default 1), E2E_TIMEOUT (default 30m), E2E_PARALLEL (default 4).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
LOCAL="${KRAY_LOCAL_DIR:-${ROOT}/.local}"
export KUBECONFIG="${LOCAL}/kubeconfig"

"${ROOT}/hack/cluster.sh" up >&2
# The suite serves a fake Ray GCS at this address (test/e2e/fakegcs_test.go); the operator drains workers
# through it. Exported so that tests restarting the operator keep the flag.
export KRAY_E2E_GCS_ADDRESS="${KRAY_E2E_GCS_ADDRESS:-127.0.0.1:26379}"
# Likewise a fake Ray dashboard (test/e2e/fakedashboard_test.go, fakeserve_test.go), whose Job API the
# RayJob controller calls and whose Serve API, one per cluster (the address names it), the RayService
# controller calls, and the Serve proxies of RayService head pods.
export KRAY_E2E_DASHBOARD_ADDRESS="${KRAY_E2E_DASHBOARD_ADDRESS:-127.0.0.1:28265}"
# KubeRay's alpha gates of the features kray serves, on: spec.networkPolicy (the local cluster makes the
# NetworkPolicies and enforces none), the embedded RocksDB GCS fault tolerance backend, the history
# server's collector and spec.tlsOptions (with the real cert-manager, started first: the operator asks at
# start whether its API is served).
"${ROOT}/hack/cluster.sh" start-cert-manager >&2
export KRAY_E2E_CERT_MANAGER=1
export KRAY_OPERATOR_ARGS="${KRAY_OPERATOR_ARGS:-} --feature-gates=RayClusterNetworkPolicy=true,GCSFaultToleranceEmbeddedStorage=true,RayClusterHistoryServer=true,RayClusterMTLS=true --ray-gcs-address=${KRAY_E2E_GCS_ADDRESS} --ray-dashboard-address=http://${KRAY_E2E_DASHBOARD_ADDRESS}/c/{namespace}/{cluster} --ray-serve-probe-address=http://${KRAY_E2E_DASHBOARD_ADDRESS}/p/{namespace}/{pod}"
# The real Kueue, with its Ray integrations, for the tests that queue RayClusters and RayJobs.
"${ROOT}/hack/cluster.sh" start-kueue >&2
export KRAY_E2E_KUEUE=1
# The real scheduler-plugins coscheduling scheduler, for the gang scheduling tests.
"${ROOT}/hack/cluster.sh" start-scheduler-plugins >&2
export KRAY_E2E_SCHEDULER_PLUGINS=1
# The real YuniKorn scheduler, and Volcano's CRDs (no Volcano scheduler), for their gang tests.
"${ROOT}/hack/cluster.sh" start-yunikorn >&2
export KRAY_E2E_YUNIKORN=1
"${ROOT}/hack/cluster.sh" install-volcano-crds >&2
export KRAY_E2E_VOLCANO=1
# The Gateway API's CRDs, for the RayService incremental upgrade tests (the tests play the Gateway controller).
"${ROOT}/hack/cluster.sh" install-gateway-crds >&2
export KRAY_E2E_GATEWAY=1
"${ROOT}/hack/operator.sh" stop
"${ROOT}/hack/operator.sh" start
trap '"${ROOT}/hack/operator.sh" stop' EXIT

# The tests that call t.Parallel run E2E_PARALLEL at a time, after the others.
args=(-count="${E2E_COUNT:-1}" -timeout="${E2E_TIMEOUT:-30m}" -parallel="${E2E_PARALLEL:-4}" -v)
[[ -n "${E2E_RUN:-}" ]] && args+=(-run "${E2E_RUN}")
start=$(date +%s)
# shellcheck source=lib/slowest.sh
source "${ROOT}/hack/lib/slowest.sh"
out="${LOCAL}/logs/e2e-tests.log"
mkdir -p "${LOCAL}/logs"
# test/kuberaytypes is its own module (it holds KubeRay's Go types, which stay out of kray's build).
if (cd "${ROOT}" && go test "${args[@]}" ./test/e2e/... | tee "${out}") &&
  (cd "${ROOT}/test/kuberaytypes" && go test "${args[@]}" ./... | tee -a "${out}"); then
  print_slowest "${out}" >&2
  echo "e2e passed in $(( $(date +%s) - start )) s" >&2
  exit 0
fi
print_slowest "${out}" >&2
for component in kray-operator kruise-manager kwok poddelete kueue scheduler-plugins yunikorn cert-manager kube-apiserver; do
  log="${LOCAL}/logs/${component}.log"
  [[ -f "${log}" ]] || continue
  printf '\n===== last 60 lines of %s =====\n' "${log}" >&2
  tail -n 60 "${log}" >&2
done
exit 1
