package rayservice

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/builder"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/names"
)

// The objects of an incremental upgrade (KubeRay v1.7's names and shapes): a Gateway of the RayService's
// gatewayClassName, one HTTPRoute through it whose backends are the active and pending clusters' serve
// Services with the traffic weights, and a serve Service per cluster, owned by the cluster.

// GatewayListener is the name of the Gateway's only listener, HTTP on GatewayPort.
const (
	GatewayListener = "http"
	GatewayPort     = 80
)

// GatewayName is the RayService's Gateway, "<name>-gateway".
func GatewayName(svc *rayv1.RayService) string { return svc.Name + "-gateway" }

// HTTPRouteName is the RayService's HTTPRoute, "<name>-httproute".
func HTTPRouteName(svc *rayv1.RayService) string { return svc.Name + "-httproute" }

// Gateway is the RayService's Gateway: its clusterUpgradeOptions' gatewayClassName, one HTTP listener on
// port 80, owned by the RayService.
func Gateway(svc *rayv1.RayService) *gwv1.Gateway {
	return &gwv1.Gateway{
		TypeMeta:   metav1.TypeMeta{APIVersion: gwv1.GroupVersion.String(), Kind: "Gateway"},
		ObjectMeta: routingMeta(svc, GatewayName(svc)),
		Spec: gwv1.GatewaySpec{
			GatewayClassName: gwv1.ObjectName(upgradeOptions(svc).GatewayClassName),
			Listeners:        []gwv1.Listener{{Name: GatewayListener, Protocol: gwv1.HTTPProtocolType, Port: GatewayPort}},
		},
	}
}

// routingMeta is the metadata of the RayService's Gateway or HTTPRoute named name: its origin labels (which
// the cache selects by) and its controller reference.
func routingMeta(svc *rayv1.RayService, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: svc.Namespace, Labels: originLabels(svc),
		OwnerReferences: []metav1.OwnerReference{OwnerReference(svc)}}
}

// Backend is one cluster behind the HTTPRoute and the share of traffic it gets.
type Backend struct {
	Cluster *rayv1.RayCluster
	Weight  int32
}

// HTTPRoute is the RayService's route through its Gateway: every path to the backends' serve Services (on
// each cluster's serve port) with their weights, owned by the RayService.
func HTTPRoute(svc *rayv1.RayService, backends ...Backend) *gwv1.HTTPRoute {
	refs := make([]gwv1.HTTPBackendRef, 0, len(backends))
	for _, b := range backends {
		refs = append(refs, gwv1.HTTPBackendRef{BackendRef: gwv1.BackendRef{
			BackendObjectReference: gwv1.BackendObjectReference{
				Name:      gwv1.ObjectName(names.ServeService(b.Cluster.Name)),
				Namespace: ptr.To(gwv1.Namespace(svc.Namespace)),
				Port:      ptr.To(gwv1.PortNumber(servePort(b.Cluster))),
			},
			Weight: ptr.To(b.Weight),
		}})
	}
	return &gwv1.HTTPRoute{
		TypeMeta:   metav1.TypeMeta{APIVersion: gwv1.GroupVersion.String(), Kind: "HTTPRoute"},
		ObjectMeta: routingMeta(svc, HTTPRouteName(svc)),
		Spec: gwv1.HTTPRouteSpec{
			CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{
				Name: gwv1.ObjectName(GatewayName(svc)), Namespace: ptr.To(gwv1.Namespace(svc.Namespace)),
			}}},
			Rules: []gwv1.HTTPRouteRule{{
				Matches: []gwv1.HTTPRouteMatch{{Path: &gwv1.HTTPPathMatch{
					Type: ptr.To(gwv1.PathMatchPathPrefix), Value: ptr.To("/"),
				}}},
				BackendRefs: refs,
			}},
		},
	}
}

// servePort is the head container's port named "serve", else Serve's default.
func servePort(rc *rayv1.RayCluster) int32 {
	if c := rc.Spec.HeadGroupSpec.Template.Spec.Containers; len(c) > constants.RayContainerIndex {
		return builder.ServePort(&c[constants.RayContainerIndex])
	}
	return constants.DefaultServePort
}

// ClusterServeService is the serve Service of one cluster of an incremental upgrade, "<cluster>-serve-svc":
// the cluster's pods labelled ray.io/serve=true, on the head's serving ports, with the head group's service
// type, owned by the cluster (it goes with it). It is nil when the head names no serving port.
func ClusterServeService(svc *rayv1.RayService, rc *rayv1.RayCluster) *corev1.Service {
	ports := servingPorts(rc)
	if len(ports) == 0 {
		return nil
	}
	typ := rc.Spec.HeadGroupSpec.ServiceType
	if typ == "" {
		typ = corev1.ServiceTypeClusterIP
	}
	return &corev1.Service{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{
			Name: names.ServeService(rc.Name), Namespace: rc.Namespace,
			Labels: map[string]string{
				constants.LabelCluster:              rc.Name,
				constants.LabelOriginatedFromCRName: rc.Name,
				constants.LabelOriginatedFromCRD:    constants.OriginatedFromRayService,
				constants.LabelServe:                rc.Name + "-serve",
			},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(rc, rayv1.GroupVersion.WithKind("RayCluster"))},
		},
		Spec: corev1.ServiceSpec{
			Type:     typ,
			Ports:    ports,
			Selector: map[string]string{constants.LabelCluster: rc.Name, constants.LabelServe: "true"},
		},
	}
}

