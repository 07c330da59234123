package builder

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/names"
)

// NetworkPolicies are the NetworkPolicies of spec.networkPolicy as KubeRay v1.7 renders them, nil when the
// RayCluster asks for none: one for the head (names.HeadNetworkPolicy) and one per worker group
// (names.WorkerNetworkPolicy), each letting every pod of the cluster in and out on every port, then the
// user's rules (a group's entry in workerGroups replaces the worker rules). The head's also lets in the
// submitter pod of the K8sJobMode RayJob the cluster was made for, on the dashboard port, and, when
// opts.OperatorPeer is set, the operator on the ports it calls (OperatorPorts). DNS and the API server are
// the user's to allow.
func NetworkPolicies(rc *rayv1.RayCluster, opts Options) []*networkingv1.NetworkPolicy {
	np := rc.Spec.NetworkPolicy
	if np == nil {
		return nil
	}
	ingress, egress := NetworkPolicyTypes(np)
	cluster := networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{constants.LabelCluster: rc.Name}}}

	build := func(name, group string, selector map[string]string, rules *rayv1.NetworkPolicyRules, extraIngress []networkingv1.NetworkPolicyIngressRule) *networkingv1.NetworkPolicy {
		p := &networkingv1.NetworkPolicy{
			TypeMeta: metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
			ObjectMeta: objectMeta(rc, name, map[string]string{
				constants.LabelCluster:   rc.Name,
				constants.LabelGroup:     group,
				constants.LabelAppName:   constants.AppNameDefault,
				constants.LabelCreatedBy: constants.CreatedByValue,
			}),
			Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: selector}},
		}
		if rules == nil {
			rules = &rayv1.NetworkPolicyRules{}
		}
		if ingress {
			p.Spec.PolicyTypes = append(p.Spec.PolicyTypes, networkingv1.PolicyTypeIngress)
			p.Spec.Ingress = append([]networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{cluster}}}, extraIngress...)
			for _, r := range rules.IngressRules {
				p.Spec.Ingress = append(p.Spec.Ingress, *r.DeepCopy())
			}
		}
		if egress {
			p.Spec.PolicyTypes = append(p.Spec.PolicyTypes, networkingv1.PolicyTypeEgress)
			p.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{cluster}}}
			for _, r := range rules.EgressRules {
				p.Spec.Egress = append(p.Spec.Egress, *r.DeepCopy())
			}
		}
		defaultProtocols(&p.Spec)
		return p
	}

	var headIngress []networkingv1.NetworkPolicyIngressRule
	if job, ok := submittingRayJob(rc); ok {
		headIngress = append(headIngress, networkingv1.NetworkPolicyIngressRule{
			From: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{
				constants.LabelOriginatedFromCRName: job,
				constants.LabelOriginatedFromCRD:    constants.OriginatedFromRayJob,
			}}}},
			Ports: []networkingv1.NetworkPolicyPort{tcpPort(dashboardPort(rc))},
		})
	}
	if opts.OperatorPeer != nil {
		rule := networkingv1.NetworkPolicyIngressRule{From: []networkingv1.NetworkPolicyPeer{*opts.OperatorPeer.DeepCopy()}}
		for _, port := range OperatorPorts(rc) {
			rule.Ports = append(rule.Ports, tcpPort(port))
		}
		headIngress = append(headIngress, rule)
	}
	out := []*networkingv1.NetworkPolicy{build(names.HeadNetworkPolicy(rc.Name), constants.HeadGroupName,
		map[string]string{constants.LabelCluster: rc.Name, constants.LabelNodeType: constants.NodeTypeHead}, np.Head, headIngress)}
	for i := range rc.Spec.WorkerGroupSpecs {
		group := rc.Spec.WorkerGroupSpecs[i].GroupName
		rules := np.Worker
		for j := range np.WorkerGroups {
			if np.WorkerGroups[j].GroupName == group {
				rules = &np.WorkerGroups[j].NetworkPolicyRules
			}
		}
		out = append(out, build(names.WorkerNetworkPolicy(rc.Name, group), group, map[string]string{
			constants.LabelCluster: rc.Name, constants.LabelNodeType: constants.NodeTypeWorker, constants.LabelGroup: group,
		}, rules, nil))
	}
	return out
}

