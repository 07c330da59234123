# shellcheck shell=bash
# Volcano's CRDs for the local cluster: its PodGroup and Queue, from its module (volcano.sh/volcano,
# VOLCANO_VERSION). Volcano's scheduler itself cannot be built here (its API module is not served), so pods
# sent to it stay pending. Sourced by hack/cluster.sh (verb install-volcano-crds).

install_volcano_crds() {
  local bases
  bases="$(module_dir volcano.sh/volcano "${VOLCANO_VERSION}")/config/crd/volcano/bases"
  apply_crds "${bases}/scheduling.volcano.sh_podgroups.yaml" "Volcano's PodGroup CRD"
  apply_crds "${bases}/scheduling.volcano.sh_queues.yaml" "Volcano's Queue CRD"
}
