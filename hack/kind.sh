#!/usr/bin/env bash
# hack/kind.sh runs a kind cluster with real kubelets, built here with no container registry: every image is
# made from Debian packages and binaries built from pinned Go modules.
#
# Usage: hack/kind.sh up | down | images | dockerfile | docker | env
#   up      the Docker engine (started when none answers), every image, a kind cluster, its image registry, its
#           NetworkPolicy enforcer, Kruise from the manifests in its Go module, cert-manager's controllers on this host (its CRDs from its
#           module) and kray from charts/kray with RayClusterMTLS and RayClusterNetworkPolicy on; the kubeconfig
#           is left at .local/kind/kubeconfig
#   down    deletes the cluster, its registry's container and its network, stops cert-manager and the Docker engine if this script started it; the
#           images stay, as the cache of the next `up` of any clone on this machine (<cache>/kind/docker)
#   images  builds the images only (each is skipped when its tag, a hash of its inputs, is present)
#   dockerfile  builds ./Dockerfile unchanged (kray-operator:dockerfile) on local images of its two bases
#   docker  makes sure a Docker engine answers, and prints the DOCKER_HOST to use with it
#   env     prints the export lines for DOCKER_HOST, KUBECONFIG and what the kind suite reads: the registry's
#           addresses (KRAY_KIND_REGISTRY, KRAY_KIND_REGISTRY_PUSH) and KRAY_KIND_REDIS_IMAGE
#
# The Docker engine: an engine that already answers (DOCKER_HOST or the default socket) is used as it is.
# Otherwise Debian's docker.io is installed when dockerd is missing, and a dockerd of kray's own is started with
# its data in the machine's cache, ${KRAY_CACHE_DIR:-${XDG_CACHE_HOME:-~/.cache}/kray}/kind/docker (one engine and
# one image store for every clone: the image tags are content hashes, so a fresh clone rebuilds only what its
# own inputs change), and capdrop (hack/kind/capdrop) as its default runtime, so that
# privileged containers start on hosts that withhold a capability. It runs without the default bridge: kind
# makes its own network, and image builds use the host's.
#
# Images (tags are content hashes, so an edit rebuilds only what it changes):
#   kray.local/debian:<suite>              debootstrap --variant=minbase of KIND_DEBIAN_SUITE
#   kray.local/kind-node:<k8s>-<hash>      kind's node: systemd, containerd, kubelet, kubeadm, and inside its
#                                          containerd the control plane's images (kube-*, etcd, coredns, pause)
#   registry.k8s.io/...                    the control plane's images as kubeadm names them (kube-base:<hash> under)
#   kray.local/kruise-manager:<v>-<hash>   kruise-manager and kruise-daemon built from the Kruise module
#                                          (hack/tools.sh kruise kruise-daemon)
#   kray.local/redis:<suite>               Debian's redis-server, the Redis of GCS fault tolerant clusters
#   kray.local/kube-network-policies:<v>-<hash>  the NetworkPolicy enforcer (hack/tools.sh kube-network-policies)
#                                          with Debian's iptables (hack/kind/networkpolicy)
#   kray.local/kray-operator:<hash>        ./cmd/kray-operator built static, on ./Dockerfile's runtime layout
#                                          (gcr.io/distroless/static:nonroot, made here from Debian)
#   rayproject/ray:<version>               the fake Ray of test/kind/fakeray (kray.local/fake-ray:<hash>) under
#                                          every tag the tests and KubeRay's samples use
#   kray.local/registry:<suite>-<hash>     Debian's docker-registry and tc (hack/kind/registry)
# Earlier builds of the kray.local images are removed after each build.
#
# The cluster: one control-plane node and KRAY_KIND_WORKERS (default 1) worker nodes, all schedulable. The
# scheduler's CPU requests fill a node long before its real CPU does (each Ray worker's wait-gcs-ready init
# container asks for 200m, KubeRay's fixed figure), so the worker gives the kind suite room to run tests at once.
# Node i (0 the control plane) gives its pods 10.244.i.0/24 through the node image's ptp CNI, and each node routes
# the others' pod ranges through their node addresses (the part of kind's kindnetd this cluster does itself).
#
# The registry: a container <cluster>-registry on kind's network, beside the nodes, serving plain HTTP as
# <cluster>-registry:5000 to the nodes' containerd (/etc/containerd/certs.d) and as 127.0.0.1:KRAY_KIND_REGISTRY_PORT
# (default 5001) to this host, which pushes the fake Ray to it as <cluster>-registry:5000/ray:<version>. Nothing
# else is preloaded from it, so a pod of such an image pulls it for real. Its blobs stay in the machine's cache
# (<cache>/kind/registry) from one `up` to the next.
#
# Environment: KRAY_KIND_CLUSTER (default kray), KRAY_KIND_DIR (default <repo>/.kind: build contexts),
# KRAY_KIND_DOCKER_DIR (default <cache>/kind/docker: the engine's data), KRAY_KIND_WORKERS (default 1),
# KRAY_KIND_CPU_SHARES (default 8192: the kind containers' CPU weight, see kind_cgroup), versions from
# hack/versions.env.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=hack/versions.sh
source "${ROOT}/hack/versions.sh"

CLUSTER="${KRAY_KIND_CLUSTER:-kray}"
WORKERS="${KRAY_KIND_WORKERS:-1}"
[[ "${WORKERS}" =~ ^[0-9]$ ]] || { echo "KRAY_KIND_WORKERS must be 0 to 9, not ${WORKERS}" >&2; exit 2; }
KIND_DIR="${KRAY_KIND_DIR:-${ROOT}/.kind}"
DOCKER_DIR="${KRAY_KIND_DOCKER_DIR:-${KRAY_CACHE_DIR:-${XDG_CACHE_HOME:-${HOME}/.cache}/kray}/kind/docker}"
BUILD_DIR="${KIND_DIR}/build"
KUBECONFIG_FILE="${ROOT}/.local/kind/kubeconfig"
REGISTRY_CONTAINER="${CLUSTER}-registry"
# REGISTRY is the registry's address on kind's network, the host part of the images pods pull from it.
REGISTRY="${REGISTRY_CONTAINER}:5000"
# REGISTRY_PUSH is its address on this host; Docker pushes to a loopback registry over plain HTTP.
REGISTRY_PUSH="127.0.0.1:${KRAY_KIND_REGISTRY_PORT:-5001}"
REGISTRY_DIR="$(dirname "${DOCKER_DIR}")/registry"
# The engine's sockets live under /run, named after this checkout: a Unix socket path is limited to 107 bytes,
# which a deep checkout plus containerd's own paths under --exec-root would pass.
RUN_DIR="/run/kray-docker-$(printf '%s' "${DOCKER_DIR}" | sha256sum | cut -c1-12)"
OWN_SOCKET="${RUN_DIR}/docker.sock"
BIN_DIR="${ROOT}/bin"
# The Ray versions the fake Ray image is tagged with: those of the e2e tests and of KubeRay's samples.
RAY_VERSIONS="${KRAY_KIND_RAY_VERSIONS:-2.9.0 2.41.0 2.46.0 2.51.0 2.52.0}"

