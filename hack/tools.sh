#!/usr/bin/env bash
# hack/tools.sh builds kray's local tool binaries from the Go modules pinned in hack/versions.env.
#
# Usage: hack/tools.sh [TARGET...]      (default: all)
#   all                 kube kube-compat etcd kwok kruise-compat kruise kueue scheduler-plugins yunikorn
#                       cert-manager controller-gen
#   kube                kube-apiserver kube-controller-manager kube-scheduler  (k8s.io/kubernetes)
#   kube-compat         the same three of KUBERNETES_COMPAT_VERSION, the oldest Kubernetes kray supports
#   kube-apiserver | kube-controller-manager | kube-scheduler
#   etcd                etcd            (go.etcd.io/etcd/server/v3)
#   kwok                kwok            (sigs.k8s.io/kwok/cmd/kwok)
#   kruise              kruise-manager  (github.com/openkruise/kruise, the module root package)
#   kruise-compat       kruise-manager of KRUISE_COMPAT_VERSION, the older Kruise release kray supports
#   kruise-daemon       kruise-daemon   (github.com/openkruise/kruise/cmd/daemon, in kruise-manager's wrapper; only for
#                       the kind cluster, whose nodes run it against their containerd, not part of "all")
#   kueue               kueue           (sigs.k8s.io/kueue/cmd/kueue; the e2e suite queues RayClusters and RayJobs with it)
#   scheduler-plugins   scheduler-plugins (sigs.k8s.io/scheduler-plugins/cmd/scheduler, against SCHEDULER_PLUGINS_KUBERNETES_VERSION's
#                       modules; the e2e suite schedules gangs with its coscheduling plugin)
#   yunikorn            yunikorn-scheduler (github.com/apache/yunikorn-k8shim/pkg/cmd/shim, against YUNIKORN_KUBERNETES_VERSION's
#                       modules; the e2e suite schedules gangs with its placeholders)
#   controller-gen      controller-gen  (sigs.k8s.io/controller-tools/cmd/controller-gen)
#   cert-manager        cert-manager-controller (hack/certmanager: cert-manager's own controllers, SelfSigned and CA
#                       issuers, from github.com/cert-manager/cert-manager; the mTLS tests issue Ray's certificates
#                       with it)
#   kind                kind            (sigs.k8s.io/kind; only for the kind cluster, not part of "all")
#   kube-network-policies  kube-network-policies (sigs.k8s.io/kube-network-policies/cmd; the kind cluster's
#                       NetworkPolicy enforcer, not part of "all")
#   kind-node           what the kind cluster's images carry, not part of "all": kube's three, kubelet kubeadm
#                       kube-proxy kubectl (k8s.io/kubernetes), etcd, coredns (github.com/coredns/coredns) and kind
#   kubelet | kubeadm | kube-proxy | kubectl | coredns
#   envtest-assets      builds kube-apiserver and etcd if needed and prints ONLY the absolute path of a
#                       directory holding kube-apiserver, etcd and kubectl, for KUBEBUILDER_ASSETS:
#                         export KUBEBUILDER_ASSETS="$(hack/tools.sh envtest-assets)"
#                       The directory is bin/envtest/k8s-<KUBERNETES_VERSION>-etcd-<ETCD_VERSION>.
#
# Contract:
#   - Each binary is built once per machine into a cache outside the clone,
#     ${KRAY_CACHE_DIR:-${XDG_CACHE_HOME:-~/.cache}/kray}/tools/<tool>-<version>/<binary>-<key>/<binary>, where
#     <key> hashes everything the build depends on: the generated wrapper go.mod, the package, the build
#     flags, the Go version, OS and architecture, GOFLAGS, the sources of kray's own commands, and this
#     script's build recipe. A changed recipe is a new key, so a stale binary is never reused; a present one is
#     never rebuilt (delete its directory to force a rebuild). bin/tools/<tool>-<version>/<binary> links to it,
#     and bin/<binary> is a relative symlink to that; both are refreshed on every run.
#   - Every tool is built inside a small wrapper module under bin/wrappers/<tool>-<version>/ (bin/ is ignored,
#     and a directory with its own go.mod is outside the main module's ./... pattern). The wrapper requires
#     the pinned module, carries the replace directives the upstream go.mod would otherwise lose, and its
#     go.sum is resolved at build time through the module proxy with `go get`.
#   - Downloads and compiled packages go through the normal module and build caches, so reruns take seconds.
#   - Progress and timings go to stderr; stdout carries only what a target is asked to print.
#   - Builds run one at a time (the machines this runs on have two cores); each tool's wrapper is used under a
#     lock, and each cache entry is built under a lock of its own, so concurrent invocations, of one clone or
#     of several, never build the same binary twice nor share a wrapper.
#   - KRAY_TOOLS_NO_LINK=1 leaves bin/'s symlinks alone (a background build must not repoint what a running
#     stage uses).
#
# Environment: KRAY_BIN_DIR (default <repo>/bin), KRAY_CACHE_DIR (default ${XDG_CACHE_HOME:-~/.cache}/kray); the
# versions in hack/versions.env may be overridden by env.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=hack/versions.sh
source "${ROOT}/hack/versions.sh"

