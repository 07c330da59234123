package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/internal/controller/raycluster"
	"github.com/kray-project/kray/pkg/constants"
)

// The seed bug: pods created twice and one deleted at random. Ten RayClusters of 1 head + 5 workers
// created at once each end ready with exactly six pods ever created and none deleted.
func TestTenClustersAtOnceCreateEachPodOnce(t *testing.T) {
	clusters := sampleBurst(t, namespace(t), "burst", 10, 5)
	createAtOnce(t, clusters)
	expectEachPodCreatedOnce(t, clusters, 5)
}

// sampleBurst returns n copies of the sample cluster, named <prefix>-<i>, each with workers workers.
func sampleBurst(t *testing.T, ns, prefix string, n int, workers int32) []*rayv1.RayCluster {
	t.Helper()
	clusters := make([]*rayv1.RayCluster, n)
	for i := range clusters {
		rc := loadSample(t, "ray-cluster.sample.yaml", ns)
		rc.Name = fmt.Sprintf("%s-%d", prefix, i)
		rc.Spec.WorkerGroupSpecs[0].Replicas = ptr.To(workers)
		clusters[i] = rc
	}
	return clusters
}

// expectEachPodCreatedOnce waits until every cluster is ready with workers workers, then checks with the
// ledger that each created its head and workers exactly once and deleted none.
func expectEachPodCreatedOnce(t *testing.T, clusters []*rayv1.RayCluster, workers int32) {
	t.Helper()
	g := NewWithT(t)
	for _, rc := range clusters {
		waitReady(t, rc, int(workers))
	}
	for _, rc := range clusters {
		created, deleted := ledger.counts(t, rc)
		g.Expect(created).To(Equal(int(workers)+1), "cluster %s", rc.Name)
		g.Expect(deleted).To(BeZero(), "cluster %s", rc.Name)
	}
}