log() { printf '[kind] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }
now() { date +%s; }

# timed NAME CMD... runs CMD and logs how long it took.
timed() {
  local name="$1" start
  shift
  start="$(now)"
  "$@"
  log "${name}: $(($(now) - start)) s"
}

# ---- Docker ----------------------------------------------------------------------------------------------

docker_answers() { docker info >/dev/null 2>&1; }

ensure_docker() {
  if [[ -S "${OWN_SOCKET}" ]] && DOCKER_HOST="unix://${OWN_SOCKET}" docker_answers; then
    export DOCKER_HOST="unix://${OWN_SOCKET}"
    return 0
  fi
  if [[ -z "${KRAY_KIND_OWN_DOCKER:-}" ]] && docker_answers; then
    return 0
  fi
  if ! command -v dockerd >/dev/null; then
    command -v apt-get >/dev/null || die "no Docker engine answers and dockerd is not installed"
    log "installing Debian's docker.io"
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends docker.io >&2 ||
      { apt-get update >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends docker.io >&2; } ||
      die "apt-get install docker.io failed"
  fi
  command -v docker >/dev/null || die "dockerd is installed but the docker client is not"
  mkdir -p "${DOCKER_DIR}" "${BIN_DIR}"
  log "building capdrop"
  (cd "${ROOT}" && CGO_ENABLED=0 go build -o "${BIN_DIR}/capdrop" ./hack/kind/capdrop)
  log "starting dockerd (data in ${DOCKER_DIR#"${ROOT}"/})"
  # setsid: the engine outlives this script, until `down`.
  mkdir -p "${RUN_DIR}"
  local parent=()
  kind_cgroup && parent=(--cgroup-parent "/${KIND_CGROUP}")
  setsid dockerd --data-root "${DOCKER_DIR}/data" --exec-root "${RUN_DIR}/exec" \
    --pidfile "${DOCKER_DIR}/dockerd.pid" --host "unix://${OWN_SOCKET}" --bridge none \
    --add-runtime "capdrop=${BIN_DIR}/capdrop" --default-runtime capdrop "${parent[@]}" \
    >"${DOCKER_DIR}/dockerd.log" 2>&1 </dev/null &
  export DOCKER_HOST="unix://${OWN_SOCKET}"
  local i
  for ((i = 0; i < 60; i++)); do
    docker_answers && return 0
    sleep 1
  done
  tail -n 20 "${DOCKER_DIR}/dockerd.log" >&2 || true
  die "dockerd did not answer within 60 s (log: ${DOCKER_DIR}/dockerd.log)"
}

# The CPU weight of the kind cluster's node containers, together, against every other scheduling entity of the
# machine. Each process the local cluster starts (hack/lib/processes.sh) leads a session of its own, so the
# kernel's autogroups give each of them the weight of a whole cgroup: at the default weight, the kind cluster's
# two nodes, their kubelets and every Ray pod would share what one local etcd gets, and exec probes would time out
# while the local suites run beside (hack/beside.sh). Eight times the default lets the kind cluster take about
# half the machine against the local cluster's busy daemons.
KIND_CGROUP=kray-kind
KIND_CPU_SHARES="${KRAY_KIND_CPU_SHARES:-8192}"

# kind_cgroup makes the cgroup the engine puts its containers under, with the kind cluster's CPU weight, and
# fails (the engine then keeps its default) where the cpu controller cannot be written.
kind_cgroup() {
  local v1=/sys/fs/cgroup/cpu v2=/sys/fs/cgroup
  if [[ -f "${v1}/cpu.shares" ]] && mkdir -p "${v1}/${KIND_CGROUP}" 2>/dev/null &&
    echo "${KIND_CPU_SHARES}" >"${v1}/${KIND_CGROUP}/cpu.shares" 2>/dev/null; then
    log "kind containers: cgroup ${KIND_CGROUP}, cpu.shares ${KIND_CPU_SHARES}"
    return 0
  fi
  # cgroup v2: cpu.weight is shares scaled to 1..10000 (100 is the default of 1024 shares).
  if [[ -f "${v2}/cgroup.controllers" ]] && grep -qw cpu "${v2}/cgroup.subtree_control" 2>/dev/null &&
    mkdir -p "${v2}/${KIND_CGROUP}" 2>/dev/null &&
    echo "$((KIND_CPU_SHARES * 100 / 1024))" >"${v2}/${KIND_CGROUP}/cpu.weight" 2>/dev/null; then
    log "kind containers: cgroup ${KIND_CGROUP}, cpu.weight $((KIND_CPU_SHARES * 100 / 1024))"
    return 0
  fi
  log "kind containers: the cpu cgroup cannot be written here; they keep the engine's default weight"
  return 1
}

stop_own_docker() {
  local pid=""
  [[ -f "${DOCKER_DIR}/dockerd.pid" ]] && pid="$(cat "${DOCKER_DIR}/dockerd.pid")"
  if [[ -n "${pid}" ]] && kill -0 "${pid}" 2>/dev/null; then
    log "stopping dockerd (${pid})"
    kill "${pid}"
    local i
    for ((i = 0; i < 30; i++)); do
      kill -0 "${pid}" 2>/dev/null || break
      sleep 1
    done
    kill -0 "${pid}" 2>/dev/null && kill -9 "${pid}"
  fi
  rm -f "${DOCKER_DIR}/dockerd.pid"
  # dockerd leaves its network namespace mounted under its exec root.
  local m
  while read -r m; do
    umount -l "${m}" 2>/dev/null || true
  done < <(awk -v dir="${RUN_DIR}/" 'index($2, dir) == 1 { print $2 }' /proc/mounts)
  rm -rf "${RUN_DIR}"
}

image_present() { docker image inspect "$1" >/dev/null 2>&1; }

# build_image TAG CONTEXT [docker build args...] builds CONTEXT/Dockerfile unless TAG is present.
build_image() {
  local tag="$1" context="$2"
  shift 2
  if image_present "${tag}"; then
    log "${tag}: present"
    return 0
  fi
  log "${tag}: building"
  docker_build -t "${tag}" "$@" "${context}"
}

# docker_build runs `docker build` with the classic builder on the host's network (the engine may have no
# bridge), quietly: its output is shown only when it fails.
docker_build() {
  local out
  if ! out="$(DOCKER_BUILDKIT=0 docker build --network host "$@" 2>&1)"; then
    printf '%s\n' "${out}" >&2
    die "docker build $* failed"
  fi
}

# ---- Images ----------------------------------------------------------------------------------------------

BASE_IMAGE="kray.local/debian:${KIND_DEBIAN_SUITE}"

base_image() {
  image_present "${BASE_IMAGE}" && { log "${BASE_IMAGE}: present"; return 0; }
  command -v debootstrap >/dev/null || {
    log "installing Debian's debootstrap"
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends debootstrap >&2
  }
  local rootfs="${BUILD_DIR}/rootfs"
  rm -rf "${rootfs}"
  mkdir -p "${rootfs}"
  log "${BASE_IMAGE}: debootstrap ${KIND_DEBIAN_SUITE}"
  debootstrap --variant=minbase "${KIND_DEBIAN_SUITE}" "${rootfs}" "${KRAY_KIND_DEBIAN_MIRROR:-http://deb.debian.org/debian}" \
    >"${BUILD_DIR}/debootstrap.log" 2>&1 || { tail -n 20 "${BUILD_DIR}/debootstrap.log" >&2; die "debootstrap failed"; }
  rm -rf "${rootfs}"/var/cache/apt/archives/*.deb "${rootfs}"/var/lib/apt/lists/*
  tar -C "${rootfs}" -c . | docker import --change 'CMD ["/bin/bash"]' - "${BASE_IMAGE}" >/dev/null
  rm -rf "${rootfs}"
}

module_dir() {
  (cd / && GOFLAGS=-mod=mod go mod download -json "$1") | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p'
}

# component_images builds the images kubeadm's control plane runs, each from the binaries hack/tools.sh builds,
# on the Debian base (the binaries link glibc; kube-proxy needs iptables), named as kubeadm names them, and
# lists them in COMPONENT_IMAGES.
COMPONENT_IMAGES=()

component_images() {
  local ctx="${BUILD_DIR}/components" kube="${KUBERNETES_VERSION}" b
  rm -rf "${ctx}"
  mkdir -p "${ctx}/bin"
  for b in kube-apiserver kube-controller-manager kube-scheduler kube-proxy etcd coredns; do
    cp -L "${BIN_DIR}/${b}" "${ctx}/bin/${b}"
  done
  # pause, from the C source in the Kubernetes module, as Kubernetes builds it.
  local kmod
  kmod="$(module_dir "k8s.io/kubernetes@${kube}")"
  gcc -Os -Wall -Werror -static -DVERSION="kray-${PAUSE_VERSION}" -o "${ctx}/bin/pause" \
    "${kmod}/build/pause/linux/pause.c"
  cp "${ROOT}/hack/kind/components/Dockerfile" "${ctx}/Dockerfile"
  local hash
  hash="$(cat "${ctx}/bin/"* "${ctx}/Dockerfile" | sha256sum | cut -c1-12)"
  local base="kray.local/kube-base:${hash}"
  build_image "${base}" "${ctx}" --build-arg "BASE=${BASE_IMAGE}" --target base
  CURRENT+=("${base}")
  local name tag entry
  COMPONENT_IMAGES=()
  while read -r name tag entry; do
    COMPONENT_IMAGES+=("${name}:${tag}")
    image_present "${name}:${tag}" && [[ "$(docker image inspect -f '{{index .Config.Labels "kray.local/hash"}}' "${name}:${tag}")" == "${hash}" ]] && continue
    printf 'FROM %s\nLABEL kray.local/hash=%s\nENTRYPOINT ["%s"]\n' "${base}" "${hash}" "${entry}" |
      docker_build -t "${name}:${tag}" -
    log "${name}:${tag}: built"
  done <<EOF
registry.k8s.io/kube-apiserver ${kube} /usr/local/bin/kube-apiserver
registry.k8s.io/kube-controller-manager ${kube} /usr/local/bin/kube-controller-manager
registry.k8s.io/kube-scheduler ${kube} /usr/local/bin/kube-scheduler
registry.k8s.io/kube-proxy ${kube} /usr/local/bin/kube-proxy
registry.k8s.io/etcd ${ETCD_VERSION} /usr/local/bin/etcd
registry.k8s.io/coredns/coredns ${COREDNS_VERSION} /coredns
registry.k8s.io/pause ${PAUSE_VERSION} /pause
EOF
}

NODE_IMAGE=""

node_image() {
  "${ROOT}/hack/tools.sh" kind-node
  local kindmod ctx="${BUILD_DIR}/node" hash
  kindmod="$(module_dir "sigs.k8s.io/kind@${KIND_VERSION}")"
  component_images
  local images=("${COMPONENT_IMAGES[@]}")
  hash="$( { for i in "${images[@]}"; do docker image inspect -f '{{.Id}}' "${i}"; done
    find "${ROOT}/hack/kind/node" -type f -print0 | sort -z | xargs -0 cat
    cat "${BIN_DIR}/kubelet" "${BIN_DIR}/kubeadm" "${BIN_DIR}/kubectl"; declare -f node_image; echo "${KIND_VERSION}"; } |
    sha256sum | cut -c1-12)"
  NODE_IMAGE="kray.local/kind-node:${KUBERNETES_VERSION}-${hash}"
  CURRENT+=("${NODE_IMAGE}")
  if image_present "${NODE_IMAGE}"; then
    log "${NODE_IMAGE}: present"
    return 0
  fi
  rm -rf "${ctx}"
  mkdir -p "${ctx}/files/usr/bin"
  # kind's base files, then kray's on top; containerd comes from Debian, at /usr/bin.
  cp -r "${kindmod}/images/base/files/." "${ctx}/files/"
  chmod -R u+w "${ctx}/files"
  rm -f "${ctx}/files/etc/systemd/system/containerd-fuse-overlayfs.service"
  sed -i 's|^ExecStart=/usr/local/bin/containerd|ExecStart=/usr/bin/containerd|' \
    "${ctx}/files/etc/systemd/system/containerd.service"
  # No fuse-overlayfs snapshotter (rootless only), the sandbox image kubeadm pins, and containers' OOM score
  # adjustments kept at or above containerd's own: lowering it takes CAP_SYS_RESOURCE, which the host may
  # withhold (then every container fails with "can't get final child's PID from pipe").
  awk '/^\[proxy_plugins/ { skip = 1; next } /^\[plugins/ { skip = 0 } !skip' \
    "${kindmod}/images/base/files/etc/containerd/config.toml" |
    sed -e "s|sandbox_image = .*|sandbox_image = \"registry.k8s.io/pause:${PAUSE_VERSION}\"|" \
      -e "s|restrict_oom_score_adj = false|restrict_oom_score_adj = true|" \
      >"${ctx}/files/etc/containerd/config.toml"
  cp -r "${ROOT}/hack/kind/node/files/." "${ctx}/files/"
  cp "${ROOT}/hack/kind/node/Dockerfile" "${ctx}/Dockerfile"
  cp -L "${BIN_DIR}/kubelet" "${BIN_DIR}/kubeadm" "${BIN_DIR}/kubectl" "${ctx}/files/usr/bin/"
  mkdir -p "${ctx}/files/kind"
  printf '%s\n' "${KUBERNETES_VERSION}" >"${ctx}/files/kind/version"
  local stage="kray.local/kind-node-stage:${hash}"
  build_image "${stage}" "${ctx}" --build-arg "BASE=${BASE_IMAGE}"
  # Import the control plane's images into the node's containerd, then commit: kind's own node-image recipe.
  log "${NODE_IMAGE}: importing ${#images[@]} images into containerd"
  docker save "${images[@]}" -o "${BUILD_DIR}/components.tar"
  local ctr="kray-node-build-${hash}"
  docker rm -f "${ctr}" >/dev/null 2>&1 || true
  trap 'docker rm -f "kray-node-build-'"${hash}"'" >/dev/null 2>&1 || true' EXIT
  docker run -d --name "${ctr}" --privileged --entrypoint sleep "${stage}" infinity >/dev/null
  docker cp "${BUILD_DIR}/components.tar" "${ctr}:/components.tar"
  docker exec "${ctr}" bash -c '
    set -e
    nohup containerd >/tmp/containerd.log 2>&1 &
    for i in $(seq 60); do ctr version >/dev/null 2>&1 && break; sleep 1; done
    ctr -n k8s.io images import --all-platforms --no-unpack --digests /components.tar >/dev/null
    rm /components.tar
    pkill containerd
    for i in $(seq 30); do pgrep containerd >/dev/null || break; sleep 1; done' >&2
  docker commit --change 'ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]' "${ctr}" "${NODE_IMAGE}" >/dev/null
  docker rm -f "${ctr}" >/dev/null
  trap - EXIT
  docker rmi "${stage}" >/dev/null
  rm -f "${BUILD_DIR}/components.tar"
}

KRUISE_IMAGE="kray.local/kruise-manager:${KRUISE_VERSION}"
OPERATOR_IMAGE=""
RAY_IMAGES=()

# app_images builds the images the cluster runs on top of its node: kruise-manager, the operator and the
# fake Ray.
app_images() {
  local ctx
  "${ROOT}/hack/tools.sh" kruise kruise-daemon
  ctx="${BUILD_DIR}/kruise"
  rm -rf "${ctx}" && mkdir -p "${ctx}"
  cp -L "${BIN_DIR}/kruise-manager" "${ctx}/manager"
  cp -L "${BIN_DIR}/kruise-daemon" "${ctx}/kruise-daemon"
  # One image for kruise-manager and kruise-daemon (the DaemonSet runs /kruise-daemon). /log: the manager's
  # protection log (--protection-log-path); it runs as nobody.
  printf 'FROM %s\nCOPY manager kruise-daemon /\nRUN mkdir -m 1777 /log\nENTRYPOINT ["/manager"]\n' "${BASE_IMAGE}" \
    >"${ctx}/Dockerfile"
  KRUISE_IMAGE="kray.local/kruise-manager:${KRUISE_VERSION}-$(cat "${ctx}/manager" "${ctx}/kruise-daemon" "${ctx}/Dockerfile" | sha256sum | cut -c1-12)"
  build_image "${KRUISE_IMAGE}" "${ctx}"

  # The operator: a static build of ./cmd/kray-operator on the runtime layout of ./Dockerfile.
  ctx="${BUILD_DIR}/operator"
  rm -rf "${ctx}" && mkdir -p "${ctx}"
  (cd "${ROOT}" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=kind" \
    -o "${ctx}/kray-operator" ./cmd/kray-operator)
  cp "${ROOT}/hack/kind/operator/Dockerfile" "${ctx}/Dockerfile"
  distroless_image
  OPERATOR_IMAGE="kray.local/kray-operator:$(cat "${ctx}/kray-operator" "${ctx}/Dockerfile" | sha256sum | cut -c1-12)"
  build_image "${OPERATOR_IMAGE}" "${ctx}"

  # The fake Ray, under every rayproject/ray tag the tests and KubeRay's samples use.
  ctx="${BUILD_DIR}/ray"
  rm -rf "${ctx}" && mkdir -p "${ctx}"
  (cd "${ROOT}" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "${ctx}/ray" ./test/kind/fakeray)
  cp "${ROOT}/test/kind/fakeray/Dockerfile" "${ctx}/Dockerfile"
  local ray="kray.local/fake-ray:$(cat "${ctx}/ray" "${ctx}/Dockerfile" | sha256sum | cut -c1-12)" v
  build_image "${ray}" "${ctx}" --build-arg "BASE=${BASE_IMAGE}"
  CURRENT+=("${KRUISE_IMAGE}" "${OPERATOR_IMAGE}" "${ray}" "${REDIS_IMAGE}")
  RAY_IMAGES=()
  for v in ${RAY_VERSIONS}; do
    # An image of its own per version (a label: the layers are shared), as Ray's releases are: Kruise tells
    # that an in-place image update is done by the container's new image ID.
    local vctx="${BUILD_DIR}/ray-${v}"
    rm -rf "${vctx}" && mkdir -p "${vctx}"
    printf 'FROM %s
LABEL io.ray.version=%s
' "${ray}" "${v}" >"${vctx}/Dockerfile"
    build_image "${ray}-${v}" "${vctx}"
    docker tag "${ray}-${v}" "rayproject/ray:${v}"
    CURRENT+=("${ray}-${v}")
    RAY_IMAGES+=("rayproject/ray:${v}")
  done
}

# distroless_image makes gcr.io/distroless/static:nonroot, the runtime base ./Dockerfile names, from Debian:
# CA certificates, tzdata, and the nonroot user (65532).
distroless_image() {
  local tag="gcr.io/distroless/static:nonroot"
  image_present "${tag}" && return 0
  local ctx="${BUILD_DIR}/distroless"
  rm -rf "${ctx}" && mkdir -p "${ctx}"
  cp "${ROOT}/hack/kind/distroless/Dockerfile" "${ctx}/Dockerfile"
  build_image "${tag}" "${ctx}" --build-arg "BASE=${BASE_IMAGE}"
}

# CURRENT lists the kray.local images this run uses; prune_stale removes the others (earlier builds).
CURRENT=()

prune_stale() {
  local image keep c
  while read -r image; do
    keep=0
    for c in "${CURRENT[@]}"; do
      [[ "${image}" == "${c}" ]] && keep=1
    done
    [[ "${image}" == "${BASE_IMAGE}" || "${image}" == *"<none>"* ]] && keep=1
    ((keep)) || docker rmi "${image}" >/dev/null 2>&1 || true
  done < <(docker images --format '{{.Repository}}:{{.Tag}}' | grep '^kray\.local/')
  docker image prune -f >/dev/null
}

# dockerfile builds ./Dockerfile itself, unchanged, as kray-operator:dockerfile, on local images of its two bases:
# golang:<version> (the Debian base with this machine's Go toolchain, which must be that version) and
# gcr.io/distroless/static:nonroot. The kind cluster runs the same runtime layout from a binary built once
# (hack/kind/operator/Dockerfile); this proves the Dockerfile a user builds.
dockerfile() {
  local version ctx
  version="$(sed -n 's/^FROM golang:\([^ ]*\).*/\1/p' "${ROOT}/Dockerfile")"
  [[ -n "${version}" ]] || die "./Dockerfile has no FROM golang:<version>"
  [[ "$(go env GOVERSION)" == "go${version}" || "$(go env GOVERSION)" == go${version}.* ]] ||
    die "./Dockerfile builds with Go ${version}; this machine has $(go env GOVERSION)"
  if ! image_present "golang:${version}"; then
    ctx="${BUILD_DIR}/golang"
    rm -rf "${ctx}" && mkdir -p "${ctx}"
    cp -r "$(go env GOROOT)" "${ctx}/go"
    # The host's CA bundle: HTTPS to the module proxy may pass a proxy that only the host trusts.
    cp /etc/ssl/certs/ca-certificates.crt "${ctx}/ca-certificates.crt"
    printf 'FROM %s\nRUN apt-get update && apt-get install -y --no-install-recommends ca-certificates git && rm -rf /var/lib/apt/lists/*\nCOPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt\nCOPY go /usr/local/go\nENV GOPATH=/go PATH=/go/bin:/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin GOPROXY=%s\nWORKDIR /go\n' \
      "${BASE_IMAGE}" "$(go env GOPROXY)" >"${ctx}/Dockerfile"
    build_image "golang:${version}" "${ctx}"
    rm -rf "${ctx}"
  fi
  distroless_image
  log "building ./Dockerfile as kray-operator:dockerfile"
  docker_build -t kray-operator:dockerfile --build-arg "VERSION=$(cd "${ROOT}" && git describe --tags --always --dirty 2>/dev/null || echo dev)" "${ROOT}"
  log "kray-operator:dockerfile: $(docker image inspect -f 'user {{.Config.User}}, entrypoint {{.Config.Entrypoint}}, {{.Size}} bytes' kray-operator:dockerfile)"
}

# REDIS_IMAGE is Debian's redis-server, for the tests' GCS fault tolerant clusters.
REDIS_IMAGE="kray.local/redis:${KIND_DEBIAN_SUITE}"

redis_image() {
  local ctx="${BUILD_DIR}/redis"
  rm -rf "${ctx}" && mkdir -p "${ctx}"
  printf 'FROM %s\nRUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends redis-server && apt-get clean && rm -rf /var/lib/apt/lists/*\nUSER redis\nENTRYPOINT ["redis-server"]\n' \
    "${BASE_IMAGE}" >"${ctx}/Dockerfile"
  build_image "${REDIS_IMAGE}" "${ctx}"
}

# NETWORKPOLICY_IMAGE is the NetworkPolicy enforcer: kube-network-policies and the entrypoint that queues the
# node's packets to it (hack/kind/networkpolicy).
NETWORKPOLICY_IMAGE=""
# NETWORKPOLICY_QUEUE is the netfilter queue the enforcer answers on each node.
NETWORKPOLICY_QUEUE=100

networkpolicy_image() {
  "${ROOT}/hack/tools.sh" kube-network-policies
  local ctx="${BUILD_DIR}/networkpolicy"
  rm -rf "${ctx}" && mkdir -p "${ctx}"
  cp -L "${BIN_DIR}/kube-network-policies" "${ctx}/kube-network-policies"
  cp "${ROOT}/hack/kind/networkpolicy/Dockerfile" "${ROOT}/hack/kind/networkpolicy/entrypoint" "${ctx}/"
  NETWORKPOLICY_IMAGE="kray.local/kube-network-policies:${KUBE_NETWORK_POLICIES_VERSION}-$(cat "${ctx}"/* | sha256sum | cut -c1-12)"
  build_image "${NETWORKPOLICY_IMAGE}" "${ctx}" --build-arg "BASE=${BASE_IMAGE}"
  CURRENT+=("${NETWORKPOLICY_IMAGE}")
}

# REGISTRY_IMAGE is the registry's image (hack/kind/registry).
REGISTRY_IMAGE=""

registry_image() {
  local ctx="${BUILD_DIR}/registry"
  rm -rf "${ctx}" && mkdir -p "${ctx}"
  cp "${ROOT}/hack/kind/registry/Dockerfile" "${ROOT}/hack/kind/registry/config.yml" "${ctx}/"
  REGISTRY_IMAGE="kray.local/registry:${KIND_DEBIAN_SUITE}-$(cat "${ctx}"/* | sha256sum | cut -c1-12)"
  build_image "${REGISTRY_IMAGE}" "${ctx}" --build-arg "BASE=${BASE_IMAGE}"
  CURRENT+=("${REGISTRY_IMAGE}")
}

images() {
  mkdir -p "${BUILD_DIR}"
  timed "base image" base_image
  timed "node image" node_image
  timed "kruise, operator and ray images" app_images
  timed "redis image" redis_image
  timed "networkpolicy image" networkpolicy_image
  timed "registry image" registry_image
  prune_stale
}

# ---- Cluster ---------------------------------------------------------------------------------------------

KIND=""
# KUBECTL is the kubectl of the node's Kubernetes release (hack/tools.sh kind-node builds it).
KUBECTL="${BIN_DIR}/kubectl"

kind_bin() {
  "${ROOT}/hack/tools.sh" kind
  KIND="${BIN_DIR}/kind"
}

cluster_exists() { [[ -n "$("${KIND}" get clusters 2>/dev/null | grep -x "${CLUSTER}")" ]]; }

# PTP_CONFLIST is the node image's CNI configuration, whose range is the control plane's, 10.244.0.0/24.
PTP_CONFLIST="${ROOT}/hack/kind/node/files/etc/cni/net.d/10-kray-ptp.conflist"

# pod_range I prints the pod range of node I (0 the control plane, i the i-th worker).
pod_range() { printf '10.244.%d.0/24' "$1"; }

# cluster_config writes kind's configuration: hack/kind/cluster.yaml and WORKERS worker nodes, worker i with
# the node image's CNI configuration for 10.244.i.0/24 mounted over the image's.
cluster_config() {
  local out="${BUILD_DIR}/cluster.yaml" i conf
  sed -e "s|@ETCD_TAG@|${ETCD_VERSION}|" "${ROOT}/hack/kind/cluster.yaml" >"${out}"
  for ((i = 1; i <= WORKERS; i++)); do
    conf="${BUILD_DIR}/ptp-worker-${i}.conflist"
    sed -e "s|$(pod_range 0)|$(pod_range "${i}")|" "${PTP_CONFLIST}" >"${conf}"
    grep -qF "$(pod_range "${i}")" "${conf}" || die "no $(pod_range 0) range to replace in ${PTP_CONFLIST}"
    printf -- '- role: worker\n  extraMounts:\n  - hostPath: %s\n    containerPath: /etc/cni/net.d/10-kray-ptp.conflist\n    readOnly: true\n' \
      "${conf}" >>"${out}"
  done
  printf '%s\n' "${out}"
}

# node_index NODE prints the pod range index of a node container kind named: 0 for <cluster>-control-plane, i for
# <cluster>-worker (1) and <cluster>-worker<i>.
node_index() {
  case "$1" in
    "${CLUSTER}-control-plane") echo 0 ;;
    "${CLUSTER}-worker") echo 1 ;;
    "${CLUSTER}-worker"[2-9]) echo "${1#"${CLUSTER}-worker"}" ;;
    *) die "unexpected kind node ${1}" ;;
  esac
}

