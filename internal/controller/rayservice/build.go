package rayservice

import (
	"crypto/sha1"
	"encoding/base32"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/builder"
	"github.com/kray-project/kray/pkg/constants"
)

// HashScheme is the value kray writes in a RayService cluster's ray.io/kuberay-version annotation: it names
// how the cluster's spec hash was computed. A cluster with another value (one KubeRay made) gets its spec
// rebuilt in place once, with kray's hash, instead of being taken for a changed spec and replaced.
const HashScheme = "kray-hash-1"

// HeadServiceName and ServeServiceName are the RayService's own Services, which follow the serving cluster.
func HeadServiceName(svc *rayv1.RayService) string { return svc.Name + "-head-svc" }

// ServeServiceName is spec.serveService's name when set, else <name>-serve-svc.
func ServeServiceName(svc *rayv1.RayService) string {
	if s := svc.Spec.ServeService; s != nil && s.Name != "" {
		return s.Name
	}
	return svc.Name + "-serve-svc"
}

// OwnerReference is the controller reference of the objects a RayService creates.
func OwnerReference(svc *rayv1.RayService) metav1.OwnerReference {
	return *metav1.NewControllerRef(svc, rayv1.GroupVersion.WithKind("RayService"))
}

// originLabels are the labels that tie an object to the RayService it was made for.
func originLabels(svc *rayv1.RayService) map[string]string {
	return map[string]string{
		constants.LabelOriginatedFromCRName: svc.Name,
		constants.LabelOriginatedFromCRD:    constants.OriginatedFromRayService,
	}
}

// ClusterHash is the hash of the RayService's cluster spec with each group's replicas, minReplicas,
// maxReplicas and workersToDelete left out: edits of those alone (the autoscaler's, or a user's) never
// replace a cluster. base32hex of SHA-1, as KubeRay's.
func ClusterHash(spec *rayv1.RayClusterSpec) string {
	muted := spec.DeepCopy()
	for i := range muted.WorkerGroupSpecs {
		g := &muted.WorkerGroupSpecs[i]
		g.Replicas, g.MinReplicas, g.MaxReplicas = nil, nil, nil
		g.ScaleStrategy.WorkersToDelete = nil
	}
	data, err := json.Marshal(muted)
	if err != nil {
		panic(err) // API types always marshal
	}
	sum := sha1.Sum(data)
	return base32.HexEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:])
}

// Cluster is the RayCluster named name that runs svc's applications: rayClusterConfig as the spec, the
// RayService's labels and annotations with the origin labels, and the annotations that record what spec it
// was built from (hash, number of worker groups, hash scheme). It does not modify svc.
func Cluster(svc *rayv1.RayService, name string) *rayv1.RayCluster {
	labels := map[string]string{}
	for k, v := range svc.Labels {
		labels[k] = v
	}
	for k, v := range originLabels(svc) {
		labels[k] = v
	}
	annotations := map[string]string{}
	for k, v := range svc.Annotations {
		annotations[k] = v
	}
	annotations[constants.AnnotationClusterHash] = ClusterHash(&svc.Spec.RayClusterSpec)
	annotations[constants.AnnotationNumWorkerGroups] = strconv.Itoa(len(svc.Spec.RayClusterSpec.WorkerGroupSpecs))
	annotations[constants.AnnotationKubeRayVersion] = HashScheme
	spec := svc.Spec.RayClusterSpec.DeepCopy()
	if inPlaceWorkers(svc) {
		annotations[constants.AnnotationHeadHash] = HeadHash(&svc.Spec.RayClusterSpec)
		rollInPlace(spec)
	}
	return &rayv1.RayCluster{
		TypeMeta: metav1.TypeMeta{APIVersion: rayv1.GroupVersion.String(), Kind: "RayCluster"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            name,
			Namespace:       svc.Namespace,
			Labels:          labels,
			Annotations:     annotations,
			OwnerReferences: []metav1.OwnerReference{OwnerReference(svc)},
		},
		Spec: *spec,
	}
}

// inPlaceWorkers reports whether svc asks for worker-only changes to roll through its serving cluster.
func inPlaceWorkers(svc *rayv1.RayService) bool {
	return svc.Annotations[constants.AnnotationInPlaceWorkerUpgrade] == "true"
}

// HeadHash is ClusterHash of the spec without its worker groups: the head and the cluster-level fields.
func HeadHash(spec *rayv1.RayClusterSpec) string {
	head := spec.DeepCopy()
	head.WorkerGroupSpecs = nil
	return ClusterHash(head)
}

// rollInPlace makes a RayService's cluster spec update its pods in place (RollingUpdate) and, for each
// worker group that says nothing of it, start a new worker before it takes an old one out (maxSurge 1,
// maxUnavailable 0), so that a group never serves with fewer workers than its replicas.
func rollInPlace(spec *rayv1.RayClusterSpec) {
	spec.UpgradeStrategy = &rayv1.RayClusterUpgradeStrategy{Type: ptr.To(rayv1.RayClusterRollingUpdate)}
	for i := range spec.WorkerGroupSpecs {
		if g := &spec.WorkerGroupSpecs[i]; g.RollingUpdate == nil {
			g.RollingUpdate = &rayv1.WorkerGroupRollingUpdate{MaxUnavailable: ptr.To(intstr.FromInt32(0)), MaxSurge: ptr.To(intstr.FromInt32(1))}
		}
	}
}

