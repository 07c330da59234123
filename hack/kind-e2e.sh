#!/usr/bin/env bash
# hack/kind-e2e.sh runs the kind suite of test/e2e (the tests named TestKind*) on the kind cluster of
# hack/kind.sh: it brings the cluster up (building what it needs), runs the tests against the operator installed
# from charts/kray, prints diagnostics when they fail, and takes the cluster down on exit.
#
# Environment: KRAY_KIND_KEEP=1 keeps the cluster afterwards (`hack/kind.sh down` removes it);
# KRAY_E2E_TIMEOUT (default 30m); E2E_RUN (default ^TestKind) selects the tests; KRAY_KIND_PARALLEL (default 3)
# is how many of those that call t.Parallel run at once, after the others.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=versions.env
source "${ROOT}/hack/versions.env"
KUBECONFIG_FILE="${ROOT}/.local/kind/kubeconfig"

log() { printf '[kind-e2e] %s\n' "$*" >&2; }

diagnostics() {
  local k="${ROOT}/bin/kubectl"
  log "diagnostics:"
  "${k}" get pods -A -o wide >&2 || true
  "${k}" get events -A --sort-by=.lastTimestamp 2>/dev/null | tail -n 40 >&2 || true
  log "operator log:"
  "${k}" -n kray-system logs deployment/kray --tail=100 >&2 || true
  log "kruise-manager log:"
  "${k}" -n kruise-system logs deployment/kruise-controller-manager --tail=40 >&2 || true
  log "NetworkPolicy enforcer log:"
  "${k}" -n kube-system logs daemonset/kube-network-policies --all-containers --prefix --tail=40 >&2 || true
  local node
  DOCKER_HOST="$("${ROOT}/hack/kind.sh" docker 2>/dev/null)" || return 0
  export DOCKER_HOST
  log "registry log:"
  docker logs --tail 20 "${KRAY_KIND_CLUSTER:-kray}-registry" >&2 || true
  for node in $("${ROOT}/bin/kind" get nodes --name "${KRAY_KIND_CLUSTER:-kray}" 2>/dev/null); do
    log "${node}: the mangle FORWARD chain and the netfilter queues (queue, portid, waiting, mode, range, dropped, user dropped, last id)"
    docker exec "${node}" iptables -t mangle -L FORWARD -n -v >&2 || true
    docker exec "${node}" cat /proc/net/netfilter/nfnetlink_queue >&2 || true
  done
}

# cpu_seconds prints the CPU time the machine and the kind cluster's containers (the cgroup of hack/kind.sh)
# have used so far, in seconds: "machine kind", kind empty where that cgroup is not there.
cpu_seconds() {
  local kind="" f
  for f in /sys/fs/cgroup/cpuacct/kray-kind/cpuacct.usage /sys/fs/cgroup/kray-kind/cpu.stat; do
    [[ -r "${f}" ]] || continue
    case "${f}" in
      *.usage) kind="$(($(cat "${f}") / 1000000000))" ;;
      *) kind="$(awk '$1 == "usage_usec" { print int($2 / 1000000) }' "${f}")" ;;
    esac
    break
  done
  # /proc/stat's first line: user nice system idle iowait irq softirq steal, in USER_HZ (100 a second).
  printf '%s %s\n' "$(awk 'NR == 1 { print int(($2 + $3 + $4 + $7 + $8 + $9) / 100) }' /proc/stat)" "${kind}"
}

# report_cpu START prints how much of the CPU the machine used since START (cpu_seconds) went to the kind cluster.
report_cpu() {
  local m0 k0 m1 k1
  read -r m0 k0 <<<"$1"
  read -r m1 k1 <<<"$(cpu_seconds)"
  [[ -n "${k0}" && -n "${k1}" ]] || { log "CPU: the kind cluster's cgroup is not readable here"; return 0; }
  local m=$((m1 - m0)) k=$((k1 - k0))
  log "CPU while the tests ran: the machine $((m)) s, the kind cluster's containers ${k} s ($((m > 0 ? 100 * k / m : 0))%)"
}

cleanup() {
  local status=$?
  trap - EXIT
  if ((status != 0)) && [[ -f "${KUBECONFIG_FILE}" ]]; then
    diagnostics
  fi
  if [[ "${KRAY_KIND_KEEP:-0}" == 1 ]]; then
    log "keeping the kind cluster (hack/kind.sh down removes it)"
  else
    "${ROOT}/hack/kind.sh" down || true
  fi
  exit "${status}"
}
trap cleanup EXIT

start="$(date +%s)"
"${ROOT}/hack/kind.sh" up
log "cluster up in $(($(date +%s) - start)) s"
# KUBECONFIG, the registry's addresses and the Redis image the suite reads.
eval "$("${ROOT}/hack/kind.sh" env)"
cd "${ROOT}"
start="$(date +%s)"
# shellcheck source=lib/slowest.sh
source "${ROOT}/hack/lib/slowest.sh"
out="${ROOT}/.local/kind/e2e-tests.log"
cpu_start="$(cpu_seconds)"
KRAY_E2E_KIND=1 KRAY_E2E_OPERATOR=external \
  go test ./test/e2e -count=1 -v -timeout "${KRAY_E2E_TIMEOUT:-30m}" -parallel "${KRAY_KIND_PARALLEL:-3}" \
  -run "${E2E_RUN:-^TestKind}" | tee "${out}" ||
  { print_slowest "${out}" >&2; report_cpu "${cpu_start}"; exit 1; }
print_slowest "${out}" >&2
report_cpu "${cpu_start}"
log "tests passed in $(($(date +%s) - start)) s"
