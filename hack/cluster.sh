#!/usr/bin/env bash
# hack/cluster.sh runs kray's local cluster: a real control plane built from Go modules (etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler), kwok for fake nodes and pods, and the real OpenKruise manager
# running out of cluster. Every process listens on 127.0.0.1 (kruise's webhook server binds 0.0.0.0, which
# kruise hard-codes) and runs from bin/tools (built on demand by hack/tools.sh).
#
# Verbs:
#   up                  start whatever is not running and wait until everything is ready; ends by printing
#                       `export KUBECONFIG=<abs>/.local/kubeconfig`. Safe to repeat: with everything running it
#                       only re-checks readiness.
#   down [--purge]      stop the processes this script started (by PID file: SIGTERM, then SIGKILL after
#                       KRAY_STOP_TIMEOUT seconds). Keeps etcd data and PKI unless --purge or KRAY_PURGE=1,
#                       which delete the whole state directory.
#   status              one line per component; exit 0 only when every component is running and healthy.
#   env                 print export lines (KUBECONFIG and the endpoints) for `eval "$(hack/cluster.sh env)"`.
#   stop-kruise         stop only kruise-manager and wait until its ports are free (simulates a Kruise outage:
#                       CloneSet and Advanced StatefulSet writes are rejected while it is down).
#   start-kruise        start kruise-manager and wait until it is ready.
#   restart-kruise      stop-kruise, then start-kruise.
#   restart-apiserver   stop kube-apiserver (and kube-controller-manager) and start them again on the same etcd data.
#   start-kueue         start the real Kueue manager (KUEUE_VERSION, built on demand) out of cluster with its
#                       Ray integrations and no webhook configuration, and wait until it is ready.
#   stop-kueue          stop Kueue (its CRDs and objects stay). `down` stops it too.
#   start-scheduler-plugins
#                       start scheduler-plugins' coscheduling scheduler (SCHEDULER_PLUGINS_VERSION, built on demand)
#                       out of cluster beside kube-scheduler, with scheduler-plugins' PodGroup CRD, and wait until
#                       it is ready.
#   stop-scheduler-plugins
#                       stop it (the CRD and PodGroups stay). `down` stops it too.
#   start-yunikorn      start Apache YuniKorn's scheduler (YUNIKORN_VERSION, built on demand) out of cluster beside
#                       kube-scheduler, and wait until it is healthy.
#   stop-yunikorn       stop it. `down` stops it too.
#   start-cert-manager  start cert-manager's Issuer and Certificate controllers (CERT_MANAGER_VERSION, built on
#                       demand) out of cluster with cert-manager's CRDs, and wait until they are ready.
#   stop-cert-manager   stop them (the CRDs, Issuers, Certificates and Secrets stay). `down` stops them too.
#   install-volcano-crds
#                       apply Volcano's PodGroup and Queue CRDs (VOLCANO_VERSION's module; no Volcano scheduler runs).
#   install-gateway-crds
#                       apply the Gateway API's standard GatewayClass, Gateway and HTTPRoute CRDs (GATEWAY_API_VERSION's
#                       module; no Gateway controller or data plane runs).
#   kubeconfig-for-sa NAMESPACE SERVICEACCOUNT OUTFILE
#                       write a kubeconfig that authenticates as that ServiceAccount with a 24 h token from
#                       `kubectl create token`.
#
# Ports (all on 127.0.0.1, each overridable by its environment variable):
#   23791 etcd client          KRAY_ETCD_PORT
#   23801 etcd peer            KRAY_ETCD_PEER_PORT
#   26443 kube-apiserver       KRAY_APISERVER_PORT
#   26257 controller-manager   KRAY_CONTROLLER_MANAGER_PORT   (https /healthz)
#   26259 kube-scheduler       KRAY_SCHEDULER_PORT            (https /healthz)
#   26247 kwok                 KRAY_KWOK_PORT                 (http /healthz, /metrics)
#   29876 kruise webhook       KRAY_KRUISE_WEBHOOK_PORT       (binds 0.0.0.0)
#   29877 kruise health        KRAY_KRUISE_HEALTH_PORT        (http /readyz)
#   29878 kruise metrics       KRAY_KRUISE_METRICS_PORT
#   29880 kueue webhook        KRAY_KUEUE_WEBHOOK_PORT        (served, but no webhook configuration uses it)
#   29881 kueue health         KRAY_KUEUE_HEALTH_PORT         (http /readyz)
#   29882 kueue metrics        KRAY_KUEUE_METRICS_PORT
#   26260 scheduler-plugins    KRAY_SCHEDULER_PLUGINS_PORT    (https /healthz)
#    9080 yunikorn             fixed by YuniKorn, binds 0.0.0.0 (http /ws/v1/scheduler/healthcheck)
#   29890 cert-manager         KRAY_CERT_MANAGER_HEALTH_PORT  (http /readyz)
#
# Other environment:
#   KRAY_NODES=4  KRAY_NODE_CPU=1000  KRAY_NODE_MEMORY=2000Gi  KRAY_NODE_PODS=1000
#       kwok Node objects named kwok-node-<i>; the defaults hold 4,000 pods of 1 CPU / 2 GiB. With kept data,
#       `up` creates missing nodes, deletes surplus ones, and re-patches capacities that differ.
#   KRAY_SERVICE_CIDR=10.96.0.0/16  KRAY_POD_CIDR=10.244.0.1/16
#   KRAY_WAIT_TIMEOUT=60 (seconds per readiness wait)  KRAY_STOP_TIMEOUT=10  KRAY_PURGE=0
#   KRAY_KRUISE_PROFILE=recommended  kruise-manager's settings: recommended (KRUISE_RECOMMENDED_ARGS below, the
#       ones docs/operations.md gives for a Kruise that serves kray; measured in docs/benchmarks.md) or defaults
#       (Kruise v1.8's own: --rest-config-qps=30 --rest-config-burst=50, no alpha gate)
#   KRAY_KRUISE_POD_WEBHOOK=true  Kruise's PodWebhook gate, on as in a default Kruise install: every pod create,
#       update (not status), deletion and eviction passes through kruise-manager's webhooks; false turns it off
#   KRAY_KRUISE_IMAGE_PULLING=true  Kruise's image pulling gates (KruiseDaemon, ImagePullJobGate,
#       PreDownloadImageForInPlaceUpdate), for kray.io/image-prepull; false runs KruiseDaemon=false as before
#   KRAY_KRUISE_EXTRA_ARGS, KRAY_APISERVER_EXTRA_ARGS  extra flags, split on whitespace
#   KRAY_POD_START_DELAY_MS=0  KRAY_POD_START_JITTER_MS=0
#       a realistic pod start: kwok makes a pod Running after DELAY +- JITTER milliseconds (uniform) instead of
#       at once; applies when kwok starts (`down`, then `up`).
#   KRAY_LOCAL_DIR (default <repo>/.local)  KRAY_BIN_DIR (default <repo>/bin)
#
# State (KRAY_LOCAL_DIR): kubeconfig (admin, system:masters), pki/, kubeconfigs/ (one per component),
# etcd/ (data), logs/<component>.log (appended, one header per start), run/<component>.pid, kruise/ (webhook
# certs, protection log), kueue/ (config, certificates), manifests/ (rendered Kruise webhook configurations, nodes).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=hack/versions.sh
source "${ROOT}/hack/versions.sh"