// HeadService is the RayService's head Service, selecting rc's head: rc's head Service renamed, without
// headServiceAnnotations, owned by the RayService. It carries rc's ray.io/cluster label, so kray's cache
// holds it.
func HeadService(svc *rayv1.RayService, rc *rayv1.RayCluster, opts builder.Options) *corev1.Service {
	plain := rc.DeepCopy()
	plain.Spec.HeadServiceAnnotations = nil
	s := builder.HeadService(plain, opts)
	labels := originLabels(svc)
	labels[constants.LabelNodeType] = constants.NodeTypeHead
	labels[constants.LabelIdentifier] = svc.Name + "-" + constants.NodeTypeHead
	labels[constants.LabelCluster] = rc.Name
	var annotations map[string]string
	if custom := rc.Spec.HeadGroupSpec.HeadService; custom != nil && len(custom.Annotations) > 0 {
		annotations = custom.Annotations
	}
	s.ObjectMeta = metav1.ObjectMeta{
		Name:            HeadServiceName(svc),
		Namespace:       svc.Namespace,
		Labels:          labels,
		Annotations:     annotations,
		OwnerReferences: []metav1.OwnerReference{OwnerReference(svc)},
	}
	return s
}

// ErrNoServePort refuses a head whose container names no serving port while the RayService sets no
// serveService, in KubeRay's words.
var ErrNoServePort = fmt.Errorf("Please specify a port named '%[1]s' (or with the prefix '%[1]s-', e.g. '%[1]s-grpc') in the Ray head container; otherwise, the Kubernetes service for Ray Serve will not be created.", constants.ServePortName)

// servingPorts are the Service ports of rc's head container ports named "serve" or "serve-<protocol>"
// (serve:8000 when the container lists no ports), sorted by name.
func servingPorts(rc *rayv1.RayCluster) []corev1.ServicePort {
	head := rc.Spec.HeadGroupSpec.Template.Spec.Containers
	if len(head) <= constants.RayContainerIndex || len(head[constants.RayContainerIndex].Ports) == 0 {
		return []corev1.ServicePort{{Name: constants.ServePortName, Port: constants.DefaultServePort}}
	}
	var ports []corev1.ServicePort
	for _, p := range head[constants.RayContainerIndex].Ports {
		if p.Name == constants.ServePortName || strings.HasPrefix(p.Name, constants.ServePortName+"-") {
			ports = append(ports, corev1.ServicePort{Name: p.Name, Port: p.ContainerPort})
		}
	}
	slices.SortFunc(ports, func(a, b corev1.ServicePort) int { return strings.Compare(a.Name, b.Name) })
	return ports
}

// ServeService is the Service in front of the Serve proxies of rc: the pods labelled ray.io/serve=true, on
// the head's serving ports. It is spec.serveService when set: its metadata kept, its type kept (the head
// group's when empty), and each serving port it names as it defines it (an appProtocol, a nodePort), the
// others as the head has them; its own ports as they are when the head has none. Else it is
// <name>-serve-svc with the head group's service type.
func ServeService(svc *rayv1.RayService, rc *rayv1.RayCluster) (*corev1.Service, error) {
	ports := servingPorts(rc)
	s := &corev1.Service{Spec: corev1.ServiceSpec{Type: rc.Spec.HeadGroupSpec.ServiceType, Ports: ports}}
	if custom := svc.Spec.ServeService; custom != nil {
		s = custom.DeepCopy()
		s.Status = corev1.ServiceStatus{}
		if s.Spec.Type == "" {
			s.Spec.Type = rc.Spec.HeadGroupSpec.ServiceType
		}
		if len(ports) > 0 {
			for i := range ports {
				for _, own := range custom.Spec.Ports {
					if own.Name == ports[i].Name {
						ports[i] = own
					}
				}
			}
			s.Spec.Ports = ports
		}
	} else if len(ports) == 0 {
		return nil, ErrNoServePort
	}
	s.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Service"}
	s.Name = ServeServiceName(svc)
	s.Namespace = svc.Namespace
	labels := map[string]string{}
	for k, v := range s.Labels {
		labels[k] = v
	}
	for k, v := range originLabels(svc) {
		labels[k] = v
	}
	labels[constants.LabelServe] = svc.Name + "-serve"
	labels[constants.LabelCluster] = rc.Name
	s.Labels = labels
	s.OwnerReferences = []metav1.OwnerReference{OwnerReference(svc)}
	s.Spec.Selector = map[string]string{constants.LabelCluster: rc.Name, constants.LabelServe: "true"}
	if s.Spec.Type == "" {
		s.Spec.Type = corev1.ServiceTypeClusterIP
	}
	return s, nil
}
