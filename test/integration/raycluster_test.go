package integration

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	kruisev1beta1 "github.com/openkruise/kruise-api/apps/v1beta1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/names"
)

// A new RayCluster gets its head Service, a one-replica head Advanced StatefulSet and one CloneSet per
// group, all controlled by the RayCluster, and its spec is never written.
func TestCreateMakesKruiseWorkloads(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	rc := newCluster(ns, "raycluster").group("small", 2, 0, 5).group("big", 7, 1, 3).create(t)
	created := getCluster(g, rc)

	g.Eventually(func(g Gomega) {
		svc := &corev1.Service{}
		g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "raycluster-head-svc"}, svc)).To(Succeed())
		g.Expect(svc.Spec.ClusterIP).To(Equal(corev1.ClusterIPNone))
		sts := headSet(g, rc)
		g.Expect(*sts.Spec.Replicas).To(Equal(int32(1)))
		g.Expect(sts.Spec.ServiceName).To(Equal("raycluster-head-svc"))
		g.Expect(sts.Spec.UpdateStrategy.RollingUpdate.Paused).To(BeTrue(), "template changes must not restart the head")
		g.Expect(*cloneSet(g, rc, "small").Spec.Replicas).To(Equal(int32(2)))
		big := cloneSet(g, rc, "big")
		g.Expect(*big.Spec.Replicas).To(Equal(int32(3)), "replicas 7 is clamped to maxReplicas 3")
		g.Expect(big.Spec.UpdateStrategy.MaxUnavailable.String()).To(Equal("100%"))
		g.Expect(metav1.IsControlledBy(big, created)).To(BeTrue())
		g.Expect(metav1.IsControlledBy(sts, created)).To(BeTrue())
	}, timeout, interval).Should(Succeed())

	g.Eventually(func(g Gomega) {
		cur := getCluster(g, rc)
		g.Expect(cur.Status.DesiredWorkerReplicas).To(Equal(int32(5)))
		g.Expect(condition(cur, string(rayv1.HeadPodReady))).NotTo(BeNil())
		g.Expect(condition(cur, string(rayv1.HeadPodReady)).Reason).To(Equal(constants.ReasonHeadPodNotFound))
		g.Expect(cur.Status.Endpoints).To(HaveKeyWithValue("dashboard", "8265"))
	}, timeout, interval).Should(Succeed())
	final := getCluster(g, rc)
	g.Expect(final.Spec).To(Equal(created.Spec), "the operator must never write the RayCluster spec")
	g.Expect(final.Generation).To(Equal(created.Generation))
}

// Changing replicas, min and max moves the CloneSet's replicas; a new group gets a CloneSet and a removed
// group's CloneSet is deleted, leaving the other groups alone.
func TestScaleAndGroupLifecycle(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	rc := newCluster(ns, "scaling").group("a", 1, 0, 10).group("b", 1, 0, 10).create(t)
	g.Eventually(func(g Gomega) { cloneSet(g, rc, "b") }, timeout, interval).Should(Succeed())
	bUID := cloneSet(g, rc, "b").UID

	updateCluster(t, rc, func(c *rayv1.RayCluster) { c.Spec.WorkerGroupSpecs[0].Replicas = ptr.To[int32](4) })
	g.Eventually(func(g Gomega) { g.Expect(*cloneSet(g, rc, "a").Spec.Replicas).To(Equal(int32(4))) }, timeout, interval).Should(Succeed())

	updateCluster(t, rc, func(c *rayv1.RayCluster) { c.Spec.WorkerGroupSpecs[0].MaxReplicas = ptr.To[int32](2) })
	g.Eventually(func(g Gomega) { g.Expect(*cloneSet(g, rc, "a").Spec.Replicas).To(Equal(int32(2))) }, timeout, interval).Should(Succeed())

	updateCluster(t, rc, func(c *rayv1.RayCluster) {
		c.Spec.WorkerGroupSpecs = append(c.Spec.WorkerGroupSpecs[1:], c.Spec.WorkerGroupSpecs[0])
		c.Spec.WorkerGroupSpecs[0].GroupName = "c" // "b" renamed to "c": b goes, c comes
	})
	g.Eventually(func(g Gomega) {
		cloneSet(g, rc, "c")
		err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: names.WorkerCloneSet(rc.Name, "b")}, &kruisev1alpha1.CloneSet{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the removed group's CloneSet must be deleted, got %v", err)
		g.Expect(*cloneSet(g, rc, "a").Spec.Replicas).To(Equal(int32(2)))
	}, timeout, interval).Should(Succeed())
	g.Expect(cloneSet(g, rc, "c").UID).NotTo(Equal(bUID))
	g.Eventually(func(g Gomega) {
		g.Expect(events(g, rc, constants.EventDeletedWorkerCloneSet)).To(ContainElement(ContainSubstring("worker group b was removed")))
	}, timeout, interval).Should(Succeed())
}