# route_pod_ranges makes every node of the cluster, as it exists, route each other node's pod range through
# that node's address, and lets pods run on the control plane too. It is idempotent.
route_pod_ranges() {
  local nodes=() idx=() ips=() n i j
  mapfile -t nodes < <("${KIND}" get nodes --name "${CLUSTER}")
  for n in "${nodes[@]}"; do
    idx+=("$(node_index "${n}")")
    ips+=("$(docker inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' "${n}")")
    [[ -n "${ips[-1]}" ]] || die "no address for node ${n}"
  done
  for i in "${!nodes[@]}"; do
    for j in "${!nodes[@]}"; do
      ((i == j)) && continue
      docker exec "${nodes[i]}" ip route replace "$(pod_range "${idx[j]}")" via "${ips[j]}"
    done
  done
  "${KUBECTL}" taint nodes "${CLUSTER}-control-plane" node-role.kubernetes.io/control-plane:NoSchedule- >/dev/null 2>&1 || true
}

create_cluster() {
  if cluster_exists; then
    log "kind cluster ${CLUSTER} exists: using it"
  else
    mkdir -p "$(dirname "${KUBECONFIG_FILE}")"
    local config
    config="$(cluster_config)"
    log "creating kind cluster ${CLUSTER} (${NODE_IMAGE}, ${WORKERS} worker node(s))"
    "${KIND}" create cluster --name "${CLUSTER}" --image "${NODE_IMAGE}" --config "${config}" \
      --kubeconfig "${KUBECONFIG_FILE}" --wait 300s ${KRAY_KIND_RETAIN:+--retain} >&2
  fi
  "${KIND}" get kubeconfig --name "${CLUSTER}" >"${KUBECONFIG_FILE}"
  export KUBECONFIG="${KUBECONFIG_FILE}"
  route_pod_ranges
}

