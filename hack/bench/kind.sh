#!/usr/bin/env bash
# hack/bench/kind.sh BENCH runs one of the benchmarks that compare kray and KubeRay on real kubelets, one after
# the other on one kind cluster (hack/kind.sh), and writes docs/bench/kind-BENCH.md:
#   upgrade   (make bench-kind-upgrade) the same change of the workers' image of a busy 1-head, 4-worker
#             RayCluster, from one big image of the kind cluster's registry to another: KubeRay's Recreate, kray's
#             Recreate, kray's RollingUpdate with workerDrain, and the same with image-prepull and maxUnavailable 2
#   headloss  (make bench-kind-headloss) the head pod of a 1-head, 4-worker RayCluster deleted: how long until
#             every worker is back in the new GCS, under kray, kray leaving it to Ray, and KubeRay
# KubeRay's operator is built static from its module at KUBERAY_VERSION into an image of its own, on the kind
# cluster's distroless base; it runs while kray's Deployment is scaled to 0.
#
# The upgrade's big images: the fake Ray of two versions, each with a layer of its own of KRAY_BENCH_PAD_BYTES
# (default 2 GiB) of incompressible bytes (hack/bench/pad), pushed to the kind cluster's registry as
# ray:<version>-big; a rebuild writes the same bytes, so the registry keeps what it has. The registry then sends
# each node at most KRAY_BENCH_PULL_RATE (default 400mbit, 50 MB/s: tc's HTB, one class per node).
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

PAD_BYTES="${KRAY_BENCH_PAD_BYTES:-$((2 << 30))}"
PULL_RATE="${KRAY_BENCH_PULL_RATE:-400mbit}"
REGISTRY_CONTAINER="${KRAY_KIND_CLUSTER:-kray}-registry"

# big_image VERSION builds rayproject/ray:VERSION with its pad layer (unless built) and pushes it to the registry.
big_image() {
  local v="$1" ctx="${ROOT}/.kind/build/ray-big-$1" base tag
  base="$(docker image inspect -f '{{.Id}}' "rayproject/ray:${v}")"
  tag="kray-bench/ray-big:${v}-$(printf '%s %s' "${base}" "${PAD_BYTES}" | sha256sum | cut -c1-12)"
  if ! docker image inspect "${tag}" >/dev/null 2>&1; then
    log "building ${tag} (${PAD_BYTES} bytes of pad)"
    rm -rf "${ctx}" && mkdir -p "${ctx}"
    (cd "${ROOT}" && go run ./hack/bench/pad -bytes "${PAD_BYTES}" -seed "ray-${v}") >"${ctx}/pad"
    touch -d @0 "${ctx}/pad"
    printf 'FROM rayproject/ray:%s\nCOPY pad /opt/ray-image-pad\n' "${v}" >"${ctx}/Dockerfile"
    DOCKER_BUILDKIT=0 docker build -q --network host -t "${tag}" "${ctx}" >/dev/null
    rm -rf "${ctx}"
  fi
  docker tag "${tag}" "${KRAY_KIND_REGISTRY_PUSH}/ray:${v}-big"
  log "pushing ray:${v}-big"
  docker push "${KRAY_KIND_REGISTRY_PUSH}/ray:${v}-big" >/dev/null
}

# limit_pulls makes the registry send each kind node at most PULL_RATE, and anything else at full speed.
limit_pulls() {
  local node ip i=10 tc=(docker exec "${REGISTRY_CONTAINER}" tc)
  "${tc[@]}" qdisc del dev eth0 root 2>/dev/null || true
  "${tc[@]}" qdisc add dev eth0 root handle 1: htb default 99
  "${tc[@]}" class add dev eth0 parent 1: classid 1:99 htb rate 10gbit
  while read -r node; do
    ip="$(docker inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' "${node}")"
    "${tc[@]}" class add dev eth0 parent 1: classid "1:${i}" htb rate "${PULL_RATE}" ceil "${PULL_RATE}"
    "${tc[@]}" filter add dev eth0 parent 1: protocol ip prio 1 u32 match ip dst "${ip}/32" flowid "1:${i}"
    i=$((i + 1))
  done < <("${ROOT}/bin/kind" get nodes --name "${KRAY_KIND_CLUSTER:-kray}")
  log "the registry sends each node at most ${PULL_RATE}"
}

extra=()
if [[ "${BENCH}" == upgrade ]]; then
  big_image 2.46.0
  big_image 2.52.0
  limit_pulls
  extra=(KRAY_BENCH_OLD_IMAGE="${KRAY_KIND_REGISTRY}/ray:2.46.0-big" KRAY_BENCH_NEW_IMAGE="${KRAY_KIND_REGISTRY}/ray:2.52.0-big"
    KRAY_BENCH_REGISTRY_CONTAINER="${REGISTRY_CONTAINER}" KRAY_BENCH_PULL_RATE="${PULL_RATE}"
    KRAY_BENCH_PAD="$(awk -v b="${PAD_BYTES}" 'BEGIN { printf "%.1f GiB", b / 2^30 }')")
fi

mkdir -p "$(dirname "${REPORT}")"
cd "${ROOT}"
env "${SWITCH}=1" "${extra[@]}" KUBECONFIG="${ROOT}/.local/kind/kubeconfig" KRAY_E2E_KIND=1 KRAY_E2E_OPERATOR=external \
  KRAY_BENCH_KUBERAY_IMAGE="${image}" KRAY_BENCH_KUBERAY_VERSION="${KUBERAY_VERSION}" \
  KRAY_BENCH_KUBERAY_ROLE="${module_dir}/config/rbac/role.yaml" KRAY_BENCH_REPORT="${REPORT}" \
  KRAY_BENCH_KRUISE_VERSION="${KRUISE_VERSION}" \
  go test ./test/e2e -count=1 -v -timeout 60m -run "${TEST}"
log "wrote ${REPORT}"
