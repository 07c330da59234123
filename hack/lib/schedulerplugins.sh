# shellcheck shell=bash
# scheduler-plugins' coscheduling scheduler for the local cluster (sigs.k8s.io/scheduler-plugins,
# SCHEDULER_PLUGINS_VERSION, built on demand against KUBERNETES_COMPAT_VERSION's modules), out of cluster beside
# kube-scheduler: pods whose schedulerName is scheduler-plugins-scheduler are bound by it, those labelled with a
# PodGroup all or nothing. Sourced by hack/cluster.sh (verbs start-scheduler-plugins, stop-scheduler-plugins).

scheduler_plugins_module_dir() { module_dir sigs.k8s.io/scheduler-plugins "${SCHEDULER_PLUGINS_VERSION}"; }

# install_podgroup_crd applies scheduler-plugins' PodGroup CRD from its module and waits until it is established.
install_podgroup_crd() {
  local crd
  crd="$(scheduler_plugins_module_dir)/config/crd/bases/scheduling.x-k8s.io_podgroups.yaml"
  apply_crds "${crd}" "scheduler-plugins' PodGroup CRDs"
}

# scheduler_plugins_config writes the scheduler's configuration: one profile, scheduler-plugins-scheduler, with
# Coscheduling as the only queue sort and in every extension point, as scheduler-plugins' own coscheduling
# manifest does, and the admin kubeconfig (kube-scheduler's identity may not read PodGroups).
scheduler_plugins_config() {
  cat >"${SCHEDULER_PLUGINS_DIR}/config.yaml" <<CONFIG
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: false
clientConnection:
  kubeconfig: ${ADMIN_KUBECONFIG}
profiles:
- schedulerName: scheduler-plugins-scheduler
  plugins:
    multiPoint:
      enabled:
      - name: Coscheduling
    queueSort:
      enabled:
      - name: Coscheduling
      disabled:
      - name: "*"
  pluginConfig:
  - name: Coscheduling
    args:
      permitWaitingTimeSeconds: 10
CONFIG
}

# start_scheduler_plugins starts the scheduler. A gang it rejected is retried on a pod or PodGroup event, or
# when the unschedulable pods are flushed: after 10 s here instead of the default 5 minutes, so a gang waiting
# for capacity starts soon after the capacity comes.
start_scheduler_plugins() {
  is_running scheduler-plugins && return 0
  [[ -x "${BINARY[scheduler-plugins]}" ]] || KRAY_BIN_DIR="${BIN_DIR}" "${ROOT}/hack/tools.sh" scheduler-plugins
  require_free_ports scheduler-plugins "${SCHEDULER_PLUGINS_PORT}"
  mkdir -p "${SCHEDULER_PLUGINS_DIR}"
  install_podgroup_crd
  scheduler_plugins_config
  start_process scheduler-plugins -- --config="${SCHEDULER_PLUGINS_DIR}/config.yaml" \
    --bind-address=127.0.0.1 --secure-port="${SCHEDULER_PLUGINS_PORT}" --pod-max-in-unschedulable-pods-duration=10s
}

ready_scheduler_plugins() {
  wait_until scheduler-plugins "scheduler-plugins /healthz" https_healthz "${SCHEDULER_PLUGINS_PORT}"
}