ETCD_PORT="${KRAY_ETCD_PORT:-23791}"
ETCD_PEER_PORT="${KRAY_ETCD_PEER_PORT:-23801}"
APISERVER_PORT="${KRAY_APISERVER_PORT:-26443}"
CONTROLLER_MANAGER_PORT="${KRAY_CONTROLLER_MANAGER_PORT:-26257}"
SCHEDULER_PORT="${KRAY_SCHEDULER_PORT:-26259}"
KWOK_PORT="${KRAY_KWOK_PORT:-26247}"
KRUISE_WEBHOOK_PORT="${KRAY_KRUISE_WEBHOOK_PORT:-29876}"
KRUISE_HEALTH_PORT="${KRAY_KRUISE_HEALTH_PORT:-29877}"
KRUISE_METRICS_PORT="${KRAY_KRUISE_METRICS_PORT:-29878}"
KUEUE_WEBHOOK_PORT="${KRAY_KUEUE_WEBHOOK_PORT:-29880}"
KUEUE_HEALTH_PORT="${KRAY_KUEUE_HEALTH_PORT:-29881}"
KUEUE_METRICS_PORT="${KRAY_KUEUE_METRICS_PORT:-29882}"
CERT_MANAGER_HEALTH_PORT="${KRAY_CERT_MANAGER_HEALTH_PORT:-29890}"

