package shared

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fakediscovery "k8s.io/client-go/discovery/fake"
	k8stesting "k8s.io/client-go/testing"
)

// A group version is served only with every resource asked for; an unknown one is simply not served.
func TestServed(t *testing.T) {
	d := &fakediscovery.FakeDiscovery{Fake: &k8stesting.Fake{Resources: []*metav1.APIResourceList{{
		GroupVersion: "cert-manager.io/v1",
		APIResources: []metav1.APIResource{{Name: "issuers"}, {Name: "certificates"}},
	}}}}
	for _, tc := range []struct {
		gv        string
		resources []string
		want      bool
	}{
		{"cert-manager.io/v1", []string{"issuers", "certificates"}, true},
		{"cert-manager.io/v1", []string{"issuers", "clusterissuers"}, false},
		{"gateway.networking.k8s.io/v1", []string{"gateways"}, false},
	} {
		got, err := Served(d, tc.gv, tc.resources...)
		if err != nil || got != tc.want {
			t.Errorf("Served(%s, %v) = %v, %v; want %v", tc.gv, tc.resources, got, err, tc.want)
		}
	}
}
