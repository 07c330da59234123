# shellcheck shell=bash
# hack/lib/objects.sh: Objects the local cluster needs: Kruise's CRDs and webhook configurations, kwok nodes.
# Sourced by hack/cluster.sh, whose settings (ports, directories, BINARY, COMPONENTS) and helpers (log, die,
# k) it uses.

# kruise_module_dir prints the module cache directory of github.com/openkruise/kruise@KRUISE_VERSION.
# module_dir prints the module cache directory of MODULE@VERSION, downloading it through the proxy if needed.
module_dir() {
  local dir
  dir="$(cd / && GOFLAGS=-mod=mod go mod download -json "$1@$2" |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')"
  [[ -d "${dir}" ]] || die "cannot locate $1@$2 in the module cache"
  printf '%s' "${dir}"
}

kruise_module_dir() { module_dir github.com/openkruise/kruise "${KRUISE_VERSION}"; }

# apply_crds PATH WHAT applies the CRDs of PATH (a file or directory) with server-side apply and waits until
# they are established, dying with WHAT named after WAIT_TIMEOUT.
apply_crds() {
  k apply --server-side --force-conflicts --field-manager=kray-cluster -f "$1" >/dev/null
  # A CRD just created may report `conditions: null` for a moment, which kubectl wait takes for an error.
  local deadline=$((SECONDS + WAIT_TIMEOUT))
  until k wait --for=condition=Established --timeout=10s -f "$1" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || die "$2 are not established after ${WAIT_TIMEOUT} s"
    sleep 0.5
  done
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
  k apply --server-side --force-conflicts --field-manager=kray-cluster -f "${bases}" >/dev/null ||
    die "applying Kruise ${KRUISE_VERSION}'s CRDs failed (after a downgrade, objects stored at a version the older CRDs lack block it: 'hack/cluster.sh down --purge' starts the cluster over)"
  k wait --for=condition=Established --timeout="${WAIT_TIMEOUT}s" "${names[@]}" >/dev/null
  touch "${marker}"
}

# switch_kruise_version readies a cluster that another Kruise version ran on (or one whose version is not
# recorded, from before it was) for KRUISE_VERSION: it stops that kruise-manager and deletes its webhook
# configurations, whose paths the new version may not serve (v1.9 serves none of v1.8's versioned paths, and
# kruise-manager only updates the configurations it finds, dropping the webhooks it does not know), and
# forgets which CRDs were applied. ensure_kruise_prerequisites then creates the new version's configurations
# and records the version.
switch_kruise_version() {
  local installed=""
  [[ -f "${MANIFEST_DIR}/kruise-version" ]] && installed="$(<"${MANIFEST_DIR}/kruise-version")"
  [[ "${installed}" == "${KRUISE_VERSION}" ]] && return 0
  if [[ -z "${installed}" ]] && ! k get mutatingwebhookconfiguration kruise-mutating-webhook-configuration >/dev/null 2>&1; then
    return 0 # a new cluster
  fi
  log "switching Kruise ${installed:-(unrecorded version)} to ${KRUISE_VERSION}: reinstalling its CRDs and webhook configurations"
  stop_processes kruise-manager
  k delete mutatingwebhookconfiguration kruise-mutating-webhook-configuration --ignore-not-found >/dev/null
  k delete validatingwebhookconfiguration kruise-validating-webhook-configuration --ignore-not-found >/dev/null
  rm -f "${MANIFEST_DIR}"/kruise-crds-*.applied
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

# ensure_kruise_prerequisites creates namespaces kruise-system and kruise-daemon-config (where Kruise's chart
# keeps the image pull secrets of ImagePullJobs; the ImagePullJob controller fails without it) and both webhook
# configurations when absent; kruise-manager exits after 20 s when a configuration is missing, and only ever
# updates them.
ensure_kruise_prerequisites() {
  local webhooks file="${MANIFEST_DIR}/kruise-prerequisites.yaml"
  webhooks="$(render_kruise_webhooks)"
  {
    printf 'apiVersion: v1\nkind: Namespace\nmetadata:\n  name: kruise-system\n---\n'
    printf 'apiVersion: v1\nkind: Namespace\nmetadata:\n  name: kruise-daemon-config\n---\n'
    cat "${webhooks}"
  } >"${file}"
  create_if_absent "${file}"
  printf '%s\n' "${KRUISE_VERSION}" >"${MANIFEST_DIR}/kruise-version"
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
