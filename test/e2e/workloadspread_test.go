package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	rayv1 "github.com/kray-project/kray/api/v1"
)

// capacityLabel is the node label the WorkloadSpread sample spreads workers by.
const capacityLabel = "karpenter.sh/capacity-type"

// labelNodes sets capacityLabel on the kwok nodes, the first half on-demand and the others spot (so that
// the scheduler alone would put about half the workers on on-demand), and removes it when the test ends.
func labelNodes(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	var nodes corev1.NodeList
	if err := k8s.List(ctx, &nodes, client.MatchingLabels{"kray.local/kwok-node": "true"}); err != nil || len(nodes.Items) < 2 {
		t.Fatalf("kwok nodes: %d, %v", len(nodes.Items), err)
	}
	set := func(name, value string) {
		patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%s}}}`, capacityLabel, value)
		if err := k8s.Patch(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
			t.Fatal(err)
		}
	}
	for i, n := range nodes.Items {
		capacity := `"spot"`
		if i < len(nodes.Items)/2 {
			capacity = `"on-demand"`
		}
		set(n.Name, capacity)
		t.Cleanup(func() { set(n.Name, "null") })
	}
}

// matchedSubset is the pod annotation in which Kruise's webhook records the WorkloadSpread subset it placed
// the pod in.
const matchedSubset = "apps.kruise.io/matched-workloadspread"

// capacityOf is the capacity type of the node each of pods runs on; every pod must have been placed by the
// WorkloadSpread, in the subset of that capacity type.
func capacityOf(g Gomega, pods []corev1.Pod) map[string]string {
	out := map[string]string{}
	for _, p := range pods {
		g.Expect(p.Spec.NodeName).NotTo(BeEmpty(), "pod %s is not scheduled", p.Name)
		g.Expect(p.Annotations).To(HaveKey(matchedSubset), "pod %s was not placed by the WorkloadSpread", p.Name)
		n := &corev1.Node{}
		g.Expect(k8s.Get(context.Background(), client.ObjectKey{Name: p.Spec.NodeName}, n)).To(Succeed())
		out[p.Name] = n.Labels[capacityLabel]
		g.Expect(p.Annotations[matchedSubset]).To(ContainSubstring(`"subset":"`+out[p.Name]+`"`), "pod %s", p.Name)
	}
	return out
}

// count is how many values of m equal v.
func count(m map[string]string, v string) int {
	n := 0
	for _, x := range m {
		if x == v {
			n++
		}
	}
	return n
}

// Kruise's WorkloadSpread, applied as in config/samples/kruise, spreads a kray worker group over spot and
// on-demand nodes, and kray's scaling, its drain hook and its rolling upgrades do not fight it: at most one
// worker on on-demand, the others on spot; a scale-down that names no pod drains and removes a spot worker; a
// named removal (the autoscaler's) drains and removes exactly the named pod and nothing else; a scale-up
// refills the on-demand subset first; an in-place image upgrade keeps every worker on its node.
func TestWorkloadSpreadOverSpotAndOnDemand(t *testing.T) {
	if os.Getenv("KRAY_KRUISE_POD_WEBHOOK") == "false" {
		t.Skip("WorkloadSpread needs Kruise's PodWebhook gate")
	}
	needFakeGCS(t)
	g := NewWithT(t)
	ns := namespace(t)
	gcs.setDrainTime(ns, 500*time.Millisecond)
	labelNodes(t)
	data, err := os.ReadFile(filepath.Join(repoRoot, "config", "samples", "kruise", "workloadspread.spot-on-demand.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	ws := &kruisev1alpha1.WorkloadSpread{}
	g.Expect(yaml.UnmarshalStrict(data, ws)).To(Succeed())
	ws.Namespace = ns
	g.Expect(k8s.Create(context.Background(), ws)).To(Succeed())

	sample := loadSample(t, "ray-cluster.sample.yaml", ns)
	g.Expect(sample.Name + "-" + sample.Spec.WorkerGroupSpecs[0].GroupName + "-worker").To(Equal(ws.Spec.TargetReference.Name))
	sample.Spec.WorkerGroupSpecs[0].Replicas = ptr.To[int32](4)
	sample.Spec.WorkerDrain = &rayv1.WorkerDrainOptions{TimeoutSeconds: ptr.To[int32](60)}
	sample.Spec.UpgradeStrategy = &rayv1.RayClusterUpgradeStrategy{Type: ptr.To(rayv1.RayClusterRollingUpdate)}
	rc := create(t, sample)
	waitReady(t, rc, 4)
	group := sample.Spec.WorkerGroupSpecs[0].GroupName
	placed := capacityOf(g, workerPods(g, rc, group))
	g.Expect(count(placed, "on-demand")).To(Equal(1), "placement %v", placed)
	g.Expect(count(placed, "spot")).To(Equal(3), "placement %v", placed)

	// A scale-down that names no pod: Kruise chooses, and a spot worker goes.
	four := uids(workerPods(g, rc, group))
	update(t, rc, func(c *rayv1.RayCluster) { c.Spec.WorkerGroupSpecs[0].Replicas = ptr.To[int32](3) })
	var onDemand string
	g.Eventually(func(g Gomega) {
		placed := capacityOf(g, workerPods(g, rc, group))
		g.Expect(placed).To(HaveLen(3))
		g.Expect(count(placed, "on-demand")).To(Equal(1), "the on-demand worker stays: %v", placed)
		for name, c := range placed {
			if c == "on-demand" {
				onDemand = name
			}
		}
	}, readyTimeout, poll).Should(Succeed())

	// A named removal, as the autoscaler writes it: exactly that pod goes, even though it is on-demand.
	before := uids(workerPods(g, rc, group))
	var spotGone string
	for name := range four {
		if _, ok := before[name]; !ok {
			spotGone = name
		}
	}
	update(t, rc, func(c *rayv1.RayCluster) {
		c.Spec.WorkerGroupSpecs[0].Replicas = ptr.To[int32](2)
		c.Spec.WorkerGroupSpecs[0].ScaleStrategy.WorkersToDelete = []string{onDemand}
	})
	delete(before, onDemand)
	g.Eventually(func(g Gomega) {
		g.Expect(uids(workerPods(g, rc, group))).To(Equal(before))
	}, readyTimeout, poll).Should(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(uids(workerPods(g, rc, group))).To(Equal(before))
	}, 2*time.Second, poll).Should(Succeed())

	// A scale-up refills the on-demand subset, then spot.
	update(t, rc, func(c *rayv1.RayCluster) {
		c.Spec.WorkerGroupSpecs[0].Replicas = ptr.To[int32](4)
		c.Spec.WorkerGroupSpecs[0].ScaleStrategy.WorkersToDelete = nil
	})
	waitReady(t, rc, 4)
	g.Eventually(func(g Gomega) {
		placed := capacityOf(g, workerPods(g, rc, group))
		g.Expect(placed).To(HaveLen(4))
		g.Expect(count(placed, "on-demand")).To(Equal(1), "placement %v", placed)
	}, readyTimeout, poll).Should(Succeed())
	g.Expect(drainedNames(gcs.drainedPods(ns), ns)).To(ConsistOf(spotGone, onDemand), "each removed worker was drained first, and only those")

	// An in-place image upgrade: the same pods on the same nodes, in the same subsets.
	nodes := map[string]string{}
	for _, p := range workerPods(g, rc, group) {
		nodes[p.Name] = p.Spec.NodeName
	}
	update(t, rc, func(c *rayv1.RayCluster) { c.Spec.WorkerGroupSpecs[0].Template.Spec.Containers[0].Image = newImage })
	g.Eventually(func(g Gomega) {
		pods := workerPods(g, rc, group)
		g.Expect(pods).To(HaveLen(4))
		for _, p := range pods {
			g.Expect(updatedAndReady(&p)).To(BeTrue(), "pod %s not updated", p.Name)
			g.Expect(p.Spec.NodeName).To(Equal(nodes[p.Name]), "pod %s moved", p.Name)
		}
		g.Expect(count(capacityOf(g, pods), "on-demand")).To(Equal(1))
	}, readyTimeout, poll).Should(Succeed())
	created, deleted := ledger.counts(t, rc)
	g.Expect([]int{created, deleted}).To(Equal([]int{1 + 4 + 2, 2}), "pods created and deleted: only those the scaling asked for")
}
