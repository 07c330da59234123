package builder

import (
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/names"
)

// HeadIngress is the Ingress to the head's dashboard when headGroupSpec.enableIngress is true, else nil.
// Every RayCluster annotation but kubernetes.io/ingress.class is copied onto it; that one becomes its class.
func HeadIngress(rc *rayv1.RayCluster) *networkingv1.Ingress {
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