// The autoscaler lowers replicas and names the pod in one patch: kray passes exactly that pod to the
// CloneSet in the same write, ignores names it cannot act on, and never lowers replicas past the names.
func TestWorkersToDeleteBecomePodsToDelete(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	rc := newCluster(ns, "scaledown").autoscaling().group("g", 3, 0, 10).group("other", 1, 0, 10).create(t)
	var cs, other *kruisev1alpha1.CloneSet
	g.Eventually(func(g Gomega) { cs, other = cloneSet(g, rc, "g"), cloneSet(g, rc, "other") }, timeout, interval).Should(Succeed())
	workerPod(t, rc, cs, "w-1")
	workerPod(t, rc, cs, "w-2")
	workerPod(t, rc, cs, "w-3")
	workerPod(t, rc, other, "o-1")

	// replicas 3 -> 1, but only one live pod of this group is named: replicas may drop by one only.
	updateCluster(t, rc, func(c *rayv1.RayCluster) {
		c.Spec.WorkerGroupSpecs[0].Replicas = ptr.To[int32](1)
		c.Spec.WorkerGroupSpecs[0].ScaleStrategy.WorkersToDelete = []string{"w-2", "o-1", "gone"}
	})
	g.Eventually(func(g Gomega) {
		cur := cloneSet(g, rc, "g")
		g.Expect(cur.Spec.ScaleStrategy.PodsToDelete).To(ConsistOf("w-2"))
		g.Expect(*cur.Spec.Replicas).To(Equal(int32(2)))
	}, timeout, interval).Should(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(*cloneSet(g, rc, "g").Spec.Replicas).To(Equal(int32(2)))
		g.Expect(cloneSet(g, rc, "other").Spec.ScaleStrategy.PodsToDelete).To(BeEmpty())
	}, "1s", interval).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(events(g, rc, constants.EventWorkersToDeleteIgnored)).To(ContainElement(ContainSubstring("o-1: the pod is not controlled by this group's CloneSet")))
	}, timeout, interval).Should(Succeed())
	g.Expect(getCluster(g, rc).Spec.WorkerGroupSpecs[0].ScaleStrategy.WorkersToDelete).To(ConsistOf("w-2", "o-1", "gone"), "the operator never clears the autoscaler's list")
}

// Suspending scales every workload to zero and reports Suspended once no pod is left; resuming restores them.
func TestSuspendAndResume(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	rc := newCluster(ns, "suspend").group("g", 2, 0, 5).create(t)
	g.Eventually(func(g Gomega) { g.Expect(*cloneSet(g, rc, "g").Spec.Replicas).To(Equal(int32(2))) }, timeout, interval).Should(Succeed())

	updateCluster(t, rc, func(c *rayv1.RayCluster) { c.Spec.Suspend = ptr.To(true) })
	g.Eventually(func(g Gomega) {
		g.Expect(*cloneSet(g, rc, "g").Spec.Replicas).To(BeZero())
		g.Expect(*headSet(g, rc).Spec.Replicas).To(BeZero())
		cur := getCluster(g, rc)
		g.Expect(cur.Status.State).To(Equal(rayv1.Suspended))
		g.Expect(condition(cur, string(rayv1.RayClusterSuspended)).Status).To(Equal(metav1.ConditionTrue))
		g.Expect(condition(cur, string(rayv1.RayClusterSuspending)).Status).To(Equal(metav1.ConditionFalse))
	}, timeout, interval).Should(Succeed())

	updateCluster(t, rc, func(c *rayv1.RayCluster) { c.Spec.Suspend = ptr.To(false) })
	g.Eventually(func(g Gomega) {
		g.Expect(*cloneSet(g, rc, "g").Spec.Replicas).To(Equal(int32(2)))
		g.Expect(*headSet(g, rc).Spec.Replicas).To(Equal(int32(1)))
		g.Expect(condition(getCluster(g, rc), string(rayv1.RayClusterSuspended)).Status).To(Equal(metav1.ConditionFalse))
	}, timeout, interval).Should(Succeed())
}