BIN_DIR="${KRAY_BIN_DIR:-${ROOT}/bin}"
TOOLS_DIR="${BIN_DIR}/tools"
WRAPPERS_DIR="${BIN_DIR}/wrappers"
CACHE_DIR="${KRAY_CACHE_DIR:-${XDG_CACHE_HOME:-${HOME}/.cache}/kray}/tools"

# -mod=mod lets the wrapper's go.mod/go.sum be completed during the build; any other -mod in GOFLAGS would
# contradict it. GOWORK=off keeps a go.work of the caller out of the wrappers.
goflags=()
for flag in ${GOFLAGS:-}; do
  [[ "${flag}" == -mod=* ]] || goflags+=("${flag}")
done
goflags+=("-mod=mod")
export GOFLAGS="${goflags[*]}"
export GOWORK=off

# Kruise pins some k8s.io modules to releases the filtered proxy does not serve; kruise_overrides prints, for
# the Kruise release being built, the served release that replaces each. Re-check them when KRUISE_VERSION
# changes (hack/versions.env): a minor with no list here fails loudly.
kruise_overrides() {
  case "$1" in
    v1.8.*)
      printf '%s\n' k8s.io/cri-api=v0.30.14 k8s.io/cluster-bootstrap=v0.30.14 k8s.io/metrics=v0.30.14 \
        k8s.io/endpointslice=v0.30.14 k8s.io/kube-controller-manager=v0.30.14 \
        k8s.io/legacy-cloud-providers=v0.30.14 k8s.io/pod-security-admission=v0.30.14 \
        k8s.io/kube-proxy=v0.30.14 k8s.io/sample-apiserver=v0.30.4
      ;;
    v1.9.*)
      printf '%s\n' k8s.io/cluster-bootstrap=v0.32.9 k8s.io/endpointslice=v0.32.9 k8s.io/externaljwt=v0.32.9 \
        k8s.io/kube-aggregator=v0.32.9 k8s.io/kube-controller-manager=v0.32.9 k8s.io/metrics=v0.32.9 \
        k8s.io/kube-proxy=v0.30.14 k8s.io/legacy-cloud-providers=v0.30.14 k8s.io/sample-apiserver=v0.32.5
      ;;
    *) die "no k8s.io replace overrides for Kruise $1: add them to kruise_overrides in hack/tools.sh" ;;
  esac
}