# start_registry runs the registry beside the nodes (kept when it already runs this image), makes every node's
# containerd pull from it over plain HTTP, and pushes the fake Ray to it under each of RAY_VERSIONS.
start_registry() {
  mkdir -p "${REGISTRY_DIR}"
  if [[ "$(docker inspect -f '{{.State.Running}} {{.Config.Image}}' "${REGISTRY_CONTAINER}" 2>/dev/null)" != "true ${REGISTRY_IMAGE}" ]]; then
    docker rm -f "${REGISTRY_CONTAINER}" >/dev/null 2>&1 || true
    # NET_ADMIN: a benchmark limits its rate with tc on its interface.
    docker run -d --name "${REGISTRY_CONTAINER}" --network kind --cap-add NET_ADMIN -p "${REGISTRY_PUSH}:5000" \
      -v "${REGISTRY_DIR}:/var/lib/docker-registry" "${REGISTRY_IMAGE}" >/dev/null
  fi
  local deadline=$((SECONDS + 60))
  until curl -sf --max-time 2 "http://${REGISTRY_PUSH}/v2/" >/dev/null; do
    ((SECONDS < deadline)) || die "the registry does not answer on ${REGISTRY_PUSH} after 60 s: $(docker logs --tail 20 "${REGISTRY_CONTAINER}" 2>&1)"
    sleep 0.5
  done
  local node
  while read -r node; do
    printf 'server = "http://%s"\n\n[host."http://%s"]\n  capabilities = ["pull", "resolve"]\n' "${REGISTRY}" "${REGISTRY}" |
      docker exec -i "${node}" sh -c "mkdir -p /etc/containerd/certs.d/${REGISTRY} && cat >/etc/containerd/certs.d/${REGISTRY}/hosts.toml"
  done < <("${KIND}" get nodes --name "${CLUSTER}")
  local image
  for image in "${RAY_IMAGES[@]}"; do
    docker tag "${image}" "${REGISTRY_PUSH}/ray:${image##*:}"
    docker push "${REGISTRY_PUSH}/ray:${image##*:}" >/dev/null
  done
}

