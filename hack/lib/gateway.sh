# shellcheck shell=bash
# The Gateway API's CRDs for the local cluster: the standard channel's GatewayClass, Gateway and HTTPRoute, from
# its module (sigs.k8s.io/gateway-api, GATEWAY_API_VERSION), which a RayService's incremental upgrade writes.
# No Gateway controller runs: the e2e tests accept Gateways and routes themselves. Sourced by hack/cluster.sh
# (verb install-gateway-crds).

install_gateway_crds() {
  local crds kind
  crds="$(module_dir sigs.k8s.io/gateway-api "${GATEWAY_API_VERSION}")/config/crd/standard"
  for kind in gatewayclasses gateways httproutes; do
    apply_crds "${crds}/gateway.networking.k8s.io_${kind}.yaml" "the Gateway API's ${kind} CRD"
  done
}