log() { printf '[tools] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# now_ms prints a monotonic-enough wall clock in milliseconds.
now_ms() { date +%s%3N; }

# fmt_ms prints a millisecond duration as seconds with one decimal.
fmt_ms() { printf '%d.%ds' "$(($1 / 1000))" "$((($1 % 1000) / 100))"; }

# module_field MODULE@VERSION FIELD prints one field (Dir, GoMod, ...) of `go mod download -json`, downloading
# the module if needed. It runs outside any module so the main module's go.mod is never consulted.
module_field() {
  local json
  json="$(cd / && GOFLAGS=-mod=mod go mod download -json "$1")" || die "go mod download $1 failed"
  sed -n "s/^[[:space:]]*\"$2\": \"\(.*\)\",\{0,1\}$/\1/p" <<<"${json}" | head -n1
}

# upstream_header GOMOD prints the go and godebug directives of an upstream go.mod, so the wrapper builds with
# the language version and GODEBUG defaults the upstream module chose.
upstream_header() {
  grep -E '^(go|godebug)[[:space:]]' "$1" || true
}

# kube_staging_replaces GOMOD VERSION prints one replace line per staging module that the k8s.io/kubernetes
# go.mod maps to ./staging/..., pointing it at the published VERSION instead.
kube_staging_replaces() {
  awk -v v="$2" '$2 == "=>" && $3 ~ /^\.\/staging\// { printf "replace %s => %s %s\n", $1, $1, v }' "$1"
}

# copied_replaces GOMOD [MODULE=VERSION...] prints the replace directives of GOMOD (block and single-line
# forms) as single lines, with the given modules re-pinned. Local-path replaces cannot work in a wrapper and
# abort the build.
copied_replaces() {
  local gomod="$1"
  shift
  awk -v overrides="$*" '
    BEGIN { n = split(overrides, o, " "); for (i = 1; i <= n; i++) { split(o[i], kv, "="); pin[kv[1]] = kv[2] } }
    /^replace[[:space:]]*\($/ { inblock = 1; next }
    inblock && /^\)/ { inblock = 0; next }
    inblock || /^replace[[:space:]]/ {
      line = $0; sub(/^replace[[:space:]]+/, "", line); sub(/\/\/.*/, "", line)
      k = split(line, f, /[[:space:]]+/)
      if (f[1] == "") { for (i = 1; i < k; i++) f[i] = f[i + 1]; k-- }
      if (k < 3) next
      arrow = (f[2] == "=>") ? 2 : 3
      target = f[arrow + 1]; tver = f[arrow + 2]
      if (target ~ /^\.|^\//) { print "local replace " line > "/dev/stderr"; exit 3 }
      if (target in pin) tver = pin[target]
      printf "replace %s => %s %s\n", (arrow == 2 ? f[1] : f[1] " " f[2]), target, tver
    }
  ' "${gomod}"
}

# kube_ldflags prints the -X flags that make the Kubernetes binaries report KUBERNETES_VERSION; without
# them /version says v0.0.0-master and clients stumble.
kube_ldflags() {
  local v="${KUBERNETES_VERSION}" major minor pkg flags="-s -w"
  major="${v#v}"; major="${major%%.*}"
  minor="${v#v*.}"; minor="${minor%%.*}"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    flags+=" -X ${pkg}.gitVersion=${v} -X ${pkg}.gitMajor=${major} -X ${pkg}.gitMinor=${minor}"
    flags+=" -X ${pkg}.gitTreeState=clean"
  done
  printf '%s' "${flags}"
}

# link_binary TOOLDIR BINARY points bin/BINARY at bin/tools/TOOLDIR/BINARY, unless KRAY_TOOLS_NO_LINK is set.
link_binary() {
  [[ -z "${KRAY_TOOLS_NO_LINK:-}" ]] || return 0
  ln -sfn "tools/$1/$2" "${BIN_DIR}/$2"
}

# build_in_wrapper TOOL VERSION MODULE PKG BINARY LDFLAGS [REPLACES_FN] builds one binary of MODULE@VERSION.
# REPLACES_FN, if given, is called with the path of the upstream go.mod and prints the replace directives
# to append to the wrapper's go.mod. It is a no-op when bin/tools/TOOL-VERSION/BINARY exists. It holds
# bin/tools/TOOL-VERSION/.lock throughout (the binaries of one TOOL-VERSION share a wrapper), so a second
# hack/tools.sh (a background build, hack/tools-background.sh) waits for this one, then finds what it built.
build_in_wrapper() {
  local tooldir="$1-$2" lock
  mkdir -p "${TOOLS_DIR}/${tooldir}"
  exec {lock}>"${TOOLS_DIR}/${tooldir}/.lock"
  if ! flock -n "${lock}"; then
    log "$5 $2: waiting for the ${tooldir} build another hack/tools.sh is running"
    flock "${lock}"
  fi
  build_in_wrapper_locked "$@"
  exec {lock}>&-
}

# build_in_wrapper_locked is build_in_wrapper's work, run under its lock: it links bin/tools/TOOL-VERSION/BINARY
# to the machine's cache entry of this build, building the entry first when it is missing.
build_in_wrapper_locked() {
  local tool="$1" version="$2" module="$3" pkg="$4" binary="$5" ldflags="$6" replaces_fn="${7:-}"
  local tooldir="${tool}-${version}"
  local out="${TOOLS_DIR}/${tooldir}/${binary}"
  local gomod content key entry
  gomod="$(module_field "${module}@${version}" GoMod)"
  [[ -f "${gomod}" ]] || die "no go.mod for ${module}@${version}"
  content="$(
    printf '// Generated by hack/tools.sh: builds %s from %s@%s. Do not edit.\n' "${binary}" "${module}" "${version}"
    printf 'module kray.local/tools/%s\n\n' "${tool}"
    upstream_header "${gomod}"
    printf '\nrequire %s %s\n\n' "${module}" "${version}"
    if [[ -n "${replaces_fn}" ]]; then
      "${replaces_fn}" "${gomod}"
    fi
  )" || die "cannot make the wrapper go.mod of ${binary}"
  key="$(
    {
      printf '%s\n' "${content}" "${module}" "${version}" "${pkg}" "${binary}" "${ldflags}" "${GOFLAGS}"
      go env GOVERSION GOOS GOARCH GOAMD64 CGO_ENABLED
      declare -f build_in_wrapper_locked build_into_cache
      if [[ "${pkg}" == ./hack/* ]]; then
        cat "${ROOT}/${pkg#./}"/*.go
      fi
    } | sha256sum | cut -c1-16
  )"
  entry="${CACHE_DIR}/${tooldir}/${binary}-${key}"
  mkdir -p "${entry}" "${TOOLS_DIR}/${tooldir}"
  if [[ ! -x "${entry}/${binary}" ]]; then
    local lock
    exec {lock}>"${entry}.lock"
    flock "${lock}"
    [[ -x "${entry}/${binary}" ]] || build_into_cache "${entry}/${binary}" "${tooldir}" "${content}" "$@"
    exec {lock}>&-
  else
    log "${binary} ${version}: cached (${entry})"
  fi
  ln -sfn "${entry}/${binary}" "${out}"
  link_binary "${tooldir}" "${binary}"
}

# build_into_cache OUT TOOLDIR GOMOD_CONTENT TOOL VERSION MODULE PKG BINARY LDFLAGS builds one binary into OUT
# (its cache entry) in the clone's wrapper of TOOLDIR.
build_into_cache() {
  local out="$1" tooldir="$2" content="$3" module="$6" version="$5" pkg="$7" binary="$8" ldflags="$9"
  local wrapper="${WRAPPERS_DIR}/${tooldir}" start
  start="$(now_ms)"
  log "${binary} ${version}: building ${pkg} in wrapper ${wrapper#"${ROOT}"/}"
  mkdir -p "${wrapper}"
  printf '%s\n' "${content}" >"${wrapper}/go.mod" || die "cannot write ${wrapper}/go.mod"
  rm -f "${wrapper}/go.sum"
  (
    cd "${wrapper}"
    local build_args=("${pkg}")
    if [[ "${pkg}" == ./hack/* ]]; then
      # A command of kray's own (build tag: the directory's name) linked against the module's packages.
      rm -f ./*.go
      cp "${ROOT}/${pkg#./}"/*.go .
      go get "${module}@${version}" >&2
      build_args=(-tags "$(basename "${pkg}")" .)
    else
      go get "${pkg}@${version}" >&2
    fi
    # Write to a temporary name and rename, so an interrupted build never leaves a partial binary in place.
    go build -ldflags "${ldflags}" -o "${out}.tmp" "${build_args[@]}"
  ) || die "building ${binary} failed (wrapper: ${wrapper})"
  mv -f "${out}.tmp" "${out}"
  log "${binary} ${version}: built in $(fmt_ms $(($(now_ms) - start))) (${out})"
}

kube_replaces() {
  kube_staging_replaces "$1" "v0.${KUBERNETES_VERSION#v1.}"
}

build_kube_binary() {
  build_in_wrapper kubernetes "${KUBERNETES_VERSION}" k8s.io/kubernetes "k8s.io/kubernetes/cmd/$1" "$1" \
    "$(kube_ldflags)" kube_replaces
}

build_etcd() {
  # `go install` refuses etcd's server module (its go.mod has replace directives); the wrapper drops them,
  # and the sibling etcd modules resolve to the same release through the proxy.
  build_in_wrapper etcd "${ETCD_VERSION}" go.etcd.io/etcd/server/v3 go.etcd.io/etcd/server/v3 etcd "-s -w"
}

build_kwok() {
  build_in_wrapper kwok "${KWOK_VERSION}" sigs.k8s.io/kwok sigs.k8s.io/kwok/cmd/kwok kwok "-s -w"
}

kruise_replaces() {
  local overrides
  overrides="$(kruise_overrides "${KRUISE_VERSION}")" || exit 1
  # shellcheck disable=SC2086 # one MODULE=VERSION word per line
  copied_replaces "$1" ${overrides}
}

build_kruise() {
  build_in_wrapper kruise "${KRUISE_VERSION}" github.com/openkruise/kruise github.com/openkruise/kruise \
    kruise-manager "-s -w" kruise_replaces
}

build_kruise_daemon() {
  build_in_wrapper kruise "${KRUISE_VERSION}" github.com/openkruise/kruise github.com/openkruise/kruise/cmd/daemon \
    kruise-daemon "-s -w" kruise_replaces
}

build_kueue() {
  build_in_wrapper kueue "${KUEUE_VERSION}" sigs.k8s.io/kueue sigs.k8s.io/kueue/cmd/kueue kueue "-s -w"
}

# kube_repinned_replaces GOMOD prints GOMOD's replace directives with its Kubernetes modules re-pinned to
# KUBERNETES_VERSION (v1.x.y for k8s.io/kubernetes, v0.x.y for the staging modules, whatever release GOMOD
# pins them to); the others (pseudo-versions such as k8s.io/utils') stay. k8s.io/kubernetes is replaced even
# when GOMOD only requires it.
kube_repinned_replaces() {
  local staging="v0.${KUBERNETES_VERSION#v1.}"
  copied_replaces "$1" | awk -v kube="${KUBERNETES_VERSION}" -v staging="${staging}" '
    $2 == "k8s.io/kubernetes" { $5 = kube; seen = 1 }
    $4 ~ /^k8s\.io\// && $5 ~ /^v0\.[1-9][0-9]*\.[0-9]+$/ { $5 = staging }
    { print }
    END { if (!seen) printf "replace k8s.io/kubernetes => k8s.io/kubernetes %s\n", kube }
  '
}

# The secondary schedulers' releases follow Kubernetes' scheduler framework a minor or more behind, so each is
# built against the modules of the Kubernetes release its own go.mod is cut for (SCHEDULER_PLUGINS_KUBERNETES_VERSION,
# YUNIKORN_KUBERNETES_VERSION), served by the proxy; they run beside a newer kube-apiserver like any client.
build_scheduler_plugins() {
  (
    KUBERNETES_VERSION="${SCHEDULER_PLUGINS_KUBERNETES_VERSION}"
    build_in_wrapper scheduler-plugins "${SCHEDULER_PLUGINS_VERSION}" sigs.k8s.io/scheduler-plugins \
      sigs.k8s.io/scheduler-plugins/cmd/scheduler scheduler-plugins "$(kube_ldflags)" kube_repinned_replaces
  )
}

# yunikorn_replaces adds to the Kubernetes re-pin the scheduler interface YuniKorn's release was cut from:
# the proxy refuses its pseudo-release tag (v1.8.0-0) but serves the same commit as v1.8.0.
yunikorn_replaces() {
  kube_repinned_replaces "$1"
  printf 'replace github.com/apache/yunikorn-scheduler-interface => github.com/apache/yunikorn-scheduler-interface %s\n' \
    "${YUNIKORN_SCHEDULER_INTERFACE_VERSION}"
}

build_yunikorn() {
  (
    KUBERNETES_VERSION="${YUNIKORN_KUBERNETES_VERSION}"
    build_in_wrapper yunikorn "${YUNIKORN_VERSION}" github.com/apache/yunikorn-k8shim \
      github.com/apache/yunikorn-k8shim/pkg/cmd/shim yunikorn-scheduler "$(kube_ldflags)" yunikorn_replaces
  )
}

build_coredns() {
  build_in_wrapper coredns "${COREDNS_VERSION}" github.com/coredns/coredns github.com/coredns/coredns coredns \
    "-s -w"
}

# build_cert_manager builds hack/certmanager (cert-manager's Issuer, CertificateRequest and Certificate
# controllers, SelfSigned and CA issuers only) against cert-manager's module.
build_cert_manager() {
  build_in_wrapper cert-manager "${CERT_MANAGER_VERSION}" github.com/cert-manager/cert-manager ./hack/certmanager \
    cert-manager-controller "-s -w"
}

build_controller_gen() {
  build_in_wrapper controller-gen "${CONTROLLER_TOOLS_VERSION}" sigs.k8s.io/controller-tools \
    sigs.k8s.io/controller-tools/cmd/controller-gen controller-gen "-s -w"
}

build_kind() {
  build_in_wrapper kind "${KIND_VERSION}" sigs.k8s.io/kind sigs.k8s.io/kind kind "-s -w"
}

build_kube_network_policies() {
  build_in_wrapper kube-network-policies "${KUBE_NETWORK_POLICIES_VERSION}" sigs.k8s.io/kube-network-policies \
    sigs.k8s.io/kube-network-policies/cmd kube-network-policies "-s -w"
}

# envtest_assets builds kube-apiserver and etcd and prints the absolute path of a directory with the three
# binaries controller-runtime's envtest looks for.
envtest_assets() {
  build_kube_binary kube-apiserver
  build_etcd
  local dir="${BIN_DIR}/envtest/k8s-${KUBERNETES_VERSION}-etcd-${ETCD_VERSION}" kubectl_path
  mkdir -p "${dir}"
  ln -sfn "../../tools/kubernetes-${KUBERNETES_VERSION}/kube-apiserver" "${dir}/kube-apiserver"
  ln -sfn "../../tools/etcd-${ETCD_VERSION}/etcd" "${dir}/etcd"
  if kubectl_path="$(command -v kubectl)"; then
    ln -sfn "${kubectl_path}" "${dir}/kubectl"
  else
    log "WARNING: kubectl not on PATH; ${dir}/kubectl is missing (envtest needs it only for kubectl-based helpers)"
  fi
  printf '%s\n' "${dir}"
}

run_target() {
  case "$1" in
    all)
      run_target kube
      run_target kube-compat
      run_target etcd
      run_target kwok
      run_target kruise-compat
      run_target kruise
      run_target kueue
      run_target scheduler-plugins
      run_target yunikorn
      run_target cert-manager
      run_target controller-gen
      ;;
    kube)
      build_kube_binary kube-apiserver
      build_kube_binary kube-controller-manager
      build_kube_binary kube-scheduler
      ;;
    kube-apiserver | kube-controller-manager | kube-scheduler) build_kube_binary "$1" ;;
    kube-compat)
      (
        KUBERNETES_VERSION="${KUBERNETES_COMPAT_VERSION}"
        run_target kube
      )
      # bin/kube-* stay the main version's.
      local b
      for b in kube-apiserver kube-controller-manager kube-scheduler; do
        if [[ -x "${TOOLS_DIR}/kubernetes-${KUBERNETES_VERSION}/${b}" ]]; then
          link_binary "kubernetes-${KUBERNETES_VERSION}" "${b}"
        fi
      done
      ;;
    kind-node)
      run_target kube
      build_kube_binary kubelet
      build_kube_binary kubeadm
      build_kube_binary kube-proxy
      build_kube_binary kubectl
      build_etcd
      build_coredns
      build_kind
      ;;
    kubelet | kubeadm | kube-proxy | kubectl) build_kube_binary "$1" ;;
    coredns) build_coredns ;;
    etcd) build_etcd ;;
    kwok) build_kwok ;;
    kruise | kruise-manager) build_kruise ;;
    kruise-daemon) build_kruise_daemon ;;
    kruise-compat)
      KRUISE_VERSION="${KRUISE_COMPAT_VERSION}" build_kruise
      # bin/kruise-manager stays the main version's.
      if [[ -x "${TOOLS_DIR}/kruise-${KRUISE_VERSION}/kruise-manager" ]]; then
        link_binary "kruise-${KRUISE_VERSION}" kruise-manager
      fi
      ;;
    kueue) build_kueue ;;
    scheduler-plugins) build_scheduler_plugins ;;
    yunikorn) build_yunikorn ;;
    controller-gen) build_controller_gen ;;
    cert-manager) build_cert_manager ;;
    kind) build_kind ;;
    kube-network-policies) build_kube_network_policies ;;
    envtest-assets) envtest_assets ;;
    -h | --help | help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2 ;;
    *) die "unknown target '$1' (try: $(basename "$0") help)" ;;
  esac
}

main() {
  command -v go >/dev/null || die "go is not on PATH"
  local start
  start="$(now_ms)"
  [[ $# -gt 0 ]] || set -- all
  local target
  for target in "$@"; do
    run_target "${target}"
  done
  log "done: $* in $(fmt_ms $(($(now_ms) - start)))"
}

main "$@"