load_images() {
  "${KIND}" load docker-image --name "${CLUSTER}" "${KRUISE_IMAGE}" "${OPERATOR_IMAGE}" "${REDIS_IMAGE}" \
    "${NETWORKPOLICY_IMAGE}" "${RAY_IMAGES[@]}" >&2
}

# install_networkpolicies runs the NetworkPolicy enforcer on every node (hack/kind/networkpolicy/enforcer.yaml)
# and waits until each node's netfilter queue has its listener: from then on every new connection a node
# forwards is judged by the cluster's NetworkPolicies.
install_networkpolicies() {
  sed -e "s|@IMAGE@|${NETWORKPOLICY_IMAGE}|" -e "s|@QUEUE@|${NETWORKPOLICY_QUEUE}|" "${ROOT}/hack/kind/networkpolicy/enforcer.yaml" |
    "${KUBECTL}" apply --server-side --force-conflicts -f - >/dev/null
  "${KUBECTL}" -n kube-system rollout status daemonset/kube-network-policies --timeout=300s >&2
  local node deadline
  while read -r node; do
    deadline=$((SECONDS + 60))
    # /proc/net/netfilter/nfnetlink_queue: one line per bound queue, its number first.
    until docker exec "${node}" awk -v q="${NETWORKPOLICY_QUEUE}" '$1 == q { found = 1 } END { exit !found }' \
      /proc/net/netfilter/nfnetlink_queue 2>/dev/null; do
      ((SECONDS < deadline)) || die "no listener on netfilter queue ${NETWORKPOLICY_QUEUE} of node ${node} after 60 s"
      sleep 0.5
    done
  done < <("${KIND}" get nodes --name "${CLUSTER}")
}

