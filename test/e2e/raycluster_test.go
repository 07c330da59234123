package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	kruisev1beta1 "github.com/openkruise/kruise-api/apps/v1beta1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/builder"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/names"
)

// The sample RayCluster becomes ready on Kruise workloads: a head Service, a one-replica Advanced
// StatefulSet whose pod is <cluster>-head-0, a CloneSet per group, and exactly one pod created per pod desired.
func TestSampleBecomesReady(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ns := namespace(t)
	rc := create(t, loadSample(t, "ray-cluster.sample.yaml", ns))
	waitReady(t, rc, 2)

	svc := &corev1.Service{}
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: names.HeadService(rc.Name)}, svc)).To(Succeed())
	cs := &kruisev1alpha1.CloneSet{}
	// The workloads' own status follows the pods a moment after kray's does.
	g.Eventually(func(g Gomega) {
		sts := &kruisev1beta1.StatefulSet{}
		g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: names.HeadStatefulSet(rc.Name)}, sts)).To(Succeed())
		g.Expect(sts.Status.ReadyReplicas).To(Equal(int32(1)))
		g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: names.WorkerCloneSet(rc.Name, "workergroup")}, cs)).To(Succeed())
		g.Expect(cs.Status.ReadyReplicas).To(Equal(int32(2)))
	}, readyTimeout, poll).Should(Succeed())

	head := headPod(g, rc)
	g.Expect(metav1.GetControllerOf(head).Kind).To(Equal("StatefulSet"))
	for _, p := range workerPods(g, rc, "workergroup") {
		g.Expect(metav1.GetControllerOf(&p).UID).To(Equal(cs.UID))
		g.Expect(p.Labels).To(HaveKeyWithValue(constants.LabelCluster, rc.Name))
	}
	cur := get(g, rc)
	g.Expect(condition(cur, string(rayv1.HeadPodReady)).Status).To(Equal(metav1.ConditionTrue))
	g.Expect(condition(cur, string(rayv1.RayClusterProvisioned)).Status).To(Equal(metav1.ConditionTrue))
	g.Expect(cur.Status.Head.PodName).To(Equal(head.Name))
	g.Expect(cur.Status.Head.PodIP).NotTo(BeEmpty())
	created, deleted := ledger.counts(t, rc)
	g.Expect(created).To(Equal(3), "pods created per pod desired must be exactly 1")
	g.Expect(deleted).To(BeZero())
}

// Scaling a group up and down moves its pods through the CloneSet; no pod is created twice.
func TestScaleGroupUpAndDown(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ns := namespace(t)
	rc := create(t, loadSample(t, "ray-cluster.sample.yaml", ns))
	waitReady(t, rc, 2)
	update(t, rc, func(c *rayv1.RayCluster) { c.Spec.WorkerGroupSpecs[0].Replicas = ptr.To[int32](5) })
	waitReady(t, rc, 5)
	update(t, rc, func(c *rayv1.RayCluster) { c.Spec.WorkerGroupSpecs[0].Replicas = ptr.To[int32](1) })
	g.Eventually(func(g Gomega) {
		g.Expect(workerPods(g, rc, "workergroup")).To(HaveLen(1))
		g.Expect(get(g, rc).Status.ReadyWorkerReplicas).To(Equal(int32(1)))
	}, readyTimeout, poll).Should(Succeed())
	created, deleted := ledger.counts(t, rc)
	g.Expect(created).To(Equal(1+5), "one head and five workers, each created once")
	g.Expect(deleted).To(Equal(4))
}

// With autoscaling on, the autoscaler's "replicas-2 and these two names" removes exactly those pods:
// no other pod is deleted and nothing is replaced.
func TestAutoscalerScaleDownRemovesExactlyNamedPods(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ns := namespace(t)
	sample := loadSample(t, "ray-cluster.autoscaler.yaml", ns)
	sample.Spec.WorkerGroupSpecs[0].Replicas = ptr.To[int32](4)
	rc := create(t, sample)
	waitReady(t, rc, 4)
	before := workerPods(g, rc, "small-group")
	victims := []string{before[0].Name, before[2].Name}
	update(t, rc, func(c *rayv1.RayCluster) {
		c.Spec.WorkerGroupSpecs[0].Replicas = ptr.To[int32](2)
		c.Spec.WorkerGroupSpecs[0].ScaleStrategy.WorkersToDelete = victims
	})
	g.Eventually(func(g Gomega) {
		g.Expect(podNames(workerPods(g, rc, "small-group"))).To(ConsistOf(before[1].Name, before[3].Name))
	}, readyTimeout, poll).Should(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(uids(workerPods(g, rc, "small-group"))).To(Equal(map[string]types.UID{before[1].Name: before[1].UID, before[3].Name: before[3].UID}))
	}, 2*time.Second, poll).Should(Succeed())
	g.Expect(ledger.deletedNames(t, rc)).To(ConsistOf(victims))
	created, _ := ledger.counts(t, rc)
	g.Expect(created).To(Equal(1 + 4))
}

// The autoscaler's ServiceAccount, Role and RoleBinding exist, and the head pod runs as that account.
func TestAutoscalerRBACExists(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ns := namespace(t)
	rc := create(t, loadSample(t, "ray-cluster.autoscaler.yaml", ns))
	waitReady(t, rc, 1)
	key := client.ObjectKey{Namespace: ns, Name: rc.Name}
	g.Expect(k8s.Get(context.Background(), key, &corev1.ServiceAccount{})).To(Succeed())
	g.Expect(k8s.Get(context.Background(), key, &rbacv1.Role{})).To(Succeed())
	g.Expect(k8s.Get(context.Background(), key, &rbacv1.RoleBinding{})).To(Succeed())
	head := headPod(g, rc)
	g.Expect(head.Spec.ServiceAccountName).To(Equal(rc.Name))
	g.Expect(head.Spec.Containers).To(HaveLen(2))
	g.Expect(head.Spec.Containers[1].Name).To(Equal(builder.AutoscalerContainerName))
}

