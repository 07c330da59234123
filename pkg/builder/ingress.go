package builder

import (
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/names"
)

// DefaultIngressAnnotationPrefixes are the prefixes of the RayCluster annotations copied onto the head
// Ingress when the operator is configured with none: those of the common ingress controllers,
// cert-manager and ExternalDNS.
var DefaultIngressAnnotationPrefixes = []string{
	"nginx.ingress.kubernetes.io/",
	"alb.ingress.kubernetes.io/",
	"traefik.ingress.kubernetes.io/",
	"haproxy.org/",
	"ingress.kubernetes.io/",
	"cert-manager.io/",
	"external-dns.alpha.kubernetes.io/",
}

// IngressAnnotationCopied reports whether a RayCluster annotation goes onto the head Ingress under the
// operator's prefixes (DefaultIngressAnnotationPrefixes when nil): its key starts with one of them, and a key
// that names a snippet (ingress-nginx's configuration-snippet and the like, raw controller configuration)
// goes only when a prefix names it in full.
func IngressAnnotationCopied(key string, prefixes []string) bool {
	if prefixes == nil {
		prefixes = DefaultIngressAnnotationPrefixes
	}
	snippet := strings.Contains(strings.ToLower(key), "snippet")
	for _, p := range prefixes {
		if p != "" && strings.HasPrefix(key, p) && (!snippet || key == p) {
			return true
		}
	}
	return false
}

// HeadIngress is the Ingress to the head's dashboard when headGroupSpec.enableIngress is true, else nil.
// kubernetes.io/ingress.class becomes its class; the RayCluster's other annotations are copied onto it when
// IngressAnnotationCopied says so. KubeRay copies them all, which gives a user who may create RayClusters
// whatever an ingress controller does with an annotation, raw configuration snippets included.
func HeadIngress(rc *rayv1.RayCluster, opts Options) *networkingv1.Ingress {
	if !ptr.Deref(rc.Spec.HeadGroupSpec.EnableIngress, false) {
		return nil
	}
	o := rc.Spec.HeadGroupSpec.IngressOptions
	if o == nil {
		o = &rayv1.IngressOptions{}
	}
	pathType := networkingv1.PathTypePrefix
	if o.PathType != nil {
		pathType = networkingv1.PathType(*o.PathType)
	}
	port, ok := DashboardPort(rc)
	if !ok {
		port = constants.DefaultDashboardPort
	}
	rule := networkingv1.IngressRule{Host: ptr.Deref(o.Host, ""), IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
		Paths: []networkingv1.HTTPIngressPath{{
			Path:     ptr.Deref(o.Path, "/"),
			PathType: &pathType,
			Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
				Name: names.HeadServiceFor(rc), Port: networkingv1.ServiceBackendPort{Number: port}}},
		}},
	}}}
	meta := objectMeta(rc, names.HeadIngress(rc.Name), map[string]string{
		constants.LabelCluster:    rc.Name,
		constants.LabelIdentifier: checkLabel(rc.Name + "-" + constants.NodeTypeHead),
		constants.LabelAppName:    constants.AppNameDefault,
		constants.LabelCreatedBy:  constants.CreatedByValue,
	})
	ing := &networkingv1.Ingress{
		TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "Ingress"},
		ObjectMeta: meta,
		Spec:       networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{rule}},
	}
	for k, v := range rc.Annotations {
		if k == constants.AnnotationIngressClass {
			ing.Spec.IngressClassName = ptr.To(v)
			continue
		}
		if !IngressAnnotationCopied(k, opts.IngressAnnotationPrefixes) {
			continue
		}
		if ing.Annotations == nil {
			ing.Annotations = map[string]string{}
		}
		ing.Annotations[k] = v
	}
	if len(o.TLS) > 0 {
		ing.Spec.TLS = append([]networkingv1.IngressTLS(nil), o.TLS...)
	}
	return ing
}