# install_kruise applies Kruise's own manifests from its Go module (config/default), with the image built here
# and the kind cluster's feature gates; kruise-daemon runs on every node against its containerd (in-place
# container restarts, image pulls).
install_kruise() {
  local kmod out="${BUILD_DIR}/kruise.yaml"
  kmod="$(module_dir "github.com/openkruise/kruise@${KRUISE_VERSION}")"
  rm -rf "${BUILD_DIR}/kruise-config"
  cp -r "${kmod}/config" "${BUILD_DIR}/kruise-config"
  chmod -R u+w "${BUILD_DIR}/kruise-config"
  # Its kustomization uses deprecated fields (bases, patchesStrategicMerge): the warnings go to a log.
  "${KUBECTL}" kustomize "${BUILD_DIR}/kruise-config/default" >"${out}" 2>"${BUILD_DIR}/kruise-kustomize.log"
  (cd "${ROOT}" && go run ./hack/kind/kruise -image "${KRUISE_IMAGE}" -gates "${KRUISE_GATES}") <"${out}" >"${out}.patched"
  "${KUBECTL}" apply --server-side --force-conflicts -f "${out}.patched" >/dev/null
  "${KUBECTL}" -n kruise-system rollout status deployment/kruise-controller-manager --timeout=300s >&2
  "${KUBECTL}" -n kruise-system rollout status daemonset/kruise-daemon --timeout=300s >&2
}

