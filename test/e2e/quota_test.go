package e2e

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/internal/controller/raycluster"
	"github.com/kray-project/kray/pkg/constants"
)

// Pod creations refused by a ResourceQuota are seen only by the workloads; kray surfaces them as
// ReplicaFailure (KubeRay's reasons) with the API error, and removes the condition once pods fit again.
func TestResourceQuotaRefusalIsReported(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ns := namespace(t)
	quota := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "tight", Namespace: ns},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourceRequestsCPU: resource.MustParse("1500m")}},
	}
	createQuota(t, quota)
	// The head (1 CPU) fits the quota and a worker (2 CPUs) never does, whichever pod Kruise creates first.
	sample := loadSample(t, "ray-cluster.sample.yaml", ns)
	two := resource.MustParse("2")
	worker := &sample.Spec.WorkerGroupSpecs[0].Template.Spec.Containers[0].Resources
	worker.Requests[corev1.ResourceCPU], worker.Limits[corev1.ResourceCPU] = two, two
	rc := create(t, sample)
	g.Eventually(func(g Gomega) {
		c := condition(get(g, rc), string(rayv1.RayClusterReplicaFailure))
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Reason).To(Equal(constants.ReasonFailedCreateWorkerPod))
		g.Expect(c.Message).To(ContainSubstring("exceeded quota"))
		g.Expect(eventMessages(g, rc, raycluster.EventFailedCreateWorkerPod)).To(ContainElement(ContainSubstring("exceeded quota")))
	}, readyTimeout, poll).Should(Succeed())
	g.Expect(get(g, rc).Status.State).NotTo(Equal(rayv1.Ready))

	g.Expect(k8s.Delete(context.Background(), quota)).To(Succeed())
	waitReady(t, rc, 2)
	g.Eventually(func(g Gomega) {
		g.Expect(condition(get(g, rc), string(rayv1.RayClusterReplicaFailure))).To(BeNil())
	}, readyTimeout, poll).Should(Succeed())
}

// A quota that leaves no room for the head is reported as FailedCreateHeadPod.
func TestResourceQuotaBlocksHead(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ns := namespace(t)
	quota := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "none", Namespace: ns},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourceRequestsCPU: resource.MustParse("100m")}},
	}
	createQuota(t, quota)
	sample := loadSample(t, "ray-cluster.sample.yaml", ns)
	sample.Spec.WorkerGroupSpecs[0].Replicas = ptr.To[int32](0)
	sample.Spec.WorkerGroupSpecs[0].MinReplicas = ptr.To[int32](0)
	rc := create(t, sample)
	g.Eventually(func(g Gomega) {
		c := condition(get(g, rc), string(rayv1.RayClusterReplicaFailure))
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(constants.ReasonFailedCreateHeadPod))
		g.Expect(c.Message).To(ContainSubstring("exceeded quota"))
		g.Expect(condition(get(g, rc), string(rayv1.HeadPodReady)).Reason).To(Equal(constants.ReasonHeadPodNotFound))
	}, readyTimeout, poll).Should(Succeed())
}

// createQuota creates quota and waits until kube-controller-manager has computed its status: the API server
// enforces a quota only from then on (on a just-started cluster that takes a moment, and a pod created
// before it is admitted).
func createQuota(t *testing.T, quota *corev1.ResourceQuota) {
	t.Helper()
	g := NewWithT(t)
	g.Expect(k8s.Create(context.Background(), quota)).To(Succeed())
	g.Eventually(func(g Gomega) {
		cur := &corev1.ResourceQuota{}
		g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(quota), cur)).To(Succeed())
		g.Expect(cur.Status.Hard).NotTo(BeEmpty())
	}, readyTimeout, poll).Should(Succeed())
}