NODES="${KRAY_NODES:-4}"
NODE_CPU="${KRAY_NODE_CPU:-1000}"
NODE_MEMORY="${KRAY_NODE_MEMORY:-2000Gi}"
NODE_PODS="${KRAY_NODE_PODS:-1000}"
SERVICE_CIDR="${KRAY_SERVICE_CIDR:-10.96.0.0/16}"
POD_CIDR="${KRAY_POD_CIDR:-10.244.0.1/16}"
WAIT_TIMEOUT="${KRAY_WAIT_TIMEOUT:-60}"
STOP_TIMEOUT="${KRAY_STOP_TIMEOUT:-10}"
KRUISE_PROFILE="${KRAY_KRUISE_PROFILE:-recommended}"
KRUISE_POD_WEBHOOK="${KRAY_KRUISE_POD_WEBHOOK:-true}"
KRUISE_IMAGE_PULLING="${KRAY_KRUISE_IMAGE_PULLING:-true}"
# kruise-manager flags kray recommends: a client rate that keeps up with a cluster's worth of pod writes (each
# CloneSet pod costs three), and CloneSet's event filter, which drops pod status updates that change nothing
# the CloneSet reads (label changes, such as a released drain hook, always pass).
KRUISE_RECOMMENDED_ARGS=(--rest-config-qps=100 --rest-config-burst=200 --feature-gates=CloneSetEventHandlerOptimization=true)
POD_START_DELAY_MS="${KRAY_POD_START_DELAY_MS:-0}"
POD_START_JITTER_MS="${KRAY_POD_START_JITTER_MS:-0}"

STATE_DIR="${KRAY_LOCAL_DIR:-${ROOT}/.local}"
BIN_DIR="${KRAY_BIN_DIR:-${ROOT}/bin}"
PKI_DIR="${STATE_DIR}/pki"
KUBECONFIG_DIR="${STATE_DIR}/kubeconfigs"
RUN_DIR="${STATE_DIR}/run"
LOG_DIR="${STATE_DIR}/logs"
MANIFEST_DIR="${STATE_DIR}/manifests"
KRUISE_DIR="${STATE_DIR}/kruise"
KUEUE_DIR="${STATE_DIR}/kueue"
SCHEDULER_PLUGINS_DIR="${STATE_DIR}/scheduler-plugins"
SCHEDULER_PLUGINS_PORT="${KRAY_SCHEDULER_PLUGINS_PORT:-26260}"
ADMIN_KUBECONFIG="${STATE_DIR}/kubeconfig"
# Marks a directory as this script's state, so `down --purge` never deletes anything else.
STATE_MARKER="${STATE_DIR}/.kray-local-cluster"
APISERVER_URL="https://127.0.0.1:${APISERVER_PORT}"

