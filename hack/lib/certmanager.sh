# shellcheck shell=bash
# cert-manager for the local cluster: its own Issuer, CertificateRequest and Certificate controllers with the
# SelfSigned and CA issuers (hack/certmanager, built on demand from github.com/cert-manager/cert-manager,
# CERT_MANAGER_VERSION), out of cluster, and its CRDs from the same module. No webhook runs: it defaults and
# validates objects, and kray writes whole ones. Sourced by hack/cluster.sh (verbs start-cert-manager,
# stop-cert-manager).

certmanager_module_dir() { module_dir github.com/cert-manager/cert-manager "${CERT_MANAGER_VERSION}"; }

install_certmanager_crds() {
  apply_crds "$(certmanager_module_dir)/deploy/crds" "cert-manager's CRDs"
}

start_certmanager() {
  is_running cert-manager && return 0
  [[ -x "${BINARY[cert-manager]}" ]] || KRAY_BIN_DIR="${BIN_DIR}" "${ROOT}/hack/tools.sh" cert-manager
  require_free_ports cert-manager "${CERT_MANAGER_HEALTH_PORT}"
  install_certmanager_crds
  start_process cert-manager -- --kubeconfig="${ADMIN_KUBECONFIG}" --health-address="127.0.0.1:${CERT_MANAGER_HEALTH_PORT}"
}

ready_certmanager() {
  wait_until cert-manager "cert-manager /readyz" http_ok "http://127.0.0.1:${CERT_MANAGER_HEALTH_PORT}/readyz"
}
