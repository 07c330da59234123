# shellcheck shell=bash
# Kueue for the local cluster: the real Kueue manager (sigs.k8s.io/kueue, KUEUE_VERSION), out of cluster, with
# only the Ray integrations (ray.io/raycluster, ray.io/rayjob) and no webhook configuration: workloads are
# queued when they are created suspended, which is what Kueue's mutating webhook would do. Sourced by
# hack/cluster.sh (verbs start-kueue, stop-kueue).

kueue_module_dir() { module_dir sigs.k8s.io/kueue "${KUEUE_VERSION}"; }

install_kueue_crds() {
  local bases
  bases="$(kueue_module_dir)/config/components/crd/bases"
  apply_crds "${bases}" "Kueue's CRDs"
  k create namespace kueue-system --dry-run=client -o yaml | k apply -f - >/dev/null
}

# kueue_certs writes a self-signed serving certificate for Kueue's webhook server (it always starts one and
# /readyz waits for it) and for its metrics server. Kueue reads the metrics certificate from the fixed path
# /etc/kueue/metrics/certs: start_kueue shows it there through an overlay of /etc in a private mount
# namespace, so nothing is written to the host's /etc.
kueue_certs() {
  local dir
  for dir in "${KUEUE_DIR}/webhook-certs" "${KUEUE_DIR}/etc/kueue/metrics/certs"; do
    [[ -f "${dir}/tls.crt" ]] && continue
    mkdir -p "${dir}"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 3650 -subj "/CN=kueue-local" \
      -addext "subjectAltName=IP:127.0.0.1,DNS:localhost" -keyout "${dir}/tls.key" -out "${dir}/tls.crt" 2>/dev/null
  done
}

kueue_config() {
  cat >"${KUEUE_DIR}/config.yaml" <<CONFIG
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: kueue-system
manageJobsWithoutQueueName: false
leaderElection:
  leaderElect: false
internalCertManagement:
  enable: false
health:
  healthProbeBindAddress: 127.0.0.1:${KUEUE_HEALTH_PORT}
metrics:
  bindAddress: 127.0.0.1:${KUEUE_METRICS_PORT}
webhook:
  host: 127.0.0.1
  port: ${KUEUE_WEBHOOK_PORT}
  certDir: ${KUEUE_DIR}/webhook-certs
featureGates:
  VisibilityOnDemand: false
integrations:
  frameworks:
  - ray.io/raycluster
  - ray.io/rayjob
CONFIG
}

start_kueue() {
  is_running kueue && return 0
  [[ -x "${BINARY[kueue]}" ]] || KRAY_BIN_DIR="${BIN_DIR}" "${ROOT}/hack/tools.sh" kueue
  require_free_ports kueue "${KUEUE_WEBHOOK_PORT}" "${KUEUE_HEALTH_PORT}" "${KUEUE_METRICS_PORT}"
  command -v unshare >/dev/null || die "'unshare' is required to run Kueue (util-linux)"
  mkdir -p "${KUEUE_DIR}/overlay-work"
  install_kueue_crds
  kueue_certs
  kueue_config
  # The launcher overlays /etc in a private mount namespace: the overlay's upper directory holds
  # kueue/metrics/certs, and the host's /etc stays as it is.
  cat >"${KUEUE_DIR}/launch.sh" <<LAUNCH
#!/bin/sh
exec unshare --mount --propagation private -- sh -c 'mount -t overlay overlay -o "lowerdir=/etc,upperdir=${KUEUE_DIR}/etc,workdir=${KUEUE_DIR}/overlay-work" /etc && exec "\$@"' kueue-overlay "\$@"
LAUNCH
  chmod +x "${KUEUE_DIR}/launch.sh"
  LAUNCHER[kueue]="${KUEUE_DIR}/launch.sh"
  start_process kueue KUBECONFIG="${ADMIN_KUBECONFIG}" -- --config="${KUEUE_DIR}/config.yaml" --zap-log-level=2
}

ready_kueue() {
  wait_until kueue "kueue /readyz" http_ok "http://127.0.0.1:${KUEUE_HEALTH_PORT}/readyz"
}