// createAtOnce creates the RayClusters concurrently and fails the test, from its own goroutine, if a create
// failed.
func createAtOnce(t *testing.T, clusters []*rayv1.RayCluster) {
	t.Helper()
	errs := make([]error, len(clusters))
	var wg sync.WaitGroup
	for i, rc := range clusters {
		wg.Go(func() { errs[i] = k8s.Create(context.Background(), rc) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("create RayCluster %s: %v", clusters[i].Name, err)
		}
	}
}

// emptyScalableCluster creates a ready cluster whose one group has 0 workers and room for 100.
func emptyScalableCluster(t *testing.T) *rayv1.RayCluster {
	t.Helper()
	sample := loadSample(t, "ray-cluster.sample.yaml", namespace(t))
	sample.Spec.WorkerGroupSpecs[0].Replicas = ptr.To[int32](0)
	sample.Spec.WorkerGroupSpecs[0].MinReplicas = ptr.To[int32](0)
	sample.Spec.WorkerGroupSpecs[0].MaxReplicas = ptr.To[int32](100)
	rc := create(t, sample)
	waitReady(t, rc, 0)
	return rc
}

// One group scaled 0→50→0→50: each step creates or deletes exactly the pods it asks for.
func TestScaleZeroFiftyZeroFifty(t *testing.T) {
	g := NewWithT(t)
	rc := emptyScalableCluster(t)
	for _, n := range []int32{50, 0, 50} {
		update(t, rc, func(c *rayv1.RayCluster) { c.Spec.WorkerGroupSpecs[0].Replicas = ptr.To(n) })
		waitReady(t, rc, int(n))
	}
	created, deleted := ledger.counts(t, rc)
	g.Expect(created).To(Equal(1 + 50 + 50))
	g.Expect(deleted).To(Equal(50))
}

// The same group flapped 0→50→0→50 without waiting: the end state is exactly 50 workers, and no more pods
// were ever created than the two scale-ups asked for.
func TestRapidFlappingConverges(t *testing.T) {
	g := NewWithT(t)
	rc := emptyScalableCluster(t)
	for _, n := range []int32{50, 0, 50} {
		update(t, rc, func(c *rayv1.RayCluster) { c.Spec.WorkerGroupSpecs[0].Replicas = ptr.To(n) })
	}
	waitReady(t, rc, 50)
	created, deleted := ledger.counts(t, rc)
	g.Expect(created - deleted).To(Equal(51))
	g.Expect(created).To(BeNumerically("<=", 1+50+50))
}

// scaleUpThrough scales a ready 2-worker cluster to workers, runs disrupt (a process kill or restart)
// right after the write, and requires the group to converge with every pod created exactly once.
func scaleUpThrough(t *testing.T, workers int32, disrupt func()) {
	t.Helper()
	g := NewWithT(t)
	ns := namespace(t)
	rc := create(t, loadSample(t, "ray-cluster.sample.yaml", ns))
	waitReady(t, rc, 2)
	update(t, rc, func(c *rayv1.RayCluster) {
		c.Spec.WorkerGroupSpecs[0].MaxReplicas = ptr.To[int32](60)
		c.Spec.WorkerGroupSpecs[0].Replicas = ptr.To(workers)
	})
	disrupt()
	waitReady(t, rc, int(workers))
	created, deleted := ledger.counts(t, rc)
	g.Expect(created).To(Equal(int(workers) + 1))
	g.Expect(deleted).To(BeZero())
}

// The operator is killed with SIGKILL in the middle of a scale-up and restarted: the group converges
// with every pod created once.
func TestOperatorKilledDuringScaleUp(t *testing.T) {
	if !localCluster() {
		t.Skip("needs the operator run by hack/operator.sh; on kind the operator is a Deployment")
	}
	t.Cleanup(func() { hack(t, "operator.sh", "start") })
	scaleUpThrough(t, 40, func() {
		hack(t, "operator.sh", "kill")
		hack(t, "operator.sh", "start")
	})
}

// kruise-manager is restarted in the middle of a scale-up: the group converges with every pod created once.
func TestKruiseRestartedDuringScaleUp(t *testing.T) {
	if !localCluster() {
		t.Skip("needs hack/cluster.sh's kruise-manager; on kind Kruise runs as a Deployment")
	}
	t.Cleanup(func() { hack(t, "cluster.sh", "start-kruise") })
	scaleUpThrough(t, 40, func() { hack(t, "cluster.sh", "restart-kruise") })
}

// While kruise-manager is down no CloneSet can be written: kray reports the outage in a condition and an
// event, retries with backoff, and applies the replicas and template changes once Kruise is back.
func TestKruiseOutageIsReportedAndNothingIsLost(t *testing.T) {
	if !localCluster() {
		t.Skip("needs hack/cluster.sh's kruise-manager")
	}
	g := NewWithT(t)
	ns := namespace(t)
	rc := create(t, loadSample(t, "ray-cluster.sample.yaml", ns))
	waitReady(t, rc, 2)
	hack(t, "cluster.sh", "stop-kruise")
	t.Cleanup(func() { hack(t, "cluster.sh", "start-kruise") })
	update(t, rc, func(c *rayv1.RayCluster) {
		c.Spec.WorkerGroupSpecs[0].Replicas = ptr.To[int32](4)
		c.Spec.WorkerGroupSpecs[0].Template.Labels = map[string]string{"example.com/rev": "2"}
	})
	g.Eventually(func(g Gomega) {
		c := condition(get(g, rc), constants.ConditionWorkloadsSynced)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Message).To(ContainSubstring("webhook"))
		g.Expect(eventMessages(g, rc, raycluster.EventFailedToWriteWorkload)).NotTo(BeEmpty())
	}, readyTimeout, poll).Should(Succeed())
	hack(t, "cluster.sh", "start-kruise")
	waitReady(t, rc, 4)
	g.Eventually(func(g Gomega) {
		g.Expect(condition(get(g, rc), constants.ConditionWorkloadsSynced).Status).To(Equal(metav1.ConditionTrue))
		g.Expect(workerTemplateLabel(g, rc, "example.com/rev")).To(Equal("2"))
	}, readyTimeout, poll).Should(Succeed())
	created, _ := ledger.counts(t, rc)
	g.Expect(created).To(Equal(1 + 4))
}
