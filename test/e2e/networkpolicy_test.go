package e2e

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/internal/controller/raycluster"
	"github.com/kray-project/kray/pkg/constants"
)

// networkPolicies are the NetworkPolicies of rc's namespace labelled with its name, by name.
func networkPolicies(g Gomega, rc *rayv1.RayCluster) map[string]networkingv1.NetworkPolicy {
	list := &networkingv1.NetworkPolicyList{}
	g.Expect(k8s.List(context.Background(), list, client.InNamespace(rc.Namespace), client.MatchingLabels{constants.LabelCluster: rc.Name})).To(Succeed())
	out := map[string]networkingv1.NetworkPolicy{}
	for _, p := range list.Items {
		out[p.Name] = p
	}
	return out
}

// selected are the names of the pods of ns that sel selects, as the API server selects them.
func selected(g Gomega, ns string, sel metav1.LabelSelector) []string {
	s, err := metav1.LabelSelectorAsSelector(&sel)
	g.Expect(err).NotTo(HaveOccurred())
	pods := &corev1.PodList{}
	g.Expect(k8s.List(context.Background(), pods, client.InNamespace(ns), client.MatchingLabelsSelector{Selector: s})).To(Succeed())
	return podNames(pods.Items)
}

// KubeRay v1.7's deny-all sample with a second worker group: a policy for the head and one per group, each
// selecting exactly its pods, owned by the cluster; the cluster becomes ready; a removed group's policy goes,
// and every policy goes once spec.networkPolicy does, without a pod created or deleted.
func TestNetworkPoliciesOfAClusterSelectItsPods(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ns := namespace(t)
	rc := kubeRaySample(t, "ray-cluster.network-policy-deny-all.yaml", ns, &rayv1.RayCluster{})
	second := rc.Spec.WorkerGroupSpecs[0].DeepCopy()
	second.GroupName = "second"
	rc.Spec.WorkerGroupSpecs = append(rc.Spec.WorkerGroupSpecs, *second)
	rc = create(t, rc)
	waitReady(t, rc, 2)

	policies := networkPolicies(g, rc)
	g.Expect(policies).To(HaveLen(3))
	head, workers, seconds := policies[rc.Name+"-head"], policies[rc.Name+"-workers-workergroup"], policies[rc.Name+"-workers-second"]
	g.Expect(selected(g, ns, head.Spec.PodSelector)).To(ConsistOf(headPod(g, rc).Name))
	g.Expect(selected(g, ns, workers.Spec.PodSelector)).To(ConsistOf(podNames(workerPods(g, rc, "workergroup"))))
	g.Expect(selected(g, ns, seconds.Spec.PodSelector)).To(ConsistOf(podNames(workerPods(g, rc, "second"))))
	every := podNames(clusterPods(g, rc))
	for _, p := range []networkingv1.NetworkPolicy{head, workers, seconds} {
		g.Expect(metav1.IsControlledBy(&p, get(g, rc))).To(BeTrue(), "%s is controlled by the cluster", p.Name)
		g.Expect(p.Spec.PolicyTypes).To(ConsistOf(networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress))
		g.Expect(selected(g, ns, *p.Spec.Ingress[0].From[0].PodSelector)).To(ConsistOf(every), "%s lets the cluster's pods in", p.Name)
		g.Expect(selected(g, ns, *p.Spec.Egress[0].To[0].PodSelector)).To(ConsistOf(every), "%s lets the cluster's pods out", p.Name)
		g.Expect(p.Spec.Egress[1].Ports).To(HaveLen(2), "%s keeps the sample's DNS rule", p.Name)
	}
	g.Expect(eventMessages(g, rc, raycluster.EventCreatedNetworkPolicy)).To(HaveLen(3))

	update(t, rc, func(c *rayv1.RayCluster) { c.Spec.WorkerGroupSpecs = c.Spec.WorkerGroupSpecs[:1] })
	g.Eventually(func(g Gomega) {
		g.Expect(networkPolicies(g, rc)).To(HaveLen(2))
	}, readyTimeout, poll).Should(Succeed())
	before, _ := ledger.counts(t, rc)
	update(t, rc, func(c *rayv1.RayCluster) { c.Spec.NetworkPolicy = nil })
	g.Eventually(func(g Gomega) {
		g.Expect(networkPolicies(g, rc)).To(BeEmpty())
	}, readyTimeout, poll).Should(Succeed())
	waitReady(t, rc, 1)
	after, _ := ledger.counts(t, rc)
	g.Expect(after).To(Equal(before), "removing the policies created no pod")
}

