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
#   restart-apiserver   stop kube-apiserver and start it again on the same etcd data (a control-plane blip).
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
#
# Other environment:
#   KRAY_NODES=4  KRAY_NODE_CPU=1000  KRAY_NODE_MEMORY=2000Gi  KRAY_NODE_PODS=1000
#       kwok Node objects named kwok-node-<i>; the defaults hold 4,000 pods of 1 CPU / 2 GiB. With kept data,
#       `up` creates missing nodes, deletes surplus ones, and re-patches capacities that differ.
#   KRAY_SERVICE_CIDR=10.96.0.0/16  KRAY_POD_CIDR=10.244.0.1/16
#   KRAY_WAIT_TIMEOUT=60 (seconds per readiness wait)  KRAY_STOP_TIMEOUT=10  KRAY_PURGE=0
#   KRAY_KRUISE_EXTRA_ARGS, KRAY_APISERVER_EXTRA_ARGS  extra flags, split on whitespace
#   KRAY_LOCAL_DIR (default <repo>/.local)  KRAY_BIN_DIR (default <repo>/bin)
#
# State (KRAY_LOCAL_DIR): kubeconfig (admin, system:masters), pki/, kubeconfigs/ (one per component),
# etcd/ (data), logs/<component>.log (appended, one header per start), run/<component>.pid, kruise/ (webhook
# certs, protection log), manifests/ (rendered Kruise webhook configurations, nodes).
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

NODES="${KRAY_NODES:-4}"
NODE_CPU="${KRAY_NODE_CPU:-1000}"
NODE_MEMORY="${KRAY_NODE_MEMORY:-2000Gi}"
NODE_PODS="${KRAY_NODE_PODS:-1000}"
SERVICE_CIDR="${KRAY_SERVICE_CIDR:-10.96.0.0/16}"
POD_CIDR="${KRAY_POD_CIDR:-10.244.0.1/16}"
WAIT_TIMEOUT="${KRAY_WAIT_TIMEOUT:-60}"
STOP_TIMEOUT="${KRAY_STOP_TIMEOUT:-10}"

STATE_DIR="${KRAY_LOCAL_DIR:-${ROOT}/.local}"
BIN_DIR="${KRAY_BIN_DIR:-${ROOT}/bin}"
PKI_DIR="${STATE_DIR}/pki"
KUBECONFIG_DIR="${STATE_DIR}/kubeconfigs"
RUN_DIR="${STATE_DIR}/run"
LOG_DIR="${STATE_DIR}/logs"
MANIFEST_DIR="${STATE_DIR}/manifests"
KRUISE_DIR="${STATE_DIR}/kruise"
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
  [kruise-manager]="${TOOLS}/kruise-${KRUISE_VERSION}/kruise-manager"
)
# Start order; `down` stops in reverse.
COMPONENTS=(etcd kube-apiserver kube-scheduler kwok kube-controller-manager kruise-manager)

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

# ---------------------------------------------------------------------------------------------------------
# Processes

pid_file() { printf '%s/%s.pid' "${RUN_DIR}" "$1"; }

# is_running NAME succeeds when NAME's PID file names a live (non-zombie) process running NAME's binary.
# Checking the executable guards against a recycled PID.
is_running() {
  local file pid argv0 state
  file="$(pid_file "$1")"
  [[ -f "${file}" ]] || return 1
  pid="$(<"${file}")"
  [[ "${pid}" =~ ^[0-9]+$ && -r "/proc/${pid}/cmdline" ]] || return 1
  argv0="$(tr '\0' '\n' <"/proc/${pid}/cmdline" 2>/dev/null | head -n1)" || return 1
  [[ "$(basename -- "${argv0}")" == "$(basename -- "${BINARY[$1]}")" ]] || return 1
  state="$(awk '{print $3}' "/proc/${pid}/stat" 2>/dev/null)" || return 1
  [[ "${state}" != "Z" ]]
}

# log_tail NAME prints the end of NAME's log to stderr.
log_tail() {
  printf -- '----- last lines of %s -----\n' "${LOG_DIR}/$1.log" >&2
  tail -n "${2:-30}" "${LOG_DIR}/$1.log" >&2 2>/dev/null || true
  printf -- '-----\n' >&2
}

