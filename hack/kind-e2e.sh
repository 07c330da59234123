#!/usr/bin/env bash
# hack/kind-e2e.sh runs kray's e2e suite on a kind cluster, for hosts with Docker: it creates the cluster,
# installs OpenKruise from its Helm chart, builds the kray image from ./Dockerfile, loads it into kind, deploys
# config/default with that image, waits for the operator, runs `go test ./test/e2e/...` with
# KRAY_E2E_OPERATOR=external (the operator already runs in the cluster), and deletes the cluster on exit.
#
# Requires: docker, kind (or `hack/tools.sh kind`, used when kind is not on PATH), helm 3, kubectl, go.
#
# Environment:
#   KRAY_KIND_CLUSTER=kray-e2e          cluster name; an existing cluster of that name is an error unless
#   KRAY_KIND_REUSE=1                   (then it is used as is and Kruise/kray are upgraded in place)
#   KRAY_KIND_KEEP=0                    1 keeps the cluster after the run (to debug; delete it with
#                                       `kind delete cluster --name kray-e2e`)
#   KRAY_E2E_IMAGE=kray-operator:e2e    image built and loaded
#   KRAY_CONFIG_IMAGE                   image name used in config/ to replace with KRAY_E2E_IMAGE; default:
#                                       the only Deployment image in config/default whose name contains
#                                       "kray" or "controller"
#   KRAY_KRUISE_FEATURE_GATES=PodWebhook=true,KruiseDaemon=false
#                                       no kruise-daemon DaemonSet; the tests of image pre-pull run only
#                                       when the gates add KruiseDaemon=true and ImagePullJobGate=true
#   KRAY_E2E_TIMEOUT=30m  KRAY_E2E_GO_TEST_ARGS (extra `go test` arguments, split on whitespace)
#   KIND_NODE_IMAGE, KRUISE_VERSION     from hack/versions.env unless set
#
# Exit status: that of `go test` (or of the first failing setup step). On failure, cluster diagnostics are
# printed before the cluster is deleted.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=hack/versions.sh
source "${ROOT}/hack/versions.sh"

CLUSTER="${KRAY_KIND_CLUSTER:-kray-e2e}"
IMAGE="${KRAY_E2E_IMAGE:-kray-operator:e2e}"
KRUISE_CHART_REPO=https://openkruise.github.io/charts
KRUISE_CHART_VERSION="${KRUISE_VERSION#v}"
KRUISE_FEATURE_GATES="${KRAY_KRUISE_FEATURE_GATES:-PodWebhook=true,KruiseDaemon=false}"
E2E_TIMEOUT="${KRAY_E2E_TIMEOUT:-30m}"

