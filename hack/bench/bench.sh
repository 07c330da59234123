#!/usr/bin/env bash
# hack/bench/bench.sh runs the kray vs KubeRay benchmark (`make bench`): it builds kray into bin/bench/ (not
# bin/kray-operator, which hack/e2e.sh may be running), builds KubeRay's operator into
# bin/tools/kuberay-<version>/ when missing, locates KubeRay's CRDs in its module, and runs hack/bench, which
# brings up a fresh local cluster per operator in .local-bench/ on their own ports (never the default .local/ instance),
# measures both operators one after the other, and writes docs/bench/results.json and docs/benchmarks.md (its
# generated section, charts included).
#
# Arguments are passed to hack/bench, e.g. `hack/bench/bench.sh -clusters=1000` (see `go run ./hack/bench -h`);
# `make bench BENCH_ARGS=-clusters=1000` does the same. `make bench-growth` passes -growth=100,300,1000, which
# writes docs/bench/growth/ and the report's growth section instead.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=../versions.env
source "${ROOT}/hack/versions.env"
KUBERAY_MODULE="github.com/ray-project/kuberay/ray-operator"
KRAY_BIN="${ROOT}/bin/bench/kray-operator"
KUBERAY_DIR="${ROOT}/bin/tools/kuberay-${KUBERAY_VERSION}"

log() { printf '[bench] %s\n' "$*" >&2; }

cd "${ROOT}"
log "building kray into ${KRAY_BIN}"
go build -ldflags "-X main.version=$(git describe --tags --always --dirty 2>/dev/null || echo dev)" \
  -o "${KRAY_BIN}" ./cmd/kray-operator

if [[ ! -x "${KUBERAY_DIR}/ray-operator" ]]; then
  log "building KubeRay ${KUBERAY_VERSION} into ${KUBERAY_DIR} (a few minutes the first time)"
  mkdir -p "${KUBERAY_DIR}"
  (cd / && GOBIN="${KUBERAY_DIR}" GOFLAGS=-mod=mod go install "${KUBERAY_MODULE}@${KUBERAY_VERSION}")
fi

kuberay_dir="$(cd / && GOFLAGS=-mod=mod go mod download -json "${KUBERAY_MODULE}@${KUBERAY_VERSION}" |
  sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')"
[[ -d "${kuberay_dir}/config/crd/bases" ]] || { log "no config/crd/bases in ${KUBERAY_MODULE}@${KUBERAY_VERSION}"; exit 1; }

exec go run ./hack/bench \
  -kray="${KRAY_BIN}" \
  -kuberay="${KUBERAY_DIR}/ray-operator" \
  -kuberay-crds="${kuberay_dir}/config/crd/bases" \
  "$@"
