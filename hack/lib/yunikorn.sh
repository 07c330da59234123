# shellcheck shell=bash
# Apache YuniKorn's scheduler for the local cluster (github.com/apache/yunikorn-k8shim, YUNIKORN_VERSION, built
# on demand against KUBERNETES_COMPAT_VERSION's modules), out of cluster beside kube-scheduler: pods whose
# schedulerName is yunikorn are bound by it, those of an application with task groups as a gang, behind
# placeholder pods it creates first. It needs no CRD; its configuration would be ConfigMaps in
# yunikorn-system (none: YuniKorn's defaults, a queue per namespace). Its REST API and health check listen on
# :9080, on every interface (the port is fixed in YuniKorn). Sourced by hack/cluster.sh (verbs
# start-yunikorn, stop-yunikorn).

YUNIKORN_NAMESPACE=yunikorn-system
YUNIKORN_PORT=9080

start_yunikorn() {
  is_running yunikorn && return 0
  [[ -x "${BINARY[yunikorn]}" ]] || KRAY_BIN_DIR="${BIN_DIR}" "${ROOT}/hack/tools.sh" yunikorn
  require_free_ports yunikorn "${YUNIKORN_PORT}"
  k get namespace "${YUNIKORN_NAMESPACE}" >/dev/null 2>&1 || k create namespace "${YUNIKORN_NAMESPACE}" >/dev/null
  start_process yunikorn KUBECONFIG="${ADMIN_KUBECONFIG}" NAMESPACE="${YUNIKORN_NAMESPACE}" --
}

yunikorn_healthy() {
  curl -sf --max-time 2 "http://127.0.0.1:${YUNIKORN_PORT}/ws/v1/scheduler/healthcheck" | grep -q '"Healthy":true'
}

ready_yunikorn() {
  wait_until yunikorn "yunikorn's health check" yunikorn_healthy
}