// upgradeOptions are svc's clusterUpgradeOptions, empty when unset.
func upgradeOptions(svc *rayv1.RayService) rayv1.ClusterUpgradeOptions {
	if s := svc.Spec.UpgradeStrategy; s != nil && s.ClusterUpgradeOptions != nil {
		return *s.ClusterUpgradeOptions
	}
	return rayv1.ClusterUpgradeOptions{}
}

// gatewayReady reports whether the Gateway's controller accepted and programmed it.
func gatewayReady(g *gwv1.Gateway) bool {
	return g != nil && meta.IsStatusConditionTrue(g.Status.Conditions, string(gwv1.GatewayConditionAccepted)) &&
		meta.IsStatusConditionTrue(g.Status.Conditions, string(gwv1.GatewayConditionProgrammed))
}

// routeReady reports whether the route's parent status for the RayService's Gateway says it is accepted
// and its backends resolved.
func routeReady(svc *rayv1.RayService, r *gwv1.HTTPRoute) bool {
	if r == nil {
		return false
	}
	for _, p := range r.Status.Parents {
		if string(p.ParentRef.Name) != GatewayName(svc) || (p.ParentRef.Namespace != nil && string(*p.ParentRef.Namespace) != svc.Namespace) {
			continue
		}
		return meta.IsStatusConditionTrue(p.Conditions, string(gwv1.RouteConditionAccepted)) && meta.IsStatusConditionTrue(p.Conditions, string(gwv1.RouteConditionResolvedRefs))
	}
	return false
}

// routeWeights are the weights the live route gives the clusters active and pending (by their serve
// Services), and whether it names each.
func routeWeights(r *gwv1.HTTPRoute, active, pending string) (a, p int32, hasA, hasP bool) {
	if r == nil {
		return 0, 0, false, false
	}
	for _, rule := range r.Spec.Rules {
		for _, b := range rule.BackendRefs {
			w := int32(1) // the Gateway API's default weight
			if b.Weight != nil {
				w = *b.Weight
			}
			switch string(b.Name) {
			case names.ServeService(active):
				a, hasA = w, true
			case names.ServeService(pending):
				p, hasP = w, true
			}
		}
	}
	return a, p, hasA, hasP
}

// gatewayMatches reports whether the live Gateway has the class and listener want has.
func gatewayMatches(live, want *gwv1.Gateway) bool {
	if live.Spec.GatewayClassName != want.Spec.GatewayClassName || len(live.Spec.Listeners) != len(want.Spec.Listeners) {
		return false
	}
	for i, l := range want.Spec.Listeners {
		if got := live.Spec.Listeners[i]; got.Name != l.Name || got.Protocol != l.Protocol || got.Port != l.Port {
			return false
		}
	}
	return true
}

// routeMatches reports whether the live route has the parents, path and backends want has (defaults the API
// server fills in aside).
func routeMatches(live, want *gwv1.HTTPRoute) bool {
	if len(live.Spec.ParentRefs) != len(want.Spec.ParentRefs) || len(live.Spec.Rules) != len(want.Spec.Rules) || len(live.Spec.Hostnames) != 0 {
		return false
	}
	for i, p := range want.Spec.ParentRefs {
		if got := live.Spec.ParentRefs[i]; got.Name != p.Name || ptr.Deref(got.Namespace, "") != ptr.Deref(p.Namespace, "") {
			return false
		}
	}
	for i, rule := range want.Spec.Rules {
		got := live.Spec.Rules[i]
		if len(got.Matches) != 1 || got.Matches[0].Path == nil || ptr.Deref(got.Matches[0].Path.Value, "") != "/" ||
			ptr.Deref(got.Matches[0].Path.Type, "") != gwv1.PathMatchPathPrefix || len(got.Filters) != 0 || len(got.BackendRefs) != len(rule.BackendRefs) {
			return false
		}
		for j, b := range rule.BackendRefs {
			g := got.BackendRefs[j]
			if g.Name != b.Name || ptr.Deref(g.Namespace, "") != ptr.Deref(b.Namespace, "") || ptr.Deref(g.Port, 0) != ptr.Deref(b.Port, 0) ||
				ptr.Deref(g.Weight, 1) != ptr.Deref(b.Weight, 1) || ptr.Deref(g.Kind, "Service") != "Service" || ptr.Deref(g.Group, "") != "" {
				return false
			}
		}
	}
	return true
}
