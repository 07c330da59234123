package builder

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/names"
	"github.com/kray-project/kray/pkg/spec"
)

// Labels of the serve Service.
const (
	labelOriginatedFromCRName = "ray.io/originated-from-cr-name"
	labelServe                = "ray.io/serve"
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
	port := int32(constants.DefaultDashboardPort)
	for _, p := range headServicePorts(rc) {
		if p.Name == "dashboard" {
			port = p.Port
		}
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

// ServeService is the Service in front of Ray Serve on every pod of the cluster, created when the cluster
// has the ray.io/enable-serve-service annotation "true", else nil. Its ports are the head's ports named
// "serve" or "serve-*".
func ServeService(rc *rayv1.RayCluster) *corev1.Service {
	if !isTrue(rc.Annotations[constants.AnnotationEnableServeService]) {
		return nil
	}
	var ports []corev1.ServicePort
	for _, p := range headServicePorts(rc) {
		if p.Name == "serve" || strings.HasPrefix(p.Name, "serve-") {
			ports = append(ports, p)
		}
	}
	return &corev1.Service{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: objectMeta(rc, names.ServeService(rc.Name), map[string]string{
			constants.LabelCluster:           rc.Name,
			labelOriginatedFromCRName:        rc.Name,
			constants.LabelOriginatedFromCRD: "RayCluster",
			labelServe:                       rc.Name + "-serve",
		}),
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{constants.LabelCluster: rc.Name},
			Ports:    ports,
			Type:     corev1.ServiceTypeClusterIP,
		},
	}
}

// HeadlessWorkerService is the headless Service of the cluster's workers, created when some group has
// numOfHosts above 1, else nil: no ports, not-ready addresses published, for peer discovery between hosts.
func HeadlessWorkerService(rc *rayv1.RayCluster) *corev1.Service {
	multiHost := false
	for i := range rc.Spec.WorkerGroupSpecs {
		multiHost = multiHost || spec.NumOfHosts(&rc.Spec.WorkerGroupSpecs[i]) > 1
	}
	if !multiHost {
		return nil
	}
	return &corev1.Service{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: objectMeta(rc, names.HeadlessWorkerService(rc.Name), map[string]string{
			constants.LabelCluster:               rc.Name,
			constants.LabelHeadlessWorkerService: rc.Name,
		}),
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			Type:                     corev1.ServiceTypeClusterIP,
			PublishNotReadyAddresses: true,
			Selector:                 map[string]string{constants.LabelCluster: rc.Name, constants.LabelNodeType: constants.NodeTypeWorker},
		},
	}
}
