# shellcheck shell=bash
# hack/lib/pki.sh: Binaries, PKI and kubeconfigs of the local cluster.
# Sourced by hack/cluster.sh, whose settings (ports, directories, BINARY, COMPONENTS) and helpers (log, die,
# k) it uses.

ensure_binaries() {
  local name missing=()
  # poddelete is this repository's own: built at each start (about a second once Go's build cache holds it).
  if ! is_running poddelete; then
    (cd "${ROOT}" && go build -o "${BINARY[poddelete]}" ./hack/poddelete) || die "could not build ./hack/poddelete"
  fi
  for name in "${COMPONENTS[@]}"; do
    [[ -x "${BINARY[${name}]}" ]] || missing+=("${name}")
  done
  ((${#missing[@]} == 0)) && return 0
  log "building missing binaries (${missing[*]}) with hack/tools.sh; a cold build takes ~15 minutes"
  KRAY_BIN_DIR="${BIN_DIR}" "${ROOT}/hack/tools.sh" kube etcd kwok kruise
}

# first_service_ip prints the first address of KRAY_SERVICE_CIDR (the `kubernetes` Service's ClusterIP).
first_service_ip() {
  local net="${SERVICE_CIDR%/*}"
  printf '%s.%d' "${net%.*}" "$((${net##*.} + 1))"
}

# new_ca NAME CN creates pki/NAME.{crt,key} as a self-signed CA unless it exists.
new_ca() {
  [[ -f "${PKI_DIR}/$1.crt" ]] && return 0
  openssl ecparam -name prime256v1 -genkey -noout -out "${PKI_DIR}/$1.key" 2>/dev/null
  openssl req -x509 -new -sha256 -days 3650 -key "${PKI_DIR}/$1.key" -subj "/CN=$2" -out "${PKI_DIR}/$1.crt" \
    -config <(printf '[req]\ndistinguished_name=dn\nx509_extensions=ext\n[dn]\n[ext]\n%s\n%s\n%s\n' \
      'basicConstraints=critical,CA:TRUE' 'keyUsage=critical,keyCertSign,cRLSign,digitalSignature' \
      'subjectKeyIdentifier=hash')
}

# new_cert NAME CA SUBJECT USAGE [SAN] creates pki/NAME.{crt,key} signed by pki/CA unless it exists.
# USAGE is serverAuth or clientAuth.
new_cert() {
  local name="$1" ca="$2" subject="$3" usage="$4" san="${5:-}"
  [[ -f "${PKI_DIR}/${name}.crt" ]] && return 0
  local ext
  ext="$(printf 'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n')"
  ext+=$'\n'"extendedKeyUsage=${usage}"
  [[ -n "${san}" ]] && ext+=$'\n'"subjectAltName=${san}"
  openssl ecparam -name prime256v1 -genkey -noout -out "${PKI_DIR}/${name}.key" 2>/dev/null
  openssl req -new -key "${PKI_DIR}/${name}.key" -subj "${subject}" -out "${PKI_DIR}/${name}.csr"
  openssl x509 -req -sha256 -days 3650 -in "${PKI_DIR}/${name}.csr" -CA "${PKI_DIR}/${ca}.crt" \
    -CAkey "${PKI_DIR}/${ca}.key" -set_serial "0x$(openssl rand -hex 16)" -extfile <(printf '%s\n' "${ext}") \
    -out "${PKI_DIR}/${name}.crt" 2>/dev/null
  rm -f "${PKI_DIR}/${name}.csr"
}

# write_kubeconfig FILE USER (CERT_NAME | token:TOKEN) writes a self-contained kubeconfig for the local
# apiserver, authenticating with pki/CERT_NAME.{crt,key} or a bearer token.
write_kubeconfig() {
  local file="$1" user="$2" cred="$3" auth
  if [[ "${cred}" == token:* ]]; then
    auth="    token: ${cred#token:}"
  else
    auth="    client-certificate-data: $(base64 -w0 <"${PKI_DIR}/${cred}.crt")
    client-key-data: $(base64 -w0 <"${PKI_DIR}/${cred}.key")"
  fi
  (
    umask 077
    cat >"${file}.tmp" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: kray-local
  cluster:
    server: ${APISERVER_URL}
    certificate-authority-data: $(base64 -w0 <"${PKI_DIR}/ca.crt")
users:
- name: ${user}
  user:
${auth}
contexts:
- name: kray-local
  context:
    cluster: kray-local
    user: ${user}
current-context: kray-local
EOF
  )
  mv -f "${file}.tmp" "${file}"
}

# ensure_pki creates the CAs, certificates, service-account keys and kubeconfigs that are missing. The
# apiserver's serving certificate covers 127.0.0.1, localhost and the in-cluster names of `kubernetes`.
ensure_pki() {
  mkdir -p "${PKI_DIR}" "${KUBECONFIG_DIR}"
  chmod 700 "${PKI_DIR}"
  new_ca ca kray-local-ca
  new_ca front-proxy-ca kray-local-front-proxy-ca
  new_cert apiserver ca "/CN=kube-apiserver" serverAuth \
    "IP:127.0.0.1,IP:$(first_service_ip),DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
  new_cert front-proxy-client front-proxy-ca "/CN=front-proxy-client" clientAuth
  # kwok and kruise-manager run as system:masters: the local cluster has no RBAC for them.
  new_cert admin ca "/O=system:masters/CN=kray-admin" clientAuth
  new_cert kube-controller-manager ca "/CN=system:kube-controller-manager" clientAuth
  new_cert kube-scheduler ca "/CN=system:kube-scheduler" clientAuth
  new_cert kwok ca "/O=system:masters/CN=kwok" clientAuth
  new_cert kruise-manager ca "/O=system:masters/CN=kruise-manager" clientAuth
  if [[ ! -f "${PKI_DIR}/sa.key" ]]; then
    openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "${PKI_DIR}/sa.key" 2>/dev/null
    openssl pkey -in "${PKI_DIR}/sa.key" -pubout -out "${PKI_DIR}/sa.pub"
  fi
  [[ -f "${ADMIN_KUBECONFIG}" ]] || write_kubeconfig "${ADMIN_KUBECONFIG}" kray-admin admin
  local name
  for name in kube-controller-manager kube-scheduler kwok kruise-manager; do
    [[ -f "${KUBECONFIG_DIR}/${name}.kubeconfig" ]] ||
      write_kubeconfig "${KUBECONFIG_DIR}/${name}.kubeconfig" "${name}" "${name}"
  done
}