TOOLS="${BIN_DIR}/tools"
declare -A BINARY=(
  [etcd]="${TOOLS}/etcd-${ETCD_VERSION}/etcd"
  [kube-apiserver]="${TOOLS}/kubernetes-${KUBERNETES_VERSION}/kube-apiserver"
  [kube-controller-manager]="${TOOLS}/kubernetes-${KUBERNETES_VERSION}/kube-controller-manager"
  [kube-scheduler]="${TOOLS}/kubernetes-${KUBERNETES_VERSION}/kube-scheduler"
  [kwok]="${TOOLS}/kwok-${KWOK_VERSION}/kwok"
  # The kubelet's last step for kwok's nodes (test/poddelete), built from this repository.
  [poddelete]="${BIN_DIR}/poddelete"
  [kruise-manager]="${TOOLS}/kruise-${KRUISE_VERSION}/kruise-manager"
  # Kueue is optional (start-kueue), so it is not in COMPONENTS.
  [kueue]="${TOOLS}/kueue-${KUEUE_VERSION}/kueue"
  [scheduler-plugins]="${TOOLS}/scheduler-plugins-${SCHEDULER_PLUGINS_VERSION}/scheduler-plugins"
  [yunikorn]="${TOOLS}/yunikorn-${YUNIKORN_VERSION}/yunikorn-scheduler"
  [cert-manager]="${TOOLS}/cert-manager-${CERT_MANAGER_VERSION}/cert-manager-controller"
)
# LAUNCHER runs before a binary, in its process (see start_process); Kueue's sets up a private mount namespace.
declare -A LAUNCHER=()
# Start order; `down` stops in reverse.
COMPONENTS=(etcd kube-apiserver kube-scheduler kwok poddelete kube-controller-manager kruise-manager)

START_MS="$(date +%s%3N)"
log() { printf '[cluster %5.1fs] %s\n' "$(($(date +%s%3N) - START_MS))e-3" "$*" >&2; }
die() { printf '[cluster] ERROR: %s\n' "$*" >&2; exit 1; }

# k runs kubectl as the cluster admin.
k() { kubectl --kubeconfig "${ADMIN_KUBECONFIG}" "$@"; }

require_commands() {
  local c
  for c in openssl curl ss setsid flock kubectl go; do
    command -v "${c}" >/dev/null || die "'${c}' is required but not on PATH"
  done
}

# The functions, by concern.
for lib in processes pki components objects kueue schedulerplugins yunikorn certmanager volcano gateway; do
  # shellcheck source=/dev/null
  source "${ROOT}/hack/lib/${lib}.sh"
done

# ---------------------------------------------------------------------------------------------------------
# Verbs

# lock_state serialises the verbs that start or stop processes or write state, so that concurrent
# invocations (a developer and an e2e run, say) do not race on PID files and manifests. It holds an flock on
# .local/.lock through fd 9 until the script exits; started processes do not inherit fd 9.
lock_state() {
  mkdir -p "${STATE_DIR}"
  exec 9>>"${STATE_DIR}/.lock"
  if ! flock -n 9; then
    log "waiting for another hack/cluster.sh (lock ${STATE_DIR}/.lock)"
    flock -w 300 9 || die "another hack/cluster.sh still holds ${STATE_DIR}/.lock after 300 s"
  fi
}

prepare_state() {
  mkdir -p "${STATE_DIR}" "${RUN_DIR}" "${LOG_DIR}" "${MANIFEST_DIR}" "${KRUISE_DIR}"
  touch "${STATE_MARKER}"
}

cmd_up() {
  require_commands
  ensure_binaries
  lock_state
  prepare_state
  ensure_pki
  start_etcd
  ready_etcd
  start_kube_apiserver
  ready_kube_apiserver
  log "kube-apiserver ready"
  # Neither depends on the Kruise CRDs; start them while the CRDs install.
  start_kube_scheduler
  start_kwok
  start_poddelete
  switch_kruise_version
  install_kruise_crds
  start_kube_controller_manager
  ensure_nodes
  ensure_kruise_prerequisites
  start_kruise_manager
  ready_kube_scheduler
  ready_kwok
  wait_until kwok "kwok nodes Ready" nodes_ready
  ready_kube_controller_manager
  ready_kruise_manager
  log "cluster ready: ${NODES} kwok nodes (cpu=${NODE_CPU} memory=${NODE_MEMORY} pods=${NODE_PODS} each)"
  printf 'export KUBECONFIG=%s\n' "${ADMIN_KUBECONFIG}"
}