// A template change updates the workloads' templates but keeps their update strategies paused, so no
// running pod is restarted (KubeRay's default upgrade strategy).
func TestTemplateChangeDoesNotRestartPods(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	rc := newCluster(ns, "template").group("g", 1, 0, 5).create(t)
	g.Eventually(func(g Gomega) { cloneSet(g, rc, "g") }, timeout, interval).Should(Succeed())
	updateCluster(t, rc, func(c *rayv1.RayCluster) {
		c.Spec.WorkerGroupSpecs[0].Template.Spec.Containers[0].Image = "rayproject/ray:2.47.0"
		c.Spec.HeadGroupSpec.Template.Spec.Containers[0].Image = "rayproject/ray:2.47.0"
	})
	g.Eventually(func(g Gomega) {
		cs := cloneSet(g, rc, "g")
		g.Expect(cs.Spec.Template.Spec.Containers[0].Image).To(Equal("rayproject/ray:2.47.0"))
		g.Expect(cs.Spec.UpdateStrategy.Paused).To(BeTrue())
		sts := headSet(g, rc)
		g.Expect(sts.Spec.Template.Spec.Containers[0].Image).To(Equal("rayproject/ray:2.47.0"))
		g.Expect(sts.Spec.UpdateStrategy.RollingUpdate.Paused).To(BeTrue())
	}, timeout, interval).Should(Succeed())
}

// A write conflict on the CloneSet is retried from a fresh read, and the user's concurrent change to the
// CloneSet is not lost.
func TestCloneSetWriteConflictIsRetried(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	rc := newCluster(ns, "conflict").group("g", 1, 0, 5).create(t)
	g.Eventually(func(g Gomega) { cloneSet(g, rc, "g") }, timeout, interval).Should(Succeed())

	conflicts := 0
	interceptUpdate = func(obj client.Object) error {
		cs, ok := obj.(*kruisev1alpha1.CloneSet)
		if !ok || cs.Namespace != ns || conflicts > 0 {
			return nil
		}
		conflicts++
		// Someone else writes first: the reconciler's update must now conflict and be redone.
		cur := &kruisev1alpha1.CloneSet{}
		if err := k8s.Get(context.Background(), key(cs), cur); err != nil {
			return err
		}
		cur.Labels["example.com/touched"] = "yes"
		return k8s.Update(context.Background(), cur)
	}
	t.Cleanup(func() { interceptUpdate = nil })
	updateCluster(t, rc, func(c *rayv1.RayCluster) { c.Spec.WorkerGroupSpecs[0].Replicas = ptr.To[int32](3) })
	g.Eventually(func(g Gomega) {
		cs := cloneSet(g, rc, "g")
		g.Expect(*cs.Spec.Replicas).To(Equal(int32(3)))
		g.Expect(cs.Labels).To(HaveKeyWithValue("example.com/touched", "yes"))
	}, timeout, interval).Should(Succeed())
	g.Expect(conflicts).To(Equal(1))
}