// A K8sJobMode RayJob's cluster: the head's policy lets the RayJob's submitter pod in on the dashboard port,
// and that rule selects exactly the submitter's pod.
func TestNetworkPolicyLetsTheRayJobSubmitterIn(t *testing.T) {
	t.Parallel()
	needFakeDashboard(t)
	g := NewWithT(t)
	ns := namespace(t)
	job := createJob(t, rayJob(t, ns, "isolated", rayv1.K8sJobMode, func(j *rayv1.RayJob) {
		j.Spec.RayClusterSpec.NetworkPolicy = &rayv1.NetworkPolicyConfig{Mode: ptr.To(rayv1.NetworkPolicyDenyAllIngress)}
	}))
	var rc *rayv1.RayCluster
	g.Eventually(func(g Gomega) {
		cur := getJob(g, job)
		g.Expect(cur.Status.RayClusterName).NotTo(BeEmpty())
		rc = &rayv1.RayCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cur.Status.RayClusterName}}
		submitter := &batchv1.Job{}
		g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(job), submitter)).To(Succeed())
		g.Expect(selected(g, ns, metav1.LabelSelector{MatchLabels: map[string]string{"job-name": submitter.Name}})).NotTo(BeEmpty())
	}, jobTimeout, poll).Should(Succeed())
	g.Expect(get(g, rc).Labels).To(HaveKeyWithValue(constants.LabelJobSubmissionMode, string(rayv1.K8sJobMode)))
	var head networkingv1.NetworkPolicy
	g.Eventually(func(g Gomega) {
		head = networkPolicies(g, rc)[rc.Name+"-head"]
		g.Expect(head.Spec.Ingress).To(HaveLen(2))
	}, readyTimeout, poll).Should(Succeed())
	g.Expect(head.Spec.PolicyTypes).To(ConsistOf(networkingv1.PolicyTypeIngress))
	submitters := selected(g, ns, metav1.LabelSelector{MatchLabels: map[string]string{"job-name": job.Name}})
	g.Expect(selected(g, ns, *head.Spec.Ingress[1].From[0].PodSelector)).To(ConsistOf(submitters))
	g.Expect(head.Spec.Ingress[1].Ports).To(HaveLen(1))
	g.Expect(head.Spec.Ingress[1].Ports[0].Port.IntVal).To(BeEquivalentTo(constants.DefaultDashboardPort))
}

// A rule the API server refuses (a CIDR that is none) is reported with the field it names, in the
// WorkloadsSynced condition and a FailedToCreateNetworkPolicy event; the cluster's other policies and its
// pods are made all the same.
func TestNetworkPolicyRefusedByTheAPIServerIsReported(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ns := namespace(t)
	rc := loadSample(t, "ray-cluster.sample.yaml", ns)
	rc.Spec.NetworkPolicy = &rayv1.NetworkPolicyConfig{Head: &rayv1.NetworkPolicyRules{
		IngressRules: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.300/8"}}}}},
	}}
	rc = create(t, rc)
	g.Eventually(func(g Gomega) {
		c := condition(get(g, rc), constants.ConditionWorkloadsSynced)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Message).To(ContainSubstring("spec.ingress[1].from[0].ipBlock.cidr"))
		g.Expect(eventMessages(g, rc, raycluster.EventFailedToCreateNetworkPolicy)).To(ContainElement(ContainSubstring("ipBlock.cidr")))
		g.Expect(networkPolicies(g, rc)).To(HaveKey(rc.Name + "-workers-" + rc.Spec.WorkerGroupSpecs[0].GroupName))
		g.Expect(clusterPods(g, rc)).NotTo(BeEmpty())
	}, readyTimeout, poll).Should(Succeed())
}
