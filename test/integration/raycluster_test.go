package integration

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	kruisev1beta1 "github.com/openkruise/kruise-api/apps/v1beta1"
	corev1 "k8s.io/api/core/v1"
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

// A RayCluster that names another controller in spec.managedBy is left alone entirely, while one created
// after it in the same namespace (the positive control) is reconciled.
func TestManagedByAnotherControllerIsSkipped(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	b := newCluster(ns, "kueue").group("g", 1, 0, 5)
	b.rc.Spec.ManagedBy = ptr.To(rayv1.MultiKueueManagedBy)
	rc := b.create(t)
	control := newCluster(ns, "control").group("g", 1, 0, 5).create(t)
	g.Eventually(func(g Gomega) {
		headSet(g, control)
		g.Expect(getCluster(g, control).Status.Conditions).NotTo(BeEmpty())
	}, timeout, interval).Should(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(getCluster(g, rc).Status.Conditions).To(BeEmpty())
		err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: names.HeadStatefulSet(rc.Name)}, &kruisev1beta1.StatefulSet{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "no head StatefulSet may be created, got %v", err)
	}, "2s", interval).Should(Succeed())
}