// With autoscaling on, kray creates the autoscaler's ServiceAccount, a Role that reaches only this
// RayCluster, and the RoleBinding.
func TestAutoscalerRBAC(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	rc := newCluster(ns, "autoscaled").autoscaling().group("g", 0, 0, 5).create(t)
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: rc.Name}, &corev1.ServiceAccount{})).To(Succeed())
		role := &rbacv1.Role{}
		g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: rc.Name}, role)).To(Succeed())
		g.Expect(role.Rules).To(ContainElement(rbacv1.PolicyRule{APIGroups: []string{"ray.io"}, Resources: []string{"rayclusters"}, ResourceNames: []string{rc.Name}, Verbs: []string{"get", "patch"}}))
		rb := &rbacv1.RoleBinding{}
		g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: rc.Name}, rb)).To(Succeed())
		g.Expect(rb.Subjects).To(ConsistOf(rbacv1.Subject{Kind: "ServiceAccount", Name: rc.Name, Namespace: ns}))
		sts := headSet(g, rc)
		g.Expect(sts.Spec.Template.Spec.ServiceAccountName).To(Equal(rc.Name))
		g.Expect(sts.Spec.Template.Spec.Containers).To(HaveLen(2))
		g.Expect(sts.Spec.Template.Spec.Containers[1].Name).To(Equal("autoscaler"))
	}, timeout, interval).Should(Succeed())
}

// An exited worker pod that its CloneSet left behind is deleted by kray; healthy pods are left alone.
func TestDeadWorkerPodsAreDeleted(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	rc := newCluster(ns, "hygiene").group("g", 2, 0, 5).create(t)
	var cs *kruisev1alpha1.CloneSet
	g.Eventually(func(g Gomega) { cs = cloneSet(g, rc, "g") }, timeout, interval).Should(Succeed())
	healthy := workerPod(t, rc, cs, "healthy")
	dead := workerPod(t, rc, cs, "evicted")
	dead.Status.Phase = corev1.PodFailed
	dead.Status.Reason = "Evicted"
	g.Expect(k8s.Status().Update(context.Background(), dead)).To(Succeed())
	g.Eventually(func(g Gomega) {
		err := k8s.Get(context.Background(), key(dead), &corev1.Pod{})
		g.Expect(apierrors.IsNotFound(err) || podTerminating(g, dead)).To(BeTrue())
	}, timeout, interval).Should(Succeed())
	g.Consistently(func(g Gomega) { g.Expect(podTerminating(g, healthy)).To(BeFalse()) }, "1s", interval).Should(Succeed())
}

func podTerminating(g Gomega, p *corev1.Pod) bool {
	cur := &corev1.Pod{}
	g.Expect(k8s.Get(context.Background(), key(p), cur)).To(Succeed())
	return cur.DeletionTimestamp != nil
}

// A spec the CRD accepts but kray cannot run gets a False RayClusterSpecValid condition and a Warning
// event; nothing is created.
func TestInvalidSpecIsReportedNotRetried(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	b := newCluster(ns, "invalid").group("g", 1, 0, 5)
	b.rc.Spec.WorkerGroupSpecs[0].IdleTimeoutSeconds = ptr.To[int32](30)
	rc := b.create(t)
	g.Eventually(func(g Gomega) {
		cur := getCluster(g, rc)
		c := condition(cur, constants.ConditionSpecValid)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Message).To(ContainSubstring("idleTimeoutSeconds is set, but autoscaler v2 is not enabled"))
		g.Expect(events(g, rc, constants.EventInvalidSpec)).NotTo(BeEmpty())
	}, timeout, interval).Should(Succeed())
	g.Consistently(func(g Gomega) {
		list := &kruisev1alpha1.CloneSetList{}
		g.Expect(k8s.List(context.Background(), list, client.InNamespace(ns))).To(Succeed())
		g.Expect(list.Items).To(BeEmpty())
	}, "1s", interval).Should(Succeed())
}

// A RayCluster that names another controller in spec.managedBy is left alone entirely.
func TestManagedByAnotherControllerIsSkipped(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	b := newCluster(ns, "kueue").group("g", 1, 0, 5)
	b.rc.Spec.ManagedBy = ptr.To(rayv1.MultiKueueManagedBy)
	rc := b.create(t)
	g.Consistently(func(g Gomega) {
		g.Expect(getCluster(g, rc).Status.Conditions).To(BeEmpty())
		err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: names.HeadStatefulSet(rc.Name)}, &kruisev1beta1.StatefulSet{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "no head StatefulSet may be created, got %v", err)
	}, "2s", interval).Should(Succeed())
}