# The image pulling gates are those docs/operations.md asks for: kray.io/image-prepull's ImagePullJobs and the
# workloads' pre-download of a new image, which kruise-daemon pulls through the node's containerd.
KRUISE_GATES="PodWebhook=true,KruiseDaemon=true,CloneSetEventHandlerOptimization=true,ImagePullJobGate=true,PreDownloadImageForInPlaceUpdate=true"

# install_gateway_crds applies the Gateway API's standard CRDs (GatewayClass, Gateway, HTTPRoute) from its module
# at GATEWAY_API_VERSION, as a cluster that runs incremental RayService upgrades has them; no Gateway controller
# runs (the tests accept Gateways and routes themselves).
install_gateway_crds() {
  local crds kind
  crds="$(module_dir "sigs.k8s.io/gateway-api@${GATEWAY_API_VERSION}")/config/crd/standard"
  for kind in gatewayclasses gateways httproutes; do
    "${KUBECTL}" apply --server-side --force-conflicts -f "${crds}/gateway.networking.k8s.io_${kind}.yaml" >/dev/null
    "${KUBECTL}" wait --for=condition=Established --timeout=60s -f "${crds}/gateway.networking.k8s.io_${kind}.yaml" >/dev/null
  done
}

# install_certmanager applies cert-manager's CRDs from its module and runs its Issuer and Certificate
# controllers (hack/tools.sh cert-manager) on this host against the cluster's API server, as a platform's
# cert-manager would issue a tlsOptions cluster's certificates; down stops it. It comes before kray, which
# asks at start whether cert-manager's API is served.
install_certmanager() {
  local binary="${BIN_DIR}/tools/cert-manager-${CERT_MANAGER_VERSION}/cert-manager-controller" crds
  [[ -x "${binary}" ]] || "${ROOT}/hack/tools.sh" cert-manager
  crds="$(module_dir "github.com/cert-manager/cert-manager@${CERT_MANAGER_VERSION}")/deploy/crds"
  "${KUBECTL}" apply --server-side --force-conflicts -f "${crds}" >/dev/null
  "${KUBECTL}" wait --for=condition=Established --timeout=60s -f "${crds}" >/dev/null
  stop_certmanager
  setsid "${binary}" --kubeconfig="${KUBECONFIG_FILE}" --health-address="127.0.0.1:${CERT_MANAGER_HEALTH_PORT}" \
    >"${CERT_MANAGER_LOG}" 2>&1 </dev/null &
  echo $! >"${CERT_MANAGER_PID}"
  local deadline=$((SECONDS + 120))
  until curl -sf --max-time 2 "http://127.0.0.1:${CERT_MANAGER_HEALTH_PORT}/readyz" >/dev/null; do
    kill -0 "$(cat "${CERT_MANAGER_PID}")" 2>/dev/null || die "cert-manager-controller exited: $(tail -n 20 "${CERT_MANAGER_LOG}")"
    ((SECONDS < deadline)) || die "cert-manager-controller not ready after 120 s: $(tail -n 20 "${CERT_MANAGER_LOG}")"
    sleep 0.5
  done
}

