#!/usr/bin/env bash
# hack/operator.sh runs bin/kray-operator out of cluster against the cluster in $KUBECONFIG (default: the
# local cluster), authenticated as the kray-operator ServiceAccount with exactly the RBAC in config/rbac, so
# a permission the operator lacks fails for real.
#
# Verbs:
#   start       apply config/rbac, mint the ServiceAccount kubeconfig, start the operator in the background
#               (PID in .local/run/kray-operator.pid, log in .local/logs/kray-operator.log), wait for /readyz
#   stop        SIGTERM the operator and wait; SIGKILL after 10 s
#   kill        SIGKILL the operator (a crash, for tests) and wait until it is gone
#   foreground  like start, but runs in the foreground (Ctrl-C stops it)
#   status      exit 0 when the operator is running
#   prepare     only the first step of start: kray's CRDs (applied and established), config/rbac, the
#               ServiceAccount kubeconfig
# Environment: KRAY_OPERATOR_ARGS (extra flags), KRAY_OPERATOR_CONFIG (a KubeRay Configuration file passed
# with --config instead of the metrics and probe flags), KRAY_OPERATOR_PROBE_PORT (default 28081),
# KRAY_OPERATOR_INSTANCE (a name for a second replica, e.g. for leader election tests: its own PID file and
# log, kray-operator-<name>.pid/.log; give it its own KRAY_OPERATOR_PROBE_PORT).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
LOCAL="${KRAY_LOCAL_DIR:-${ROOT}/.local}"
export KUBECONFIG="${KUBECONFIG:-${LOCAL}/kubeconfig}"
NAME="kray-operator${KRAY_OPERATOR_INSTANCE:+-${KRAY_OPERATOR_INSTANCE}}"
PID_FILE="${LOCAL}/run/${NAME}.pid"
LOG_FILE="${LOCAL}/logs/${NAME}.log"
SA_KUBECONFIG="${LOCAL}/kubeconfigs/kray-operator-sa.kubeconfig"
PROBE_PORT="${KRAY_OPERATOR_PROBE_PORT:-28081}"

log() { printf '[operator] %s\n' "$*" >&2; }

running() {
  [[ -f "${PID_FILE}" ]] && kill -0 "$(cat "${PID_FILE}")" 2>/dev/null
}

# PREPARED_ANNOTATION, on the kray-system namespace, holds the hash of the CRDs and RBAC prepare last applied
# to this cluster.
PREPARED_ANNOTATION="kray.local/prepared"

# prepared_hash prints a hash of what prepare applies: config/crd/bases and config/rbac.
prepared_hash() {
  find "${ROOT}/config/crd/bases" "${ROOT}/config/rbac" -type f -print0 | sort -z | xargs -0 cat | sha256sum | cut -c1-16
}

# prepare applies kray's CRDs and waits until they are established, grants the operator's ServiceAccount the
# ClusterRole from config/rbac and writes its kubeconfig. A cluster that already has exactly these CRDs and
# RBAC (the namespace's PREPARED_ANNOTATION) and a kubeconfig minted within the last 12 h of its 24 h token is
# left as it is: a test that restarts the operator pays for the restart only.
prepare() {
  mkdir -p "${LOCAL}/run" "${LOCAL}/logs" "${LOCAL}/kubeconfigs"
  local want
  want="$(prepared_hash)"
  if [[ -n "$(find "${SA_KUBECONFIG}" -mmin -720 2>/dev/null)" &&
    "$(kubectl get namespace kray-system -o "jsonpath={.metadata.annotations.kray\.local/prepared}" 2>/dev/null)" == "${want}" ]]; then
    return 0
  fi
  kubectl create namespace kray-system --dry-run=client -o yaml | kubectl apply -f - >/dev/null
  kubectl apply -k "${ROOT}/config/rbac" >/dev/null
  kubectl apply --server-side --force-conflicts -f "${ROOT}/config/crd/bases" >/dev/null
  # A CRD just created may report `conditions: null` for a moment, which kubectl wait takes for an error.
  local deadline=$((SECONDS + 60))
  until kubectl wait --for condition=established --timeout=10s -f "${ROOT}/config/crd/bases" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || { echo "kray's CRDs are not established after 60 s" >&2; return 1; }
    sleep 0.5
  done
  "${ROOT}/hack/cluster.sh" kubeconfig-for-sa kray-system kray-operator "${SA_KUBECONFIG}" >/dev/null
  kubectl annotate namespace kray-system --overwrite "${PREPARED_ANNOTATION}=${want}" >/dev/null
}

args() {
  printf '%s\n' --kubeconfig="${SA_KUBECONFIG}" --zap-log-level=info
  if [[ -n "${KRAY_OPERATOR_CONFIG:-}" ]]; then
    # The file sets the metrics and probe addresses (probeAddr must be 127.0.0.1:PROBE_PORT to be waited for).
    printf '%s\n' --config="${KRAY_OPERATOR_CONFIG}"
  else
    printf '%s\n' --metrics-bind-address=0 --health-probe-bind-address="127.0.0.1:${PROBE_PORT}"
  fi
  # shellcheck disable=SC2086
  [[ -n "${KRAY_OPERATOR_ARGS:-}" ]] && printf '%s\n' ${KRAY_OPERATOR_ARGS}
  return 0
}

wait_gone() {
  local pid="$1" i
  for ((i = 0; i < 100; i++)); do
    kill -0 "${pid}" 2>/dev/null || return 0
    sleep 0.1
  done
  return 1
}

start() {
  if running; then
    log "already running (pid $(cat "${PID_FILE}"))"
    return 0
  fi
  prepare
  local -a flags
  mapfile -t flags < <(args)
  printf '\n==== start %s ====\n' "$(date -u +%FT%TZ)" >>"${LOG_FILE}"
  "${ROOT}/bin/kray-operator" "${flags[@]}" >>"${LOG_FILE}" 2>&1 &
  echo $! >"${PID_FILE}"
  local i
  for ((i = 0; i < 300; i++)); do
    if ! running; then
      log "kray-operator exited during start; last log lines:"
      tail -n 30 "${LOG_FILE}" >&2
      return 1
    fi
    if curl -fsS "http://127.0.0.1:${PROBE_PORT}/readyz" >/dev/null 2>&1; then
      log "ready (pid $(cat "${PID_FILE}"), log ${LOG_FILE})"
      return 0
    fi
    sleep 0.1
  done
  log "not ready after 30 s"
  return 1
}

stop() {
  running || { rm -f "${PID_FILE}"; return 0; }
  local pid
  pid="$(cat "${PID_FILE}")"
  kill -TERM "${pid}" 2>/dev/null || true
  wait_gone "${pid}" || { kill -KILL "${pid}" 2>/dev/null || true; wait_gone "${pid}" || true; }
  rm -f "${PID_FILE}"
  log "stopped"
}

crash() {
  running || return 0
  local pid
  pid="$(cat "${PID_FILE}")"
  kill -KILL "${pid}" 2>/dev/null || true
  wait_gone "${pid}" || true
  rm -f "${PID_FILE}"
  log "killed with SIGKILL"
}

foreground() {
  prepare
  local -a flags
  mapfile -t flags < <(args)
  exec "${ROOT}/bin/kray-operator" "${flags[@]}" --zap-devel
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  kill) crash ;;
  foreground) foreground ;;
  status) running ;;
  prepare) prepare ;;
  *) echo "usage: $0 start|stop|kill|foreground|status" >&2; exit 2 ;;
esac
