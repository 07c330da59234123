package builder_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/builder"
	"github.com/kray-project/kray/pkg/constants"
)

// policyShape is what a NetworkPolicy restricts, and its rules' ports, rule by rule.
type policyShape struct {
	Name          string
	Types         []networkingv1.PolicyType
	IngressPorts  [][]int32
	EgressRules   int
	IngressFromNS []string
}

func shapeOf(p *networkingv1.NetworkPolicy) policyShape {
	s := policyShape{Name: p.Name, Types: p.Spec.PolicyTypes, EgressRules: len(p.Spec.Egress)}
	for _, r := range p.Spec.Ingress {
		var ports []int32
		for _, port := range r.Ports {
			ports = append(ports, port.Port.IntVal)
		}
		s.IngressPorts = append(s.IngressPorts, ports)
		for _, peer := range r.From {
			if peer.NamespaceSelector != nil {
				s.IngressFromNS = append(s.IngressFromNS, peer.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"])
			}
		}
	}
	return s
}

func TestNetworkPolicies(t *testing.T) {
	ingressOnly := []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
	egressOnly := []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}
	both := []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}
	operator := &networkingv1.NetworkPolicyPeer{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "kray-system"}},
		PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": "kray"}},
	}
	extra := &rayv1.NetworkPolicyRules{
		IngressRules: []networkingv1.NetworkPolicyIngressRule{{Ports: []networkingv1.NetworkPolicyPort{{Port: ptr.To(intstr.FromInt32(8080))}}}},
		EgressRules:  []networkingv1.NetworkPolicyEgressRule{{}},
	}
	for _, tc := range []struct {
		name   string
		mutate func(*rayv1.RayCluster)
		opts   builder.Options
		want   []policyShape
	}{
		{name: "none asked", mutate: func(rc *rayv1.RayCluster) { rc.Spec.NetworkPolicy = nil }},
		{name: "DenyAll by default: every pod of the cluster in and out, nothing else",
			want: []policyShape{{Name: "c-head", Types: both, IngressPorts: [][]int32{nil}, EgressRules: 1},
				{Name: "c-workers-small", Types: both, IngressPorts: [][]int32{nil}, EgressRules: 1}}},
		{name: "DenyAllIngress restricts ingress only",
			mutate: func(rc *rayv1.RayCluster) { rc.Spec.NetworkPolicy.Mode = ptr.To(rayv1.NetworkPolicyDenyAllIngress) },
			want: []policyShape{{Name: "c-head", Types: ingressOnly, IngressPorts: [][]int32{nil}},
				{Name: "c-workers-small", Types: ingressOnly, IngressPorts: [][]int32{nil}}}},
		{name: "DenyAllEgress restricts egress only",
			mutate: func(rc *rayv1.RayCluster) { rc.Spec.NetworkPolicy.Mode = ptr.To(rayv1.NetworkPolicyDenyAllEgress) },
			want: []policyShape{{Name: "c-head", Types: egressOnly, EgressRules: 1},
				{Name: "c-workers-small", Types: egressOnly, EgressRules: 1}}},
		{name: "head rules stay on the head, worker rules on the workers",
			mutate: func(rc *rayv1.RayCluster) { rc.Spec.NetworkPolicy.Head = extra },
			want: []policyShape{{Name: "c-head", Types: both, IngressPorts: [][]int32{nil, {8080}}, EgressRules: 2},
				{Name: "c-workers-small", Types: both, IngressPorts: [][]int32{nil}, EgressRules: 1}}},
		{name: "a group's entry replaces the worker rules",
			mutate: func(rc *rayv1.RayCluster) {
				rc.Spec.NetworkPolicy.Worker = extra
				rc.Spec.NetworkPolicy.WorkerGroups = []rayv1.WorkerGroupNetworkPolicyRules{{GroupName: "small"}}
			},
			want: []policyShape{{Name: "c-head", Types: both, IngressPorts: [][]int32{nil}, EgressRules: 1},
				{Name: "c-workers-small", Types: both, IngressPorts: [][]int32{nil}, EgressRules: 1}}},
		{name: "the operator on the GCS and dashboard ports",
			mutate: func(rc *rayv1.RayCluster) { rc.Spec.HeadGroupSpec.RayStartParams = map[string]string{"port": "6380"} },
			opts:   builder.Options{OperatorPeer: operator},
			want: []policyShape{{Name: "c-head", Types: both, IngressPorts: [][]int32{nil, {6380, 8265}}, EgressRules: 1, IngressFromNS: []string{"kray-system"}},
				{Name: "c-workers-small", Types: both, IngressPorts: [][]int32{nil}, EgressRules: 1}}},
		{name: "the operator on the ports Ray listens on",
			mutate: func(rc *rayv1.RayCluster) {
				rc.Spec.HeadGroupSpec.RayStartParams = map[string]string{"dashboard-port": "8266"}
			},
			opts: builder.Options{OperatorPeer: operator},
			want: []policyShape{{Name: "c-head", Types: both, IngressPorts: [][]int32{nil, {6379, 8266}}, EgressRules: 1, IngressFromNS: []string{"kray-system"}},
				{Name: "c-workers-small", Types: both, IngressPorts: [][]int32{nil}, EgressRules: 1}}},
		{name: "the operator on the Serve port too in a RayService's cluster",
			mutate: func(rc *rayv1.RayCluster) {
				rc.Labels = map[string]string{constants.LabelOriginatedFromCRD: constants.OriginatedFromRayService}
			},
			opts: builder.Options{OperatorPeer: operator},
			want: []policyShape{{Name: "c-head", Types: both, IngressPorts: [][]int32{nil, {6379, 8265, 8000}}, EgressRules: 1, IngressFromNS: []string{"kray-system"}},
				{Name: "c-workers-small", Types: both, IngressPorts: [][]int32{nil}, EgressRules: 1}}},
		{name: "no submitter rule for a SidecarMode RayJob's cluster (its submitter runs in the head)",
			mutate: func(rc *rayv1.RayCluster) {
				rc.Labels = map[string]string{constants.LabelJobSubmissionMode: string(rayv1.SidecarMode)}
				rc.OwnerReferences = []metav1.OwnerReference{{APIVersion: "ray.io/v1", Kind: "RayJob", Name: "j", Controller: ptr.To(true)}}
			},
			want: []policyShape{{Name: "c-head", Types: both, IngressPorts: [][]int32{nil}, EgressRules: 1},
				{Name: "c-workers-small", Types: both, IngressPorts: [][]int32{nil}, EgressRules: 1}}},
		{name: "no submitter rule when the RayJob label is there but no RayJob controls the cluster",
			mutate: func(rc *rayv1.RayCluster) {
				rc.Labels = map[string]string{constants.LabelJobSubmissionMode: string(rayv1.K8sJobMode)}
			},
			want: []policyShape{{Name: "c-head", Types: both, IngressPorts: [][]int32{nil}, EgressRules: 1},
				{Name: "c-workers-small", Types: both, IngressPorts: [][]int32{nil}, EgressRules: 1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := &rayv1.RayCluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"}, Spec: rayv1.RayClusterSpec{
				NetworkPolicy:    &rayv1.NetworkPolicyConfig{},
				WorkerGroupSpecs: []rayv1.WorkerGroupSpec{{GroupName: "small"}},
			}}
			if tc.mutate != nil {
				tc.mutate(rc)
			}
			var got []policyShape
			for _, p := range builder.NetworkPolicies(rc, tc.opts) {
				got = append(got, shapeOf(p))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("policies (-want +got):\n%s", diff)
			}
		})
	}
}

// A change of spec.networkPolicy alone restarts no pod: the recreate hash leaves it out.
func TestNetworkPolicyChangeKeepsTheRecreateHash(t *testing.T) {
	rc := &rayv1.RayCluster{Spec: rayv1.RayClusterSpec{WorkerGroupSpecs: []rayv1.WorkerGroupSpec{{GroupName: "small"}}}}
	before := builder.RecreateHash(rc)
	rc.Spec.NetworkPolicy = &rayv1.NetworkPolicyConfig{Mode: ptr.To(rayv1.NetworkPolicyDenyAllEgress)}
	if after := builder.RecreateHash(rc); after != before {
		t.Errorf("recreate hash %s became %s for a networkPolicy change", before, after)
	}
}