// Deleting the RayCluster removes everything it owns through the garbage collector.
func TestDeleteRemovesEverything(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ns := namespace(t)
	rc := create(t, loadSample(t, "ray-cluster.sample.yaml", ns))
	waitReady(t, rc, 2)
	g.Expect(k8s.Delete(context.Background(), rc)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(clusterPods(g, rc)).To(BeEmpty())
		for _, obj := range []client.Object{&kruisev1beta1.StatefulSet{}, &corev1.Service{}} {
			name := names.HeadStatefulSet(rc.Name)
			if _, ok := obj.(*corev1.Service); ok {
				name = names.HeadService(rc.Name)
			}
			err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, obj)
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%T %s still exists", obj, name)
		}
		sets := &kruisev1alpha1.CloneSetList{}
		g.Expect(k8s.List(context.Background(), sets, client.InNamespace(ns))).To(Succeed())
		g.Expect(sets.Items).To(BeEmpty())
	}, readyTimeout, poll).Should(Succeed())
}

// Suspend deletes every pod through the workloads and reports Suspended; resume brings the cluster back.
func TestSuspendAndResume(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ns := namespace(t)
	rc := create(t, loadSample(t, "ray-cluster.sample.yaml", ns))
	waitReady(t, rc, 2)
	update(t, rc, func(c *rayv1.RayCluster) { c.Spec.Suspend = ptr.To(true) })
	g.Eventually(func(g Gomega) {
		g.Expect(clusterPods(g, rc)).To(BeEmpty())
		cur := get(g, rc)
		g.Expect(cur.Status.State).To(Equal(rayv1.Suspended))
		g.Expect(condition(cur, string(rayv1.RayClusterSuspended)).Status).To(Equal(metav1.ConditionTrue))
		g.Expect(condition(cur, string(rayv1.HeadPodReady)).Reason).To(Equal(constants.ReasonHeadPodNotFound))
		g.Expect(condition(cur, string(rayv1.RayClusterProvisioned)).Status).To(Equal(metav1.ConditionFalse))
	}, readyTimeout, poll).Should(Succeed())
	update(t, rc, func(c *rayv1.RayCluster) { c.Spec.Suspend = ptr.To(false) })
	waitReady(t, rc, 2)
	g.Eventually(func(g Gomega) {
		cur := get(g, rc)
		g.Expect(condition(cur, string(rayv1.RayClusterSuspended)).Status).To(Equal(metav1.ConditionFalse))
		g.Expect(condition(cur, string(rayv1.RayClusterProvisioned)).Status).To(Equal(metav1.ConditionTrue))
	}, readyTimeout, poll).Should(Succeed())
}

// upgradeStrategy Recreate: a template change recreates every pod once from the new spec (KubeRay's
// semantics, carried out by the workloads' ReCreate update strategy); the default None restarts nothing.
func TestUpgradeStrategyRecreate(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ns := namespace(t)
	sample := sampleWithStrategy(t, ns, rayv1.RayClusterRecreate)
	rc := create(t, sample)
	waitReady(t, rc, 2)
	before := uids(clusterPods(g, rc))
	update(t, rc, func(c *rayv1.RayCluster) {
		c.Spec.HeadGroupSpec.Template.Spec.Containers[0].Image = "rayproject/ray:2.47.0"
		c.Spec.WorkerGroupSpecs[0].Template.Spec.Containers[0].Image = "rayproject/ray:2.47.0"
	})
	g.Eventually(func(g Gomega) {
		pods := clusterPods(g, rc)
		g.Expect(pods).To(HaveLen(3))
		for _, p := range pods {
			g.Expect(before).NotTo(ContainElement(p.UID), "pod %s was not recreated", p.Name)
			g.Expect(p.Spec.Containers[0].Image).To(Equal("rayproject/ray:2.47.0"))
		}
	}, readyTimeout, poll).Should(Succeed())
	waitReady(t, rc, 2)
	// Every pod is recreated exactly once: 3 created at first, 3 deleted, 3 created from the new spec.
	created, deleted := ledger.counts(t, rc)
	names := fmt.Sprintf("created %v, deleted %v", ledger.createdNames(t, rc), ledger.deletedNames(t, rc))
	g.Expect(created).To(Equal(6), names)
	g.Expect(deleted).To(Equal(3), names)
}

// The default upgrade strategy (None): a template change restarts no running pod.
func TestUpgradeStrategyNoneRestartsNothing(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ns := namespace(t)
	rc := create(t, loadSample(t, "ray-cluster.sample.yaml", ns))
	waitReady(t, rc, 2)
	before := uids(clusterPods(g, rc))
	update(t, rc, func(c *rayv1.RayCluster) {
		c.Spec.WorkerGroupSpecs[0].Template.Spec.Containers[0].Image = "rayproject/ray:2.47.0"
	})
	g.Eventually(func(g Gomega) { g.Expect(workerTemplateImage(g, rc)).To(Equal("rayproject/ray:2.47.0")) }, readyTimeout, poll).Should(Succeed())
	g.Consistently(func(g Gomega) { g.Expect(uids(clusterPods(g, rc))).To(Equal(before)) }, 3*time.Second, poll).Should(Succeed())
}
