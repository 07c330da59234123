package main

import (
	"fmt"
	"net/http"
	"strings"

	"k8s.io/client-go/rest"
)

// kubernetesProxy is how kray reaches Ray's HTTP endpoints through the API server, as KubeRay's
// --use-kubernetes-proxy does: the base URL templates of a cluster's dashboard (the services/proxy
// subresource of its head Service's "dashboard" port) and of a head's Serve proxy (the pods/proxy subresource
// on its serve port), and an HTTP client that authenticates as the operator. The API server dials the pods,
// so the calls need neither a route from the operator to the pod network nor a NetworkPolicy that lets the
// operator in; a NetworkPolicy still judges the API server's own address.
func kubernetesProxy(cfg *rest.Config) (dashboardTemplate, serveTemplate string, hc *http.Client, err error) {
	base, _, err := rest.DefaultServerUrlFor(cfg)
	if err != nil {
		return "", "", nil, fmt.Errorf("--use-kubernetes-proxy: the API server's URL: %w", err)
	}
	if hc, err = rest.HTTPClientFor(cfg); err != nil {
		return "", "", nil, fmt.Errorf("--use-kubernetes-proxy: an HTTP client for the API server: %w", err)
	}
	root := strings.TrimSuffix(base.String(), "/")
	return root + "/api/v1/namespaces/{namespace}/services/{service}:dashboard/proxy",
		root + "/api/v1/namespaces/{namespace}/pods/{pod}:{port}/proxy", hc, nil
}
