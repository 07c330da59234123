package builder

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/names"
	"github.com/kray-project/kray/pkg/spec"
)

// defaultHeadPorts are the head Service ports when the Ray container declares none.
var defaultHeadPorts = []corev1.ContainerPort{
	{Name: "client", ContainerPort: DefaultClientPort},
	{Name: "gcs-server", ContainerPort: 6379},
	{Name: "dashboard", ContainerPort: constants.DefaultDashboardPort},
	{Name: "metrics", ContainerPort: DefaultMetricsPort},
	{Name: "serve", ContainerPort: constants.DefaultServePort},
}

// HeadServiceLabels are the head Service's labels and selector; app.kubernetes.io/name follows the head template.
func HeadServiceLabels(rc *rayv1.RayCluster) map[string]string {
	app := constants.AppNameDefault
	if v, ok := rc.Spec.HeadGroupSpec.Template.Labels[constants.LabelAppName]; ok {
		app = v
	}
	return map[string]string{
		constants.LabelCluster:    rc.Name,
		constants.LabelNodeType:   constants.NodeTypeHead,
		constants.LabelIdentifier: checkLabel(rc.Name + "-" + constants.NodeTypeHead),
		constants.LabelAppName:    app,
		constants.LabelCreatedBy:  constants.CreatedByValue,
	}
}

// HeadService is the Service in front of the head pod (KubeRay §4.2): headless unless a type or a custom
// headService says otherwise, one port per named Ray container port plus metrics.
func HeadService(rc *rayv1.RayCluster, opts Options) *corev1.Service {
	labels := HeadServiceLabels(rc)
	ports := headServicePorts(rc)
	if custom := rc.Spec.HeadGroupSpec.HeadService; custom != nil {
		svc := custom.DeepCopy()
		svc.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Service"}
		meta := objectMeta(rc, names.HeadServiceFor(rc), mergeMaps(svc.Labels, labels))
		meta.Annotations = mergeMaps(svc.Annotations, rc.Spec.HeadServiceAnnotations)
		svc.ObjectMeta = meta
		svc.Spec.Selector = labels
		svc.Spec.Ports = append(svc.Spec.Ports, ports...)
		if svc.Spec.Type == "" {
			svc.Spec.Type = rc.Spec.HeadGroupSpec.ServiceType
		}
		svc.Status = corev1.ServiceStatus{}
		return svc
	}
	meta := objectMeta(rc, names.HeadServiceFor(rc), labels)
	if len(rc.Spec.HeadServiceAnnotations) > 0 {
		meta.Annotations = mergeMaps(nil, rc.Spec.HeadServiceAnnotations)
	}
	svc := &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: meta,
		Spec: corev1.ServiceSpec{
			Selector: labels,
			Ports:    ports,
			Type:     rc.Spec.HeadGroupSpec.ServiceType,
		},
	}
	if svc.Spec.Type == "" || svc.Spec.Type == corev1.ServiceTypeClusterIP {
		svc.Spec.Type = corev1.ServiceTypeClusterIP
		if opts.HeadClusterIPService {
			return svc
		}
		svc.Spec.ClusterIP = corev1.ClusterIPNone
		svc.Spec.PublishNotReadyAddresses = true
	}
	return svc
}

// headServicePorts maps the head Ray container's ports to Service ports, sorted by name, with metrics always present.
func headServicePorts(rc *rayv1.RayCluster) []corev1.ServicePort {
	var container []corev1.ContainerPort
	if cs := rc.Spec.HeadGroupSpec.Template.Spec.Containers; len(cs) > 0 {
		container = cs[constants.RayContainerIndex].Ports
	}
	if len(container) == 0 {
		container = defaultHeadPorts
	}
	appProtocol := "tcp"
	var ports []corev1.ServicePort
	for _, p := range container {
		name := p.Name
		if name == "" {
			name = fmt.Sprintf("%d-port", p.ContainerPort)
		}
		ports = append(ports, corev1.ServicePort{Name: name, Port: p.ContainerPort, AppProtocol: &appProtocol})
	}
	if !hasServicePort(ports, "metrics") {
		ports = append(ports, corev1.ServicePort{Name: "metrics", Port: DefaultMetricsPort, AppProtocol: &appProtocol})
	}
	sort.Slice(ports, func(i, j int) bool { return ports[i].Name < ports[j].Name })
	return ports
}

// DashboardPort is the head Service's port named "dashboard"; false when the head's ports name none.
func DashboardPort(rc *rayv1.RayCluster) (int32, bool) {
	for _, p := range headServicePorts(rc) {
		if p.Name == "dashboard" {
			return p.Port, true
		}
	}
	return 0, false
}

func hasServicePort(ports []corev1.ServicePort, name string) bool {
	for _, p := range ports {
		if p.Name == name {
			return true
		}
	}
	return false
}

// mergeMaps returns a new map with base's entries overlaid by over's; nil when both are empty.
func mergeMaps(base, over map[string]string) map[string]string {
	if len(base) == 0 && len(over) == 0 {
		return nil
	}
	out := make(map[string]string, len(base)+len(over))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		out[k] = v
	}
	return out
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
			constants.LabelCluster:              rc.Name,
			constants.LabelOriginatedFromCRName: rc.Name,
			constants.LabelOriginatedFromCRD:    "RayCluster",
			constants.LabelServe:                rc.Name + "-serve",
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