# stop_certmanager stops the cert-manager controller install_certmanager started, if it runs.
stop_certmanager() {
  [[ -f "${CERT_MANAGER_PID}" ]] || return 0
  local pid
  pid="$(cat "${CERT_MANAGER_PID}")"
  if kill -0 "${pid}" 2>/dev/null; then
    kill "${pid}" 2>/dev/null || true
    local deadline=$((SECONDS + 10))
    while kill -0 "${pid}" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.2; done
    kill -9 "${pid}" 2>/dev/null || true
  fi
  rm -f "${CERT_MANAGER_PID}"
}

CERT_MANAGER_PID="${ROOT}/.local/kind/cert-manager.pid"
CERT_MANAGER_LOG="${ROOT}/.local/kind/cert-manager.log"
CERT_MANAGER_HEALTH_PORT="${KRAY_KIND_CERT_MANAGER_HEALTH_PORT:-29891}"

# install_kray applies charts/kray with the operator image built here, and KubeRay's RayClusterMTLS and
# RayClusterNetworkPolicy gates on.
install_kray() {
  local values="${BUILD_DIR}/kray-values.yaml"
  printf 'image:\n  repository: %s\n  tag: %s\n  pullPolicy: Never\nfeatureGates:\n  RayClusterMTLS: true\n  RayClusterNetworkPolicy: true\n' \
    "${OPERATOR_IMAGE%:*}" "${OPERATOR_IMAGE##*:}" >"${values}"
  "${KUBECTL}" create namespace kray-system --dry-run=client -o yaml | "${KUBECTL}" apply -f - >/dev/null
  (cd "${ROOT}" && go run ./hack/kind/render -chart charts/kray -name kray -namespace kray-system -values "${values}") \
    >"${BUILD_DIR}/kray.yaml"
  "${KUBECTL}" apply --server-side --force-conflicts -f "${BUILD_DIR}/kray.yaml" >/dev/null
  "${KUBECTL}" -n kray-system rollout status deployment/kray --timeout=300s >&2
}

up() {
  ensure_docker
  images
  kind_bin
  timed "cluster" create_cluster
  timed "load images" load_images
  timed "registry" start_registry
  timed "networkpolicies" install_networkpolicies
  timed "kruise" install_kruise
  timed "gateway api" install_gateway_crds
  timed "cert-manager" install_certmanager
  timed "kray" install_kray
  log "ready: export KUBECONFIG=${KUBECONFIG_FILE}"
}

down() {
  if [[ -S "${OWN_SOCKET}" ]]; then
    export DOCKER_HOST="unix://${OWN_SOCKET}"
  fi
  if docker_answers; then
    [[ -x "${BIN_DIR}/kind" ]] && KIND="${BIN_DIR}/kind"
    if [[ -n "${KIND}" ]] && cluster_exists; then
      log "deleting kind cluster ${CLUSTER}"
      "${KIND}" delete cluster --name "${CLUSTER}" >&2
    fi
    docker rm -f "${REGISTRY_CONTAINER}" >/dev/null 2>&1 || true
    # kind's network, once no container uses it.
    if docker network inspect kind >/dev/null 2>&1 &&
      [[ "$(docker network inspect -f '{{len .Containers}}' kind)" == 0 ]]; then
      docker network rm kind >/dev/null
    fi
  fi
  stop_certmanager
  stop_own_docker
  rm -f "${KUBECONFIG_FILE}"
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  images) ensure_docker; images ;;
  dockerfile) ensure_docker; mkdir -p "${BUILD_DIR}"; base_image; dockerfile ;;
  docker) ensure_docker; printf '%s\n' "${DOCKER_HOST:-}" ;;
  env)
    ensure_docker
    printf 'export DOCKER_HOST=%s\nexport KUBECONFIG=%s\nexport KRAY_KIND_REGISTRY=%s\nexport KRAY_KIND_REGISTRY_PUSH=%s\nexport KRAY_KIND_REDIS_IMAGE=%s\n' \
      "${DOCKER_HOST:-}" "${KUBECONFIG_FILE}" "${REGISTRY}" "${REGISTRY_PUSH}" "${REDIS_IMAGE}"
    ;;
  *) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2; exit 2 ;;
esac
