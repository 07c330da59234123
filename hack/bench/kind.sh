#!/usr/bin/env bash
# hack/bench/kind.sh BENCH runs one of the benchmarks that compare kray and KubeRay on real kubelets, one after
# the other on one kind cluster (hack/kind.sh), and writes docs/bench/kind-BENCH.md:
#   upgrade   (make bench-kind-upgrade) the same image change of a 1-head, 4-worker RayCluster: kray's
#             RollingUpdate with workerDrain, kray's Recreate and KubeRay's Recreate
#   headloss  (make bench-kind-headloss) the head pod of a 1-head, 4-worker RayCluster deleted: how long until
#             every worker is back in the new GCS, under kray, kray leaving it to Ray, and KubeRay
# KubeRay's operator is built static from its module at KUBERAY_VERSION into an image of its own, on the kind
# cluster's distroless base; it runs while kray's Deployment is scaled to 0.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=../versions.env
source "${ROOT}/hack/versions.env"
MODULE="github.com/ray-project/kuberay/ray-operator"
BIN_DIR="${ROOT}/bin/tools/kuberay-static-${KUBERAY_VERSION}"
BENCH="${1:-}"
case "${BENCH}" in
  upgrade) TEST='^TestUpgradeBenchOnKind$' SWITCH=KRAY_BENCH_KIND_UPGRADE ;;
  headloss) TEST='^TestHeadLossBenchOnKind$' SWITCH=KRAY_BENCH_KIND_HEADLOSS ;;
  *) printf 'usage: %s upgrade|headloss\n' "$0" >&2; exit 2 ;;
esac
REPORT="${ROOT}/docs/bench/kind-${BENCH}.md"

log() { printf '[bench-kind-%s] %s\n' "${BENCH}" "$*" >&2; }

trap '"${ROOT}/hack/kind.sh" down >/dev/null 2>&1 || true' EXIT
"${ROOT}/hack/kind.sh" up
eval "$("${ROOT}/hack/kind.sh" env)"

if [[ ! -x "${BIN_DIR}/ray-operator" ]]; then
  log "building KubeRay ${KUBERAY_VERSION} (static) into ${BIN_DIR}"
  mkdir -p "${BIN_DIR}"
  (cd / && CGO_ENABLED=0 GOBIN="${BIN_DIR}" GOFLAGS=-mod=mod go install -trimpath -ldflags "-s -w" "${MODULE}@${KUBERAY_VERSION}")
fi
module_dir="$(cd / && GOFLAGS=-mod=mod go mod download -json "${MODULE}@${KUBERAY_VERSION}" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
ctx="${ROOT}/.kind/build/kuberay"
rm -rf "${ctx}" && mkdir -p "${ctx}"
cp "${BIN_DIR}/ray-operator" "${ctx}/manager"
printf 'FROM gcr.io/distroless/static:nonroot\nCOPY manager /manager\nUSER 65532:65532\nENTRYPOINT ["/manager"]\n' >"${ctx}/Dockerfile"
image="kray.local/kuberay-operator:${KUBERAY_VERSION}"
DOCKER_BUILDKIT=0 docker build -q --network host -t "${image}" "${ctx}" >/dev/null
"${ROOT}/bin/kind" load docker-image --name "${KRAY_KIND_CLUSTER:-kray}" "${image}" >&2

mkdir -p "$(dirname "${REPORT}")"
cd "${ROOT}"
env "${SWITCH}=1" KUBECONFIG="${ROOT}/.local/kind/kubeconfig" KRAY_E2E_KIND=1 KRAY_E2E_OPERATOR=external \
  KRAY_BENCH_KUBERAY_IMAGE="${image}" KRAY_BENCH_KUBERAY_VERSION="${KUBERAY_VERSION}" \
  KRAY_BENCH_KUBERAY_ROLE="${module_dir}/config/rbac/role.yaml" KRAY_BENCH_REPORT="${REPORT}" \
  KRAY_BENCH_KRUISE_VERSION="${KRUISE_VERSION}" \
  go test ./test/e2e -count=1 -v -timeout 40m -run "${TEST}"
log "wrote ${REPORT}"