log() { printf '[kind-e2e] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

WORK_DIR="$(mktemp -d)"
KUBECONFIG_FILE="${WORK_DIR}/kubeconfig"
CREATED_CLUSTER=0
OPERATOR_DEPLOYMENTS=()

# diagnostics prints what usually explains a failed run.
diagnostics() {
  log "diagnostics:"
  kubectl get nodes -o wide >&2 || true
  kubectl get pods -A -o wide >&2 || true
  kubectl get events -A --sort-by=.lastTimestamp >&2 2>/dev/null | tail -n 50 >&2 || true
  local d
  for d in "${OPERATOR_DEPLOYMENTS[@]}"; do
    log "logs of ${d}:"
    kubectl logs -n "${d%%/*}" "deployment/${d#*/}" --all-containers --tail=200 >&2 || true
  done
  log "logs of kruise-controller-manager:"
  kubectl logs -n kruise-system deployment/kruise-controller-manager --tail=100 >&2 || true
}

cleanup() {
  local status=$?
  trap - EXIT
  if ((status != 0)) && [[ -f "${KUBECONFIG_FILE}" ]]; then
    diagnostics
  fi
  if ((CREATED_CLUSTER == 1)) && [[ "${KRAY_KIND_KEEP:-0}" != 1 ]]; then
    log "deleting kind cluster ${CLUSTER}"
    kind delete cluster --name "${CLUSTER}" >&2 || true
  elif ((CREATED_CLUSTER == 1)); then
    log "keeping kind cluster ${CLUSTER} (KRAY_KIND_KEEP=1)"
  fi
  rm -rf "${WORK_DIR}"
  exit "${status}"
}
trap cleanup EXIT

require_tools() {
  local c
  for c in docker helm kubectl go; do
    command -v "${c}" >/dev/null || die "'${c}' is required but not on PATH"
  done
  if ! command -v kind >/dev/null; then
    log "kind is not on PATH; building it with hack/tools.sh"
    "${ROOT}/hack/tools.sh" kind
    PATH="${ROOT}/bin:${PATH}"
  fi
  docker info >/dev/null 2>&1 || die "docker is installed but its daemon does not answer"
  [[ -f "${ROOT}/Dockerfile" ]] || die "no Dockerfile at ${ROOT}"
  [[ -d "${ROOT}/config/default" ]] || die "no config/default at ${ROOT}"
}

create_cluster() {
  if kind get clusters 2>/dev/null | grep -qx "${CLUSTER}"; then
    [[ "${KRAY_KIND_REUSE:-0}" == 1 ]] || die "kind cluster ${CLUSTER} exists (set KRAY_KIND_REUSE=1 to use it)"
    log "reusing kind cluster ${CLUSTER}"
    kind get kubeconfig --name "${CLUSTER}" >"${KUBECONFIG_FILE}"
  else
    log "creating kind cluster ${CLUSTER} (${KIND_NODE_IMAGE})"
    CREATED_CLUSTER=1
    kind create cluster --name "${CLUSTER}" --image "${KIND_NODE_IMAGE}" --kubeconfig "${KUBECONFIG_FILE}" \
      --wait 180s >&2
  fi
  export KUBECONFIG="${KUBECONFIG_FILE}"
}

install_kruise() {
  log "installing OpenKruise chart ${KRUISE_CHART_VERSION} (featureGates=${KRUISE_FEATURE_GATES})"
  # A values file, because --set would split the gate list at its commas.
  cat >"${WORK_DIR}/kruise-values.yaml" <<EOF
featureGates: "${KRUISE_FEATURE_GATES}"
manager:
  replicas: 1
EOF
  helm upgrade --install kruise kruise --repo "${KRUISE_CHART_REPO}" --version "${KRUISE_CHART_VERSION}" \
    --values "${WORK_DIR}/kruise-values.yaml" --wait --timeout 5m >&2
  kubectl -n kruise-system rollout status deployment/kruise-controller-manager --timeout=5m >&2
}

build_and_load_image() {
  log "building ${IMAGE}"
  docker build -t "${IMAGE}" "${ROOT}" >&2
  kind load docker-image "${IMAGE}" --name "${CLUSTER}" >&2
}

# config_image prints the image name that config/default uses for the operator.
config_image() {
  if [[ -n "${KRAY_CONFIG_IMAGE:-}" ]]; then
    printf '%s' "${KRAY_CONFIG_IMAGE}"
    return 0
  fi
  local images
  # `image: <value>` lines with a value; schema keys named `image` in CRDs have none.
  images="$(kubectl kustomize "${ROOT}/config/default" |
    sed -n 's/^[[:space:]]*-\{0,1\}[[:space:]]*image:[[:space:]]*["'\'']\{0,1\}\([^"'\''[:space:]]\{1,\}\).*$/\1/p' |
    grep -E 'kray|controller' | sort -u)"
  [[ -n "${images}" ]] || die "no operator image in config/default; set KRAY_CONFIG_IMAGE"
  [[ "$(wc -l <<<"${images}")" -eq 1 ]] ||
    die "several candidate images in config/default (${images//$'\n'/ }); set KRAY_CONFIG_IMAGE"
  # Strip the tag or digest: kustomize's images transformer matches by name.
  local image="${images%@*}"
  [[ "${image##*/}" == *:* ]] && image="${image%:*}"
  printf '%s' "${image}"
}

deploy_operator() {
  local overlay="${WORK_DIR}/overlay" name="${IMAGE%:*}" tag="${IMAGE##*:}" from
  from="$(config_image)"
  [[ "${IMAGE}" == *:* ]] || tag=latest
  mkdir -p "${overlay}"
  # kustomize refuses absolute resource paths; a relative one may leave the overlay's root.
  cat >"${overlay}/kustomization.yaml" <<EOF
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- $(realpath --relative-to="${overlay}" "${ROOT}/config/default")
images:
- name: ${from}
  newName: ${name}
  newTag: ${tag}
EOF
  log "deploying config/default with ${from} -> ${IMAGE}"
  kubectl kustomize "${overlay}" >"${WORK_DIR}/kray.yaml"
  # Server-side apply: the RayCluster CRD is too large for the last-applied annotation.
  kubectl apply --server-side --force-conflicts -f "${WORK_DIR}/kray.yaml" >&2
  local d
  while IFS= read -r d; do
    [[ -n "${d}" ]] && OPERATOR_DEPLOYMENTS+=("${d}")
  done < <(kubectl get -f "${WORK_DIR}/kray.yaml" \
    -o jsonpath='{range .items[?(@.kind=="Deployment")]}{.metadata.namespace}/{.metadata.name}{"\n"}{end}')
  ((${#OPERATOR_DEPLOYMENTS[@]} > 0)) || die "config/default has no Deployment"
  for d in "${OPERATOR_DEPLOYMENTS[@]}"; do
    log "waiting for deployment ${d}"
    kubectl -n "${d%%/*}" rollout status "deployment/${d#*/}" --timeout=5m >&2
  done
}

run_e2e() {
  local extra=()
  read -r -a extra <<<"${KRAY_E2E_GO_TEST_ARGS:-}"
  log "running the e2e suite (timeout ${E2E_TIMEOUT})"
  (
    cd "${ROOT}"
    local pulling=false
    if [[ ",${KRUISE_FEATURE_GATES}," == *",ImagePullJobGate=true,"* && ",${KRUISE_FEATURE_GATES}," == *",KruiseDaemon=true,"* ]]; then
      pulling=true
    fi
    KUBECONFIG="${KUBECONFIG_FILE}" KRAY_E2E_OPERATOR=external KRAY_KRUISE_IMAGE_PULLING="${pulling}" \
      go test ./test/e2e/... -v -timeout "${E2E_TIMEOUT}" "${extra[@]}"
  )
}

main() {
  require_tools
  create_cluster
  install_kruise
  build_and_load_image
  deploy_operator
  run_e2e
  log "e2e passed"
}

main "$@"