// NetworkPolicyTypes says which directions mode restricts (DenyAll, the default, both).
func NetworkPolicyTypes(np *rayv1.NetworkPolicyConfig) (ingress, egress bool) {
	mode := rayv1.NetworkPolicyDenyAll
	if np.Mode != nil {
		mode = *np.Mode
	}
	return mode != rayv1.NetworkPolicyDenyAllEgress, mode != rayv1.NetworkPolicyDenyAllIngress
}

// OperatorPorts are the head's ports the operator calls: the GCS (worker drains and membership), the
// dashboard (jobs, Serve applications) and, for a RayService's cluster, the Serve proxy's health check.
func OperatorPorts(rc *rayv1.RayCluster) []int32 {
	gcs, err := strconv.ParseInt(GCSPort(rc), 10, 32)
	if err != nil {
		gcs, _ = strconv.ParseInt(DefaultHeadPort, 10, 32)
	}
	ports := []int32{int32(gcs), dashboardPort(rc)}
	if rc.Labels[constants.LabelOriginatedFromCRD] == constants.OriginatedFromRayService {
		serve := int32(constants.DefaultServePort)
		if c := rc.Spec.HeadGroupSpec.Template.Spec.Containers; len(c) > constants.RayContainerIndex {
			serve = ServePort(&c[constants.RayContainerIndex])
		}
		ports = append(ports, serve)
	}
	return ports
}

// submittingRayJob is the name of the RayJob whose submitter pod dials the cluster's dashboard: the RayJob
// controlling rc, when rc was made for its K8sJobMode submission (KubeRay's ray.io/job-submission-mode).
func submittingRayJob(rc *rayv1.RayCluster) (string, bool) {
	if rc.Labels[constants.LabelJobSubmissionMode] != string(rayv1.K8sJobMode) {
		return "", false
	}
	owner := metav1.GetControllerOf(rc)
	if owner == nil || owner.Kind != "RayJob" || !isRayGroup(owner.APIVersion) {
		return "", false
	}
	return owner.Name, true
}

// isRayGroup reports whether apiVersion is of the ray.io group.
func isRayGroup(apiVersion string) bool {
	gv, err := schema.ParseGroupVersion(apiVersion)
	return err == nil && gv.Group == rayv1.GroupVersion.Group
}

// dashboardPort is the port the head's dashboard listens on: its dashboard-port start param when it is a
// number (KubeRay reads it there), else 8265; like the GCS port, a port of the pod, which a NetworkPolicy names.
func dashboardPort(rc *rayv1.RayCluster) int32 {
	if n, err := strconv.ParseInt(rc.Spec.HeadGroupSpec.RayStartParams["dashboard-port"], 10, 32); err == nil {
		return int32(n)
	}
	return constants.DefaultDashboardPort
}

// tcpPort is a NetworkPolicy port over TCP.
func tcpPort(port int32) networkingv1.NetworkPolicyPort {
	protocol := corev1.ProtocolTCP
	p := intstr.FromInt32(port)
	return networkingv1.NetworkPolicyPort{Protocol: &protocol, Port: &p}
}

// defaultProtocols gives every port without a protocol TCP, as the API server's defaulting does, so that a
// stored policy equals the one built.
func defaultProtocols(spec *networkingv1.NetworkPolicySpec) {
	set := func(ports []networkingv1.NetworkPolicyPort) {
		for i := range ports {
			if ports[i].Protocol == nil {
				tcp := corev1.ProtocolTCP
				ports[i].Protocol = &tcp
			}
		}
	}
	for i := range spec.Ingress {
		set(spec.Ingress[i].Ports)
	}
	for i := range spec.Egress {
		set(spec.Egress[i].Ports)
	}
}
