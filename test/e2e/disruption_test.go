package e2e

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/internal/controller/raycluster"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/names"
)

// evictHead asks the API server to evict rc's head pod, as a node drain does.
func evictHead(g Gomega, rc *rayv1.RayCluster) error {
	head := headPod(g, rc)
	return clientset.CoreV1().Pods(rc.Namespace).EvictV1(context.Background(), &policyv1.Eviction{
		ObjectMeta: metav1.ObjectMeta{Name: head.Name, Namespace: head.Namespace},
	})
}

// kray.io/head-disruption-budget: "true" on a running cluster makes the API server refuse to evict its head
// (a node drain waits instead of ending the cluster's jobs); removing it lets the eviction through, and the
// head is replaced. Turning the budget on and off restarts no pod.
func TestHeadDisruptionBudget(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ns := namespace(t)
	rc := create(t, loadSample(t, "ray-cluster.sample.yaml", ns))
	waitReady(t, rc, 2)
	before := uids(append(workerPods(g, rc, "workergroup"), *headPod(g, rc)))

	update(t, rc, func(c *rayv1.RayCluster) {
		if c.Annotations == nil {
			c.Annotations = map[string]string{}
		}
		c.Annotations[constants.AnnotationHeadDisruptionBudget] = "true"
	})
	key := client.ObjectKey{Namespace: ns, Name: names.HeadDisruptionBudget(rc.Name)}
	g.Eventually(func(g Gomega) {
		pdb := &policyv1.PodDisruptionBudget{}
		g.Expect(k8s.Get(context.Background(), key, pdb)).To(Succeed())
		g.Expect(pdb.Status.ObservedGeneration).To(Equal(pdb.Generation), "the disruption controller has seen the budget")
		g.Expect(pdb.Status.CurrentHealthy).To(Equal(int32(1)), "it selects the one ready head")
		g.Expect(pdb.Status.DisruptionsAllowed).To(BeZero())
	}, readyTimeout, poll).Should(Succeed())
	err := evictHead(g, rc)
	g.Expect(apierrors.IsTooManyRequests(err)).To(BeTrue(), "the eviction of a protected head is refused: %v", err)
	g.Consistently(func(g Gomega) {
		g.Expect(headPod(g, rc).DeletionTimestamp).To(BeNil())
	}, "2s", poll).Should(Succeed())

	update(t, rc, func(c *rayv1.RayCluster) { delete(c.Annotations, constants.AnnotationHeadDisruptionBudget) })
	g.Eventually(func(g Gomega) {
		err := k8s.Get(context.Background(), key, &policyv1.PodDisruptionBudget{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the budget goes with the annotation: %v", err)
	}, readyTimeout, poll).Should(Succeed())
	g.Expect(uids(append(workerPods(g, rc, "workergroup"), *headPod(g, rc)))).To(Equal(before), "no pod restarted by turning the budget on and off")

	g.Eventually(func() error { return evictHead(g, rc) }, readyTimeout, poll).Should(Succeed(), "the eviction goes through once the budget is gone")
	g.Eventually(func(g Gomega) {
		g.Expect(headPod(g, rc).UID).NotTo(Equal(before[names.HeadPod(rc.Name)]), "the evicted head is replaced")
	}, readyTimeout, poll).Should(Succeed())
	g.Expect(eventMessages(g, rc, raycluster.EventCreatedPDB)).To(HaveLen(1))
	g.Expect(eventMessages(g, rc, raycluster.EventDeletedPDB)).To(HaveLen(1))
}
