# shellcheck shell=bash
# hack/lib/components.sh: Components of the local cluster: start_<name> starts the process when it is not running; ready_<name> waits
# for readiness.
# Sourced by hack/cluster.sh, whose settings (ports, directories, BINARY, COMPONENTS) and helpers (log, die,
# k) it uses.

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
    --enable-admission-plugins=OwnerReferencesPermissionEnforcement \
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
  local stages
  stages="$(kwok_stages)"
  start_process kwok HOME="${STATE_DIR}/kwok-home" -- \
    --kubeconfig="${KUBECONFIG_DIR}/kwok.kubeconfig" \
    --manage-all-nodes=true \
    --cidr="${POD_CIDR}" \
    --node-ip=127.0.0.1 \
    --node-lease-duration-seconds=40 \
    --config="${stages}" \
    --server-address="127.0.0.1:${KWOK_PORT}"
}

# start_poddelete runs the kubelet's last step for kwok's nodes: hack/kwok/stages.yaml has no delete stage, and
# poddelete removes each deleted pod by UID (kwok's own delete stage deletes by name, which removes a newer pod
# of the same name when its request comes late).
start_poddelete() {
  is_running poddelete && return 0
  start_process poddelete -- --kubeconfig="${KUBECONFIG_DIR}/kwok.kubeconfig"
}

# kwok_stages prints the stages file kwok runs with: hack/kwok/stages.yaml, or, with a pod start delay, a
# copy in manifests/ whose kray-pod-ready stage waits a time drawn uniformly from
# [POD_START_DELAY_MS - POD_START_JITTER_MS, POD_START_DELAY_MS + POD_START_JITTER_MS] before a pod runs.
kwok_stages() {
  local src="${ROOT}/hack/kwok/stages.yaml"
  if (( POD_START_DELAY_MS == 0 && POD_START_JITTER_MS == 0 )); then
    printf '%s\n' "${src}"
    return
  fi
  (( POD_START_JITTER_MS <= POD_START_DELAY_MS )) || die "KRAY_POD_START_JITTER_MS must not exceed KRAY_POD_START_DELAY_MS"
  local out="${MANIFEST_DIR}/kwok-stages.yaml"
  mkdir -p "${MANIFEST_DIR}"
  awk -v lo="$((POD_START_DELAY_MS - POD_START_JITTER_MS))" -v hi="$((POD_START_DELAY_MS + POD_START_JITTER_MS))" '
    { print }
    /^  name: kray-pod-ready$/ { ready = 1 }
    ready && /^spec:$/ {
      printf "  delay:\n    durationMilliseconds: %d\n    jitterDurationMilliseconds: %d\n", lo, hi
      ready = 0
    }' "${src}" >"${out}"
  grep -q 'jitterDurationMilliseconds' "${out}" || die "could not add the pod start delay to ${out}"
  printf '%s\n' "${out}"
}
http_ok() { curl -sf --max-time 2 "$1" >/dev/null; }
ready_kwok() { wait_until kwok "kwok /healthz" http_ok "http://127.0.0.1:${KWOK_PORT}/healthz"; }

start_kruise_manager() {
  is_running kruise-manager && return 0
  require_free_ports kruise-manager "${KRUISE_WEBHOOK_PORT}" "${KRUISE_HEALTH_PORT}" "${KRUISE_METRICS_PORT}"
  # kruise creates the protection log directory without the x bit when it is missing; pre-create it.
  mkdir -p "${KRUISE_DIR}/webhook-certs" "${KRUISE_DIR}/protection-log"
  chmod 755 "${KRUISE_DIR}/protection-log"
  local extra=() profile=()
  read -r -a extra <<<"${KRAY_KRUISE_EXTRA_ARGS:-}"
  case "${KRUISE_PROFILE}" in
    recommended) profile=("${KRUISE_RECOMMENDED_ARGS[@]}") ;;
    defaults) ;;
    *) die "KRAY_KRUISE_PROFILE must be recommended or defaults, not '${KRUISE_PROFILE}'" ;;
  esac
  [[ "${KRUISE_POD_WEBHOOK}" == true || "${KRUISE_POD_WEBHOOK}" == false ]] ||
    die "KRAY_KRUISE_POD_WEBHOOK must be true or false, not '${KRUISE_POD_WEBHOOK}'"
  local gates="PodWebhook=${KRUISE_POD_WEBHOOK}"
  case "${KRUISE_IMAGE_PULLING}" in
    # The manager's side of image pulling (NodeImages, ImagePullJobs, CloneSet pre-download); no kruise-daemon
    # runs on kwok nodes, so no image is pulled: tests play the daemon's part on the NodeImages.
    true) gates+=",KruiseDaemon=true,ImagePullJobGate=true,PreDownloadImageForInPlaceUpdate=true" ;;
    false) gates+=",KruiseDaemon=false" ;;
    *) die "KRAY_KRUISE_IMAGE_PULLING must be true or false, not '${KRUISE_IMAGE_PULLING}'" ;;
  esac
  start_process kruise-manager \
    WEBHOOK_HOST=127.0.0.1 \
    WEBHOOK_PORT="${KRUISE_WEBHOOK_PORT}" \
    WEBHOOK_CERT_DIR="${KRUISE_DIR}/webhook-certs" \
    WEBHOOK_CERT_WRITER=fs \
    POD_NAMESPACE=kruise-system \
    -- \
    --kubeconfig="${KUBECONFIG_DIR}/kruise-manager.kubeconfig" \
    --enable-leader-election=false \
    --feature-gates="${gates}" \
    --protection-log-path="${KRUISE_DIR}/protection-log" \
    --metrics-addr="127.0.0.1:${KRUISE_METRICS_PORT}" \
    --health-probe-addr="127.0.0.1:${KRUISE_HEALTH_PORT}" \
    --enable-pprof=false \
    "${profile[@]}" \
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