cmd_down() {
  local purge="${KRAY_PURGE:-0}"
  case "${1:-}" in
    --purge) purge=1 ;;
    "") ;;
    *) die "usage: $0 down [--purge]" ;;
  esac
  [[ -d "${STATE_DIR}" ]] || { log "nothing to stop (no ${STATE_DIR})"; return 0; }
  lock_state
  if [[ -d "${RUN_DIR}" ]]; then
    stop_processes cert-manager yunikorn scheduler-plugins kueue kruise-manager poddelete kwok kube-scheduler kube-controller-manager
    stop_processes kube-apiserver
    stop_processes etcd
  fi
  if [[ "${purge}" == 1 && -d "${STATE_DIR}" ]]; then
    [[ -f "${STATE_MARKER}" ]] || die "${STATE_DIR} has no ${STATE_MARKER##*/}; not deleting it"
    rm -rf "${STATE_DIR}"
    log "purged ${STATE_DIR}"
  fi
  log "down"
}

cmd_status() {
  local name state health all_ok=0
  for name in "${COMPONENTS[@]}"; do
    health="-"
    if is_running "${name}"; then
      state="running (pid $(<"$(pid_file "${name}")"))"
      case "${name}" in
        etcd) etcd_healthy && health=healthy || health=unhealthy ;;
        kube-apiserver) apiserver_ready && health=ready || health=unready ;;
        kube-controller-manager) https_healthz "${CONTROLLER_MANAGER_PORT}" && health=healthy || health=unhealthy ;;
        kube-scheduler) https_healthz "${SCHEDULER_PORT}" && health=healthy || health=unhealthy ;;
        kwok) http_ok "http://127.0.0.1:${KWOK_PORT}/healthz" && health=healthy || health=unhealthy ;;
        poddelete) health=healthy ;;
        kruise-manager) http_ok "http://127.0.0.1:${KRUISE_HEALTH_PORT}/readyz" && health=ready || health=unready ;;
      esac
      [[ "${health}" == healthy || "${health}" == ready ]] || all_ok=1
    elif [[ -f "$(pid_file "${name}")" ]]; then
      state="dead (stale pid file)"
      all_ok=1
    else
      state="stopped"
      all_ok=1
    fi
    printf '%-24s %-22s %s\n' "${name}" "${state}" "${health}"
  done
  return "${all_ok}"
}

cmd_env() {
  cat <<EOF
export KUBECONFIG=${ADMIN_KUBECONFIG}
export KRAY_LOCAL_DIR=${STATE_DIR}
export KRAY_APISERVER_URL=${APISERVER_URL}
export KRAY_ETCD_URL=http://127.0.0.1:${ETCD_PORT}
export KRAY_KRUISE_WEBHOOK_PORT=${KRUISE_WEBHOOK_PORT}
export KRAY_KRUISE_HEALTH_URL=http://127.0.0.1:${KRUISE_HEALTH_PORT}/readyz
EOF
}

require_apiserver() {
  apiserver_ready 2>/dev/null || die "the local cluster is not up (run: $0 up)"
}

cmd_stop_kruise() {
  lock_state
  stop_processes kruise-manager
  local deadline=$((SECONDS + STOP_TIMEOUT))
  # A restart before the old process has released its ports dies with address-in-use.
  while port_in_use "${KRUISE_WEBHOOK_PORT}" || port_in_use "${KRUISE_HEALTH_PORT}" ||
    port_in_use "${KRUISE_METRICS_PORT}"; do
    ((SECONDS < deadline)) || die "kruise ports still in use ${STOP_TIMEOUT}s after kruise-manager stopped"
    sleep 0.1
  done
}

cmd_start_kruise() {
  require_commands
  require_apiserver
  lock_state
  prepare_state
  install_kruise_crds
  ensure_kruise_prerequisites
  start_kruise_manager
  ready_kruise_manager
  log "kruise-manager ready"
}

cmd_start_kueue() {
  require_commands
  require_apiserver
  lock_state
  prepare_state
  mkdir -p "${KUEUE_DIR}"
  start_kueue
  ready_kueue
  log "kueue ready"
}

cmd_stop_kueue() {
  lock_state
  stop_processes kueue
}

cmd_start_scheduler_plugins() {
  require_commands
  require_apiserver
  lock_state
  prepare_state
  start_scheduler_plugins
  ready_scheduler_plugins
  log "scheduler-plugins ready"
}

