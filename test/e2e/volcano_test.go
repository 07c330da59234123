package e2e

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rayv1 "github.com/kray-project/kray/api/v1"
	volcanov1beta1 "github.com/kray-project/kray/api/volcano/v1beta1"
	"github.com/kray-project/kray/internal/kuberayref"
	"github.com/kray-project/kray/pkg/batchscheduler"
)

func volcanoPodGroup(g Gomega, ns, name string) *volcanov1beta1.PodGroup {
	pg := &volcanov1beta1.PodGroup{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, pg); err != nil {
		return nil
	}
	return pg
}

// Under --batch-scheduler=volcano, on Volcano's real CRDs (no Volcano scheduler runs here): KubeRay's queue
// sample gets the PodGroup KubeRay makes (ray-<name>-pg, 3 pods, 3 CPUs and 4Gi, its queue), with the
// priority and network topology of the cluster's labels; its pods name the group and their task and wait for
// Volcano, unbound. A scale-up resizes the PodGroup; a suspended cluster releases it.
func TestVolcanoPodGroupOnItsRealCRDs(t *testing.T) {
	needStarted(t, "KRAY_E2E_VOLCANO", "Volcano's CRDs")
	g := NewWithT(t)
	ns := namespace(t)
	batchOperator(t, batchscheduler.Volcano, "volcano")

	queue := &unstructured.Unstructured{}
	g.Expect(kuberayref.Sample("ray-cluster.volcano-scheduler-queue.yaml", "Queue", &queue.Object)).To(Succeed())
	queue.SetName(ns) // cluster-scoped: one per test namespace
	g.Expect(k8s.Create(context.Background(), queue)).To(Succeed())
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), queue) })

	rc := &rayv1.RayCluster{}
	g.Expect(kuberayref.Sample("ray-cluster.volcano-scheduler-queue.yaml", "RayCluster", rc)).To(Succeed())
	rc.Namespace = ns
	rc.Labels[batchscheduler.LabelVolcanoQueue] = ns
	rc.Labels[batchscheduler.LabelPriorityClassName] = "system-cluster-critical"
	rc.Labels[batchscheduler.LabelNetworkTopologyMode] = "hard"
	rc.Labels[batchscheduler.LabelNetworkTopologyHighestTier] = "2"
	create(t, rc)
	name := "ray-" + rc.Name + "-pg"
	g.Eventually(func(g Gomega) {
		pg := volcanoPodGroup(g, ns, name)
		g.Expect(pg).NotTo(BeNil())
		g.Expect(pg.Spec.MinMember).To(Equal(int32(3)))
		g.Expect(pg.Spec.MinResources).To(HaveKeyWithValue(corev1.ResourceCPU, resource.MustParse("3")))
		g.Expect(pg.Spec.MinResources).To(HaveKeyWithValue(corev1.ResourceMemory, resource.MustParse("4Gi")))
		g.Expect(pg.Spec.Queue).To(Equal(ns))
		g.Expect(pg.Spec.PriorityClassName).To(Equal("system-cluster-critical"))
		g.Expect(pg.Spec.NetworkTopology).To(Equal(&volcanov1beta1.NetworkTopologySpec{Mode: "hard", HighestTierAllowed: ptr.To(2)}))
		g.Expect(clusterPods(g, rc)).To(HaveLen(3))
	}, readyTimeout, poll).Should(Succeed())
	for _, p := range clusterPods(g, rc) {
		g.Expect(p.Spec.SchedulerName).To(Equal(batchscheduler.VolcanoName))
		g.Expect(p.Labels).To(HaveKeyWithValue(batchscheduler.LabelVolcanoQueue, ns))
		g.Expect(p.Labels).To(HaveKeyWithValue(batchscheduler.LabelPriorityClassName, "system-cluster-critical"))
		g.Expect(p.Annotations).To(HaveKeyWithValue(batchscheduler.AnnotationVolcanoGroupName, name))
		g.Expect(p.Annotations).To(HaveKeyWithValue(batchscheduler.AnnotationVolcanoTaskSpec, p.Labels["ray.io/group"]))
	}
	g.Consistently(func(g Gomega) { g.Expect(bound(g, rc)).To(BeZero()) }, 3*time.Second, 500*time.Millisecond).Should(Succeed(),
		"no scheduler named volcano runs here")
	g.Eventually(func(g Gomega) {
		c := podsScheduled(g, rc)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Message).To(Equal("3 of 3 pods wait for volcano; volcano has not reported on them yet"))
	}, readyTimeout, poll).Should(Succeed(), "the wait is reported")

	update(t, rc, func(c *rayv1.RayCluster) {
		c.Spec.WorkerGroupSpecs[0].Replicas, c.Spec.WorkerGroupSpecs[0].MaxReplicas = ptr.To[int32](3), ptr.To[int32](3)
	})
	g.Eventually(func(g Gomega) { g.Expect(volcanoPodGroup(g, ns, name).Spec.MinMember).To(Equal(int32(4))) }, readyTimeout, poll).Should(Succeed())
	update(t, rc, func(c *rayv1.RayCluster) { c.Spec.Suspend = ptr.To(true) })
	g.Eventually(func(g Gomega) { g.Expect(volcanoPodGroup(g, ns, name)).To(BeNil()) }, readyTimeout, poll).Should(Succeed())
}
