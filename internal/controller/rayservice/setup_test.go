package rayservice

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fakediscovery "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"

	rayv1 "github.com/kray-project/kray/api/v1"
)

func TestRoutingServed(t *testing.T) {
	list := func(names ...string) []*metav1.APIResourceList {
		l := &metav1.APIResourceList{GroupVersion: "gateway.networking.k8s.io/v1"}
		for _, n := range names {
			l.APIResources = append(l.APIResources, metav1.APIResource{Name: n, Namespaced: true})
		}
		return []*metav1.APIResourceList{l}
	}
	cases := map[string]struct {
		resources []*metav1.APIResourceList
		want      bool
	}{
		"Gateway API served":     {list("gateways", "httproutes", "gatewayclasses"), true},
		"no Gateway API":         {nil, false},
		"Gateways without route": {list("gateways", "gatewayclasses"), false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			d := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{Resources: tc.resources}}
			got, err := RoutingServed(d)
			if err != nil || got != tc.want {
				t.Errorf("RoutingServed = %v, %v; want %v, nil", got, err, tc.want)
			}
		})
	}
}

// An operator started without the Gateway API never reads Gateways or routes (an unscoped informer would
// cache every Gateway of the cluster): the upgrade waits and says why.
func TestObserveRoutingWithoutGatewayAPIAtStart(t *testing.T) {
	r := &Reconciler{NoGatewayAPI: true} // a nil Cache: any read panics
	o := &Observed{}
	if err := r.observeRouting(context.Background(), &rayv1.RayService{}, o); err != nil || o.GatewayErr != errNoGatewayAPIAtStart {
		t.Errorf("observeRouting = %v, GatewayErr %v; want nil and errNoGatewayAPIAtStart", err, o.GatewayErr)
	}
}