cmd_stop_scheduler_plugins() {
  lock_state
  stop_processes scheduler-plugins
}

cmd_start_yunikorn() {
  require_commands
  require_apiserver
  lock_state
  prepare_state
  start_yunikorn
  ready_yunikorn
  log "yunikorn ready"
}

cmd_stop_yunikorn() {
  lock_state
  stop_processes yunikorn
}

cmd_start_cert_manager() {
  require_commands
  require_apiserver
  lock_state
  prepare_state
  start_certmanager
  ready_certmanager
  log "cert-manager ready"
}

cmd_stop_cert_manager() {
  lock_state
  stop_processes cert-manager
}

cmd_install_volcano_crds() {
  require_commands
  require_apiserver
  install_volcano_crds
  log "Volcano's CRDs established"
}

cmd_install_gateway_crds() {
  require_commands
  require_apiserver
  install_gateway_crds
  log "the Gateway API's CRDs established"
}

# cmd_restart_apiserver stops kube-apiserver and starts it again on the same etcd data (a control-plane
# blip for fault tests): every client's watches break and must resume. kube-controller-manager is down
# meanwhile: a restarted apiserver serves the built-in APIs a moment before the CRD groups are in discovery,
# and a namespace deletion resumed in that moment finds no RayCluster or CloneSet to delete and removes the
# namespace over them, orphaning them in etcd. It starts again once /readyz says discovery is complete.
cmd_restart_apiserver() {
  require_commands
  lock_state
  stop_processes kube-controller-manager kube-apiserver
  local deadline=$((SECONDS + STOP_TIMEOUT))
  while port_in_use "${APISERVER_PORT}" || port_in_use "${CONTROLLER_MANAGER_PORT}"; do
    ((SECONDS < deadline)) || die "kube-apiserver or kube-controller-manager port still in use ${STOP_TIMEOUT}s after they stopped"
    sleep 0.1
  done
  start_kube_apiserver
  ready_kube_apiserver
  start_kube_controller_manager
  ready_kube_controller_manager
  log "kube-apiserver restarted (kube-controller-manager with it)"
}

cmd_kubeconfig_for_sa() {
  [[ $# -eq 3 ]] || die "usage: $0 kubeconfig-for-sa NAMESPACE SERVICEACCOUNT OUTFILE"
  require_apiserver
  local token
  token="$(k create token "$2" -n "$1" --duration=24h)" || die "cannot create a token for $1/$2"
  mkdir -p "$(dirname -- "$3")"
  write_kubeconfig "$3" "system:serviceaccount:$1:$2" "token:${token}"
  log "wrote $3 (ServiceAccount $1/$2, token valid 24h)"
}

usage() {
  sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2
}

main() {
  local verb="${1:-}"
  [[ $# -gt 0 ]] && shift
  case "${verb}" in
    up) cmd_up "$@" ;;
    down) cmd_down "$@" ;;
    status) cmd_status "$@" ;;
    env) cmd_env "$@" ;;
    stop-kruise) cmd_stop_kruise ;;
    start-kruise) cmd_start_kruise ;;
    restart-kruise)
      cmd_stop_kruise
      cmd_start_kruise
      ;;
    restart-apiserver) cmd_restart_apiserver ;;
    start-kueue) cmd_start_kueue ;;
    stop-kueue) cmd_stop_kueue ;;
    start-scheduler-plugins) cmd_start_scheduler_plugins ;;
    stop-scheduler-plugins) cmd_stop_scheduler_plugins ;;
    start-yunikorn) cmd_start_yunikorn ;;
    stop-yunikorn) cmd_stop_yunikorn ;;
    start-cert-manager) cmd_start_cert_manager ;;
    stop-cert-manager) cmd_stop_cert_manager ;;
    install-volcano-crds) cmd_install_volcano_crds ;;
    install-gateway-crds) cmd_install_gateway_crds ;;
    kubeconfig-for-sa) cmd_kubeconfig_for_sa "$@" ;;
    -h | --help | help) usage ;;
    *)
      usage
      exit 2
      ;;
  esac
}

main "$@"