# port_in_use PORT succeeds when something listens on TCP PORT (any address).
port_in_use() {
  [[ -n "$(ss -Hltn "sport = :$1" 2>/dev/null)" ]]
}

# require_free_ports NAME PORT... aborts when one of NAME's ports is taken by someone else.
require_free_ports() {
  local name="$1" port
  shift
  for port in "$@"; do
    if port_in_use "${port}"; then
      ss -Hltnp "sport = :${port}" >&2 || true
      die "${name}: port ${port} is already in use (override it with its KRAY_*_PORT variable)"
    fi
  done
}

# start_process NAME [VAR=value...] -- ARGS... starts NAME's binary detached in its own session, with its
# output appended to logs/NAME.log, and records the PID of the binary itself in run/NAME.pid.
start_process() {
  local name="$1" file
  shift
  local envs=()
  while [[ $# -gt 0 && "$1" != "--" ]]; do
    envs+=("$1")
    shift
  done
  shift
  file="$(pid_file "${name}")"
  rm -f "${file}"
  printf '===== %s: %s %s\n' "$(date -u +%FT%TZ)" "${BINARY[${name}]}" "$*" >>"${LOG_DIR}/${name}.log"
  # The inner shell writes its own PID, then execs the binary, so the PID file names the binary whether or
  # not setsid had to fork.
  # shellcheck disable=SC2016 # expanded by the inner shell
  # fd 9 (the state lock) is closed so the long-running process does not hold the lock.
  setsid env "${envs[@]}" bash -c 'echo $$ >"$0.tmp" && mv "$0.tmp" "$0" && exec "$@"' \
    "${file}" "${BINARY[${name}]}" "$@" >>"${LOG_DIR}/${name}.log" 2>&1 </dev/null 9>&- &
  local i
  for ((i = 0; i < 50; i++)); do
    [[ -f "${file}" ]] && break
    sleep 0.02
  done
  [[ -f "${file}" ]] || die "${name}: no PID file after start"
  log "${name}: started (pid $(<"${file}"))"
}

# wait_until NAME DESCRIPTION COMMAND... polls COMMAND until it succeeds. It aborts, with NAME's log tail,
# when NAME's process has died or KRAY_WAIT_TIMEOUT has passed.
wait_until() {
  local name="$1" what="$2"
  shift 2
  local deadline=$((SECONDS + WAIT_TIMEOUT))
  until "$@" >/dev/null 2>&1; do
    if ! is_running "${name}"; then
      log_tail "${name}"
      die "${name} exited while waiting for: ${what}"
    fi
    if ((SECONDS >= deadline)); then
      log_tail "${name}"
      die "${name}: timed out after ${WAIT_TIMEOUT}s waiting for: ${what}"
    fi
    sleep 0.1
  done
}

# stop_processes NAME... sends SIGTERM to those of NAME... that run, waits up to KRAY_STOP_TIMEOUT for all
# of them, sends SIGKILL to the rest, and removes their PID files. Processes without a valid PID file are
# never touched.
stop_processes() {
  local name pids=() names=()
  for name in "$@"; do
    if is_running "${name}"; then
      pids+=("$(<"$(pid_file "${name}")")")
      names+=("${name}")
      kill -TERM "${pids[-1]}" 2>/dev/null || true
    fi
  done
  local deadline=$((SECONDS + STOP_TIMEOUT)) i alive
  while true; do
    alive=0
    for i in "${!names[@]}"; do
      if is_running "${names[$i]}"; then
        alive=1
      fi
    done
    ((alive == 0)) && break
    if ((SECONDS >= deadline)); then
      for i in "${!names[@]}"; do
        if is_running "${names[$i]}"; then
          log "${names[$i]}: still running after ${STOP_TIMEOUT}s, sending SIGKILL"
          kill -KILL "${pids[$i]}" 2>/dev/null || true
        fi
      done
      deadline=$((SECONDS + 5))
    fi
    sleep 0.1
  done
  for name in "$@"; do
    rm -f "$(pid_file "${name}")"
  done
  for name in "${names[@]}"; do
    log "${name}: stopped"
  done
}

# ---------------------------------------------------------------------------------------------------------
# Binaries, PKI and kubeconfigs

ensure_binaries() {
  local name missing=()
  for name in "${COMPONENTS[@]}"; do
    [[ -x "${BINARY[${name}]}" ]] || missing+=("${name}")
  done
  ((${#missing[@]} == 0)) && return 0
  log "building missing binaries (${missing[*]}) with hack/tools.sh; a cold build takes ~15 minutes"
  KRAY_BIN_DIR="${BIN_DIR}" "${ROOT}/hack/tools.sh" kube etcd kwok kruise
}

# first_service_ip prints the first address of KRAY_SERVICE_CIDR (the `kubernetes` Service's ClusterIP).
first_service_ip() {
  local net="${SERVICE_CIDR%/*}"
  printf '%s.%d' "${net%.*}" "$((${net##*.} + 1))"
}

# new_ca NAME CN creates pki/NAME.{crt,key} as a self-signed CA unless it exists.
new_ca() {
  [[ -f "${PKI_DIR}/$1.crt" ]] && return 0
  openssl ecparam -name prime256v1 -genkey -noout -out "${PKI_DIR}/$1.key" 2>/dev/null
  openssl req -x509 -new -sha256 -days 3650 -key "${PKI_DIR}/$1.key" -subj "/CN=$2" -out "${PKI_DIR}/$1.crt" \
    -config <(printf '[req]\ndistinguished_name=dn\nx509_extensions=ext\n[dn]\n[ext]\n%s\n%s\n%s\n' \
      'basicConstraints=critical,CA:TRUE' 'keyUsage=critical,keyCertSign,cRLSign,digitalSignature' \
      'subjectKeyIdentifier=hash')
}

# new_cert NAME CA SUBJECT USAGE [SAN] creates pki/NAME.{crt,key} signed by pki/CA unless it exists.
# USAGE is serverAuth or clientAuth.
new_cert() {
  local name="$1" ca="$2" subject="$3" usage="$4" san="${5:-}"
  [[ -f "${PKI_DIR}/${name}.crt" ]] && return 0
  local ext
  ext="$(printf 'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n')"
  ext+=$'\n'"extendedKeyUsage=${usage}"
  [[ -n "${san}" ]] && ext+=$'\n'"subjectAltName=${san}"
  openssl ecparam -name prime256v1 -genkey -noout -out "${PKI_DIR}/${name}.key" 2>/dev/null
  openssl req -new -key "${PKI_DIR}/${name}.key" -subj "${subject}" -out "${PKI_DIR}/${name}.csr"
  openssl x509 -req -sha256 -days 3650 -in "${PKI_DIR}/${name}.csr" -CA "${PKI_DIR}/${ca}.crt" \
    -CAkey "${PKI_DIR}/${ca}.key" -set_serial "0x$(openssl rand -hex 16)" -extfile <(printf '%s\n' "${ext}") \
    -out "${PKI_DIR}/${name}.crt" 2>/dev/null
  rm -f "${PKI_DIR}/${name}.csr"
}

# write_kubeconfig FILE USER (CERT_NAME | token:TOKEN) writes a self-contained kubeconfig for the local
# apiserver, authenticating with pki/CERT_NAME.{crt,key} or a bearer token.
write_kubeconfig() {
  local file="$1" user="$2" cred="$3" auth
  if [[ "${cred}" == token:* ]]; then
    auth="    token: ${cred#token:}"
  else
    auth="    client-certificate-data: $(base64 -w0 <"${PKI_DIR}/${cred}.crt")
    client-key-data: $(base64 -w0 <"${PKI_DIR}/${cred}.key")"
  fi
  (
    umask 077
    cat >"${file}.tmp" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: kray-local
  cluster:
    server: ${APISERVER_URL}
    certificate-authority-data: $(base64 -w0 <"${PKI_DIR}/ca.crt")
users:
- name: ${user}
  user:
${auth}
contexts:
- name: kray-local
  context:
    cluster: kray-local
    user: ${user}
current-context: kray-local
EOF
  )
  mv -f "${file}.tmp" "${file}"
}

# ensure_pki creates the CAs, certificates, service-account keys and kubeconfigs that are missing. The
# apiserver's serving certificate covers 127.0.0.1, localhost and the in-cluster names of `kubernetes`.
ensure_pki() {
  mkdir -p "${PKI_DIR}" "${KUBECONFIG_DIR}"
  chmod 700 "${PKI_DIR}"
  new_ca ca kray-local-ca
  new_ca front-proxy-ca kray-local-front-proxy-ca
  new_cert apiserver ca "/CN=kube-apiserver" serverAuth \
    "IP:127.0.0.1,IP:$(first_service_ip),DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
  new_cert front-proxy-client front-proxy-ca "/CN=front-proxy-client" clientAuth
  # kwok and kruise-manager run as system:masters: the local cluster has no RBAC for them.
  new_cert admin ca "/O=system:masters/CN=kray-admin" clientAuth
  new_cert kube-controller-manager ca "/CN=system:kube-controller-manager" clientAuth
  new_cert kube-scheduler ca "/CN=system:kube-scheduler" clientAuth
  new_cert kwok ca "/O=system:masters/CN=kwok" clientAuth
  new_cert kruise-manager ca "/O=system:masters/CN=kruise-manager" clientAuth
  if [[ ! -f "${PKI_DIR}/sa.key" ]]; then
    openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "${PKI_DIR}/sa.key" 2>/dev/null
    openssl pkey -in "${PKI_DIR}/sa.key" -pubout -out "${PKI_DIR}/sa.pub"
  fi
  [[ -f "${ADMIN_KUBECONFIG}" ]] || write_kubeconfig "${ADMIN_KUBECONFIG}" kray-admin admin
  local name
  for name in kube-controller-manager kube-scheduler kwok kruise-manager; do
    [[ -f "${KUBECONFIG_DIR}/${name}.kubeconfig" ]] ||
      write_kubeconfig "${KUBECONFIG_DIR}/${name}.kubeconfig" "${name}" "${name}"
  done
}

# ---------------------------------------------------------------------------------------------------------
# Components: start_<name> starts the process when it is not running; ready_<name> waits for readiness.

start_etcd() {
  is_running etcd && return 0
  require_free_ports etcd "${ETCD_PORT}" "${ETCD_PEER_PORT}"
  mkdir -p "${STATE_DIR}/etcd"
  chmod 700 "${STATE_DIR}/etcd"
  start_process etcd -- \
    --name=kray \
    --data-dir="${STATE_DIR}/etcd" \
    --listen-client-urls="http://127.0.0.1:${ETCD_PORT}" \
    --advertise-client-urls="http://127.0.0.1:${ETCD_PORT}" \
    --listen-peer-urls="http://127.0.0.1:${ETCD_PEER_PORT}" \
    --initial-advertise-peer-urls="http://127.0.0.1:${ETCD_PEER_PORT}" \
    --initial-cluster="kray=http://127.0.0.1:${ETCD_PEER_PORT}" \
    --unsafe-no-fsync \
    --quota-backend-bytes=8589934592 \
    --log-level=warn
}

etcd_healthy() { curl -sf --max-time 2 "http://127.0.0.1:${ETCD_PORT}/health" | grep -q '"health":"true"'; }
ready_etcd() { wait_until etcd "etcd /health" etcd_healthy; }

start_kube_apiserver() {
  is_running kube-apiserver && return 0
  require_free_ports kube-apiserver "${APISERVER_PORT}"
  local extra=()
  read -r -a extra <<<"${KRAY_APISERVER_EXTRA_ARGS:-}"
  start_process kube-apiserver -- \
    --etcd-servers="http://127.0.0.1:${ETCD_PORT}" \
    --bind-address=127.0.0.1 \
    --advertise-address=127.0.0.1 \
    --secure-port="${APISERVER_PORT}" \
    --tls-cert-file="${PKI_DIR}/apiserver.crt" \
    --tls-private-key-file="${PKI_DIR}/apiserver.key" \
    --client-ca-file="${PKI_DIR}/ca.crt" \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="${PKI_DIR}/sa.pub" \
    --service-account-signing-key-file="${PKI_DIR}/sa.key" \
    --service-cluster-ip-range="${SERVICE_CIDR}" \
    --authorization-mode=RBAC \
    --endpoint-reconciler-type=none \
    --allow-privileged=true \
    --requestheader-client-ca-file="${PKI_DIR}/front-proxy-ca.crt" \
    --requestheader-allowed-names=front-proxy-client \
    --requestheader-username-headers=X-Remote-User \
    --requestheader-group-headers=X-Remote-Group \
    --requestheader-extra-headers-prefix=X-Remote-Extra- \
    --proxy-client-cert-file="${PKI_DIR}/front-proxy-client.crt" \
    --proxy-client-key-file="${PKI_DIR}/front-proxy-client.key" \
    "${extra[@]}"
}

apiserver_ready() {
  [[ "$(curl -s --max-time 2 --cacert "${PKI_DIR}/ca.crt" --cert "${PKI_DIR}/admin.crt" \
    --key "${PKI_DIR}/admin.key" "${APISERVER_URL}/readyz")" == ok ]]
}
ready_kube_apiserver() { wait_until kube-apiserver "kube-apiserver /readyz" apiserver_ready; }

start_kube_controller_manager() {
  is_running kube-controller-manager && return 0
  require_free_ports kube-controller-manager "${CONTROLLER_MANAGER_PORT}"
  local kc="${KUBECONFIG_DIR}/kube-controller-manager.kubeconfig"
  start_process kube-controller-manager -- \
    --kubeconfig="${kc}" \
    --authentication-kubeconfig="${kc}" \
    --authorization-kubeconfig="${kc}" \
    --bind-address=127.0.0.1 \
    --secure-port="${CONTROLLER_MANAGER_PORT}" \
    --controllers='*' \
    --use-service-account-credentials=true \
    --service-account-private-key-file="${PKI_DIR}/sa.key" \
    --root-ca-file="${PKI_DIR}/ca.crt" \
    --cluster-signing-cert-file="${PKI_DIR}/ca.crt" \
    --cluster-signing-key-file="${PKI_DIR}/ca.key" \
    --service-cluster-ip-range="${SERVICE_CIDR}" \
    --leader-elect=false \
    --kube-api-qps=100 \
    --kube-api-burst=200
}

https_healthz() { [[ "$(curl -sk --max-time 2 "https://127.0.0.1:$1/healthz")" == ok ]]; }
# The controller-manager creates each namespace's `default` ServiceAccount; no pod is admitted before it.
default_sa_exists() { k get serviceaccount default -n default -o name; }
ready_kube_controller_manager() {
  wait_until kube-controller-manager "kube-controller-manager /healthz" https_healthz "${CONTROLLER_MANAGER_PORT}"
  wait_until kube-controller-manager "ServiceAccount default/default" default_sa_exists
}

start_kube_scheduler() {
  is_running kube-scheduler && return 0
  require_free_ports kube-scheduler "${SCHEDULER_PORT}"
  local kc="${KUBECONFIG_DIR}/kube-scheduler.kubeconfig" config="${STATE_DIR}/kube-scheduler.yaml"
  cat >"${config}" <<EOF
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: ${kc}
  qps: 200
  burst: 400
leaderElection:
  leaderElect: false
EOF
  start_process kube-scheduler -- \
    --config="${config}" \
    --authentication-kubeconfig="${kc}" \
    --authorization-kubeconfig="${kc}" \
    --bind-address=127.0.0.1 \
    --secure-port="${SCHEDULER_PORT}"
}
ready_kube_scheduler() { wait_until kube-scheduler "kube-scheduler /healthz" https_healthz "${SCHEDULER_PORT}"; }

start_kwok() {
  is_running kwok && return 0
  require_free_ports kwok "${KWOK_PORT}"
  # kwok always loads ~/.kwok/kwok.yaml when it exists; a private HOME keeps a user's file out. Without
  # --node-lease-duration-seconds kwok heartbeats by node status every 20-45 s, close to the controller
  # manager's grace period; with it, kwok renews a Lease every 10 s.
  mkdir -p "${STATE_DIR}/kwok-home"
  start_process kwok HOME="${STATE_DIR}/kwok-home" -- \
    --kubeconfig="${KUBECONFIG_DIR}/kwok.kubeconfig" \
    --manage-all-nodes=true \
    --cidr="${POD_CIDR}" \
    --node-ip=127.0.0.1 \
    --node-lease-duration-seconds=40 \
    --config="${ROOT}/hack/kwok/stages.yaml" \
    --server-address="127.0.0.1:${KWOK_PORT}"
}
http_ok() { curl -sf --max-time 2 "$1" >/dev/null; }
ready_kwok() { wait_until kwok "kwok /healthz" http_ok "http://127.0.0.1:${KWOK_PORT}/healthz"; }

start_kruise_manager() {
  is_running kruise-manager && return 0
  require_free_ports kruise-manager "${KRUISE_WEBHOOK_PORT}" "${KRUISE_HEALTH_PORT}" "${KRUISE_METRICS_PORT}"
  # kruise creates the protection log directory without the x bit when it is missing; pre-create it.
  mkdir -p "${KRUISE_DIR}/webhook-certs" "${KRUISE_DIR}/protection-log"
  chmod 755 "${KRUISE_DIR}/protection-log"
  local extra=()
  read -r -a extra <<<"${KRAY_KRUISE_EXTRA_ARGS:-}"
  start_process kruise-manager \
    WEBHOOK_HOST=127.0.0.1 \
    WEBHOOK_PORT="${KRUISE_WEBHOOK_PORT}" \
    WEBHOOK_CERT_DIR="${KRUISE_DIR}/webhook-certs" \
    WEBHOOK_CERT_WRITER=fs \
    POD_NAMESPACE=kruise-system \
    -- \
    --kubeconfig="${KUBECONFIG_DIR}/kruise-manager.kubeconfig" \
    --enable-leader-election=false \
    --feature-gates=PodWebhook=false,KruiseDaemon=false \
    --protection-log-path="${KRUISE_DIR}/protection-log" \
    --metrics-addr="127.0.0.1:${KRUISE_METRICS_PORT}" \
    --health-probe-addr="127.0.0.1:${KRUISE_HEALTH_PORT}" \
    --enable-pprof=false \
    "${extra[@]}"
}

# kruise_webhooks_rewritten succeeds when kruise has pointed every webhook of both configurations, and the
# Advanced StatefulSet conversion webhook if one is set, at this run's webhook port.
kruise_webhooks_rewritten() {
  local want="https://127.0.0.1:${KRUISE_WEBHOOK_PORT}/" urls url
  urls="$(k get mutatingwebhookconfiguration/kruise-mutating-webhook-configuration \
    validatingwebhookconfiguration/kruise-validating-webhook-configuration \
    -o jsonpath='{range .items[*].webhooks[*]}{.clientConfig.url}{"\n"}{end}')" || return 1
  [[ -n "${urls}" ]] || return 1
  while IFS= read -r url; do
    [[ "${url}" == "${want}"* ]] || return 1
  done <<<"${urls}"
  url="$(k get crd statefulsets.apps.kruise.io -o jsonpath='{.spec.conversion.webhook.clientConfig.url}')" ||
    return 1
  [[ -z "${url}" || "${url}" == "${want}"* ]]
}
ready_kruise_manager() {
  wait_until kruise-manager "kruise-manager /readyz" http_ok "http://127.0.0.1:${KRUISE_HEALTH_PORT}/readyz"
  wait_until kruise-manager "kruise webhook configurations pointing at 127.0.0.1:${KRUISE_WEBHOOK_PORT}" \
    kruise_webhooks_rewritten
}

# ---------------------------------------------------------------------------------------------------------
# Objects

# kruise_module_dir prints the module cache directory of github.com/openkruise/kruise@KRUISE_VERSION.
kruise_module_dir() {
  local dir
  dir="$(cd / && GOFLAGS=-mod=mod go mod download -json "github.com/openkruise/kruise@${KRUISE_VERSION}" |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')"
  [[ -d "${dir}" ]] || die "cannot locate github.com/openkruise/kruise@${KRUISE_VERSION} in the module cache"
  printf '%s' "${dir}"
}

# create_if_absent FILE creates the objects of FILE that do not exist yet and leaves existing ones alone:
# re-applying the Kruise webhook configurations after kruise rewrote them would merge `url` and `service`,
# which the apiserver rejects.
create_if_absent() {
  local out
  if ! out="$(k create -f "$1" 2>&1)"; then
    if grep -i '^error' <<<"${out}" | grep -q -v 'AlreadyExists'; then
      printf '%s\n' "${out}" >&2
      die "creating the objects of $1 failed"
    fi
  fi
}

# install_kruise_crds applies the CRDs of the Kruise module with server-side apply (they are too large for
# client-side apply) and waits until they are established. It must run before kube-controller-manager
# starts, or the garbage collector learns the Kruise owner kinds only at its next discovery resync. A
# marker file skips the apply on later runs when every CRD is still there.
install_kruise_crds() {
  local marker="${MANIFEST_DIR}/kruise-crds-${KRUISE_VERSION}.applied" bases names=() f base existing absent=0
  bases="$(kruise_module_dir)/config/crd/bases"
  for f in "${bases}"/*.yaml; do
    base="${f##*/}"
    base="${base%.yaml}"
    names+=("customresourcedefinition.apiextensions.k8s.io/${base#*_}.${base%%_*}")
  done
  if [[ -f "${marker}" ]]; then
    # One list request: kubectl's client-side rate limit makes 18 single GETs take ~2 s.
    existing="$(k get customresourcedefinitions -o name)"
    for f in "${names[@]}"; do
      grep -qxF "${f}" <<<"${existing}" || absent=1
    done
    ((absent == 1)) || return 0
  fi
  log "installing ${#names[@]} Kruise CRDs from ${bases}"
  k apply --server-side --force-conflicts --field-manager=kray-cluster -f "${bases}" >/dev/null
  k wait --for=condition=Established --timeout="${WAIT_TIMEOUT}s" "${names[@]}" >/dev/null
  touch "${marker}"
}

# render_kruise_webhooks writes manifests/kruise-webhooks-VERSION.yaml: the module's config/webhook rendered
# as Kruise's own kustomization does (name prefix, service kruise-system/kruise-webhook-service, and the
# selectors of patch_manifests.yaml that keep built-in kinds out unless labelled), minus the Service.
render_kruise_webhooks() {
  local out="${MANIFEST_DIR}/kruise-webhooks-${KRUISE_VERSION}.yaml"
  if [[ ! -s "${out}" ]]; then
    local src tmp
    src="$(kruise_module_dir)/config/webhook"
    tmp="$(mktemp -d)"
    cp "${src}"/{manifests,patch_manifests,service,kustomizeconfig}.yaml "${tmp}/"
    chmod u+w "${tmp}"/*.yaml
    cat >"${tmp}/kustomization.yaml" <<'EOF'
namePrefix: kruise-
namespace: kruise-system
resources: [manifests.yaml, service.yaml]
patches: [{path: patch_manifests.yaml}]
configurations: [kustomizeconfig.yaml]
EOF
    kubectl kustomize "${tmp}" |
      awk 'BEGIN { RS = "\n---\n"; ORS = "\n---\n" } !/(^|\n)kind: Service\n/' >"${tmp}/rendered.yaml"
    mv -f "${tmp}/rendered.yaml" "${out}"
    rm -rf "${tmp}"
  fi
  printf '%s' "${out}"
}

# ensure_kruise_prerequisites creates namespace kruise-system and both webhook configurations when absent;
# kruise-manager exits after 20 s when a configuration is missing, and only ever updates them.
ensure_kruise_prerequisites() {
  local webhooks file="${MANIFEST_DIR}/kruise-prerequisites.yaml"
  webhooks="$(render_kruise_webhooks)"
  {
    printf 'apiVersion: v1\nkind: Namespace\nmetadata:\n  name: kruise-system\n---\n'
    cat "${webhooks}"
  } >"${file}"
  create_if_absent "${file}"
}

# node_manifest I prints Node kwok-node-I with the configured capacity.
node_manifest() {
  local name="kwok-node-$1"
  cat <<EOF
apiVersion: v1
kind: Node
metadata:
  name: ${name}
  annotations:
    node.alpha.kubernetes.io/ttl: "0"
    kwok.x-k8s.io/node: fake
    kray.local/capacity: cpu=${NODE_CPU},memory=${NODE_MEMORY},pods=${NODE_PODS}
  labels:
    kubernetes.io/arch: amd64
    kubernetes.io/hostname: ${name}
    kubernetes.io/os: linux
    kubernetes.io/role: agent
    node-role.kubernetes.io/agent: ""
    type: kwok
    kray.local/kwok-node: "true"
status:
  allocatable: {cpu: "${NODE_CPU}", memory: "${NODE_MEMORY}", pods: "${NODE_PODS}"}
  capacity: {cpu: "${NODE_CPU}", memory: "${NODE_MEMORY}", pods: "${NODE_PODS}"}
  nodeInfo:
    architecture: amd64
    kubeletVersion: fake
    kubeProxyVersion: fake
    operatingSystem: linux
  phase: Running
---
EOF
}

# ensure_nodes makes the kwok nodes match KRAY_NODES and the configured capacity. The annotation
# kray.local/capacity records the capacity last written, because the apiserver reports quantities in
# canonical form (1000 becomes 1k) and a Node's status is written separately from its metadata.
ensure_nodes() {
  local file="${MANIFEST_DIR}/nodes.yaml" i want="cpu=${NODE_CPU},memory=${NODE_MEMORY},pods=${NODE_PODS}"
  for ((i = 0; i < NODES; i++)); do node_manifest "${i}"; done >"${file}"
  create_if_absent "${file}"
  local name have pods status_patch
  status_patch="{\"status\":{\"capacity\":{\"cpu\":\"${NODE_CPU}\",\"memory\":\"${NODE_MEMORY}\",\"pods\":\"${NODE_PODS}\"},"
  status_patch+="\"allocatable\":{\"cpu\":\"${NODE_CPU}\",\"memory\":\"${NODE_MEMORY}\",\"pods\":\"${NODE_PODS}\"}}}"
  while read -r name have pods; do
    [[ -n "${name}" ]] || continue
    i="${name#kwok-node-}"
    if ! [[ "${i}" =~ ^[0-9]+$ ]] || ((i >= NODES)); then
      log "deleting surplus node ${name} (KRAY_NODES=${NODES})"
      k delete node "${name}" --wait=false >/dev/null
      continue
    fi
    if [[ "${have}" != "${want}" ]]; then
      k annotate node "${name}" --overwrite "kray.local/capacity=${want}" >/dev/null
    fi
    if [[ "${have}" != "${want}" || "${pods}" == "<none>" ]]; then
      log "setting capacity of node ${name}: ${want}"
      k patch node "${name}" --subresource=status --type=merge -p "${status_patch}" >/dev/null
    fi
  done < <(k get nodes -l kray.local/kwok-node=true --no-headers \
    -o custom-columns='NAME:.metadata.name,CAPACITY:.metadata.annotations.kray\.local/capacity,PODS:.status.capacity.pods')
}

# nodes_ready succeeds when KRAY_NODES kwok nodes exist and all are Ready.
nodes_ready() {
  local statuses
  statuses="$(k get nodes -l kray.local/kwok-node=true \
    -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}')" || return 1
  [[ "$(grep -cx True <<<"${statuses}")" -eq "${NODES}" && "$(grep -c . <<<"${statuses}")" -eq "${NODES}" ]]
}

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
    stop_processes kruise-manager kwok kube-scheduler kube-controller-manager
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

# cmd_restart_apiserver stops kube-apiserver and starts it again on the same etcd data (a control-plane
# blip for fault tests): every client's watches break and must resume.
cmd_restart_apiserver() {
  require_commands
  lock_state
  stop_processes kube-apiserver
  local deadline=$((SECONDS + STOP_TIMEOUT))
  while port_in_use "${APISERVER_PORT}"; do
    ((SECONDS < deadline)) || die "kube-apiserver port still in use ${STOP_TIMEOUT}s after it stopped"
    sleep 0.1
  done
  start_kube_apiserver
  ready_kube_apiserver
  log "kube-apiserver restarted"
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
    kubeconfig-for-sa) cmd_kubeconfig_for_sa "$@" ;;
    -h | --help | help) usage ;;
    *)
      usage
      exit 2
      ;;
  esac
}

main "$@"
