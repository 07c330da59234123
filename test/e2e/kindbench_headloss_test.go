package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/constants"
)

// The kind head-loss benchmark (make bench-kind-headloss): a 1-head, 4-worker cluster without GCS fault
// tolerance loses its head pod (deleted), under kray, under kray with its workers left to Ray's own timing
// (kray.io/worker-healing: "false"), and under KubeRay, one after the other on one kind cluster. The fake Ray
// keeps Ray's default timings (a raylet of a restarted GCS ends at its next liveness self-check, every 60 s). It
// measures, not asserts: the report is docs/bench/kind-headloss.md.

// headLossRun is one head loss's measurements.
type headLossRun struct {
	name string
	// headReady is from the head pod's deletion until a new head pod is Ready; rejoined until every worker is
	// live in the new head's GCS.
	headReady, rejoined time.Duration
	created, deleted    int   // pods created and deleted
	restarts            int32 // Ray container restarts of the workers, whose pods are kept
}

// TestHeadLossBenchOnKind runs the benchmark when KRAY_BENCH_KIND_HEADLOSS=1 (hack/bench/kind.sh headloss).
func TestHeadLossBenchOnKind(t *testing.T) {
	if os.Getenv("KRAY_BENCH_KIND_HEADLOSS") != "1" {
		t.Skip("the kind head-loss benchmark: make bench-kind-headloss")
	}
	runs := []headLossRun{
		benchHeadLoss(t, "kray", nil),
		benchHeadLoss(t, "kray, kray.io/worker-healing: \"false\" (Ray's own timing)", func(rc *rayv1.RayCluster) {
			rc.Annotations = map[string]string{constants.AnnotationWorkerHealing: "false"}
		}),
	}
	stopKray := scaleKray(t, 0)
	removeKubeRay := deployKubeRay(t)
	runs = append(runs, benchHeadLoss(t, "KubeRay "+os.Getenv("KRAY_BENCH_KUBERAY_VERSION"), nil))
	removeKubeRay()
	stopKray()
	writeHeadLossReport(t, runs)
}

// benchHeadLoss creates a 1-head, 4-worker cluster shaped by mutate in a namespace of its own, deletes its
// head pod once it is ready, and measures until every worker is live in the new head's GCS; the namespace is
// gone when it returns.
func benchHeadLoss(t *testing.T, name string, mutate func(*rayv1.RayCluster)) headLossRun {
	t.Helper()
	g := NewWithT(t)
	ns, drop := benchNamespace(t, "bench-headloss-")
	defer drop()
	rc := kindRayCluster(ns, "bench", benchWorkers)
	if mutate != nil {
		mutate(rc)
	}
	create(t, rc)
	waitKindReady(t, rc, benchWorkers)
	created0, deleted0 := ledger.counts(t, rc)
	workers := uids(workerPods(g, rc, "workergroup"))
	old := headByLabel(g, rc)

	start := time.Now()
	g.Expect(k8s.Delete(context.Background(), old)).To(Succeed())
	var run headLossRun
	var head *corev1.Pod
	g.Eventually(func(g Gomega) {
		head = headByLabel(g, rc)
		g.Expect(head.UID).NotTo(Equal(old.UID))
		g.Expect(podReady(head)).To(BeTrue())
	}, kindTimeout, 200*time.Millisecond).Should(Succeed())
	run.headReady = time.Since(start)
	g.Eventually(func(g Gomega) {
		nodes := rayNodesOf(t, head)
		for w := range workers {
			g.Expect(nodes[w]).To(BeElementOf("IDLE", "RUNNING"), "worker %s", w)
		}
	}, 2*kindTimeout, 500*time.Millisecond).Should(Succeed())
	run.rejoined = time.Since(start)
	waitKindReady(t, rc, benchWorkers)
	created1, deleted1 := ledger.counts(t, rc)
	run.name, run.created, run.deleted = name, created1-created0, deleted1-deleted0
	for _, p := range workerPods(g, rc, "workergroup") {
		if workers[p.Name] == p.UID {
			for _, cs := range p.Status.ContainerStatuses {
				run.restarts += cs.RestartCount
			}
		}
	}
	t.Logf("%s: head Ready after %s, every worker in the new GCS after %s, %d pods created, %d deleted, %d worker restarts",
		name, run.headReady.Round(time.Second), run.rejoined.Round(time.Second), run.created, run.deleted, run.restarts)
	return run
}

// headByLabel is the cluster's head pod that is not going, found by its labels (KubeRay's head pod has a
// generated name).
func headByLabel(g Gomega, rc *rayv1.RayCluster) *corev1.Pod {
	var head *corev1.Pod
	for _, p := range clusterPods(g, rc, constants.LabelNodeType, string(rayv1.HeadNode)) {
		if p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodFailed {
			head = &p
		}
	}
	g.Expect(head).NotTo(BeNil(), "no head pod")
	return head
}

// writeHeadLossReport writes the runs to KRAY_BENCH_REPORT as a Markdown table.
func writeHeadLossReport(t *testing.T, runs []headLossRun) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, `# A lost head on real kubelets: how long until the whole cluster is back

Written by `+"`make bench-kind-headloss`"+` (hack/bench/kind.sh, test/e2e/kindbench_headloss_test.go) on %s. One
kind node (a real kubelet and containerd, 2 cores), Kruise %s with kruise-daemon, the kind suite's fake Ray
image with Ray's default timings: without GCS fault tolerance a new head's GCS knows none of the workers, and a
worker's raylet ends at its next liveness self-check (every 60 s), after which its container restarts and
joins. The same RayCluster each time: one head and %d workers, ready, then the head pod deleted; measured from
the deletion until a new head pod is Ready, and until every worker is live in the new head's GCS (ray list
nodes in the head). Restarts are the workers' container restarts (their pods are kept). KubeRay's operator is
built from its module, at the version named, and runs while kray's is scaled to 0; both use the same CRDs.

`, time.Now().UTC().Format("2006-01-02"), os.Getenv("KRAY_BENCH_KRUISE_VERSION"), benchWorkers)
	fmt.Fprintf(&b, "| operator | new head Ready | every worker in the new GCS | pods created | pods deleted | worker restarts |\n|---|---|---|---|---|---|\n")
	for _, r := range runs {
		fmt.Fprintf(&b, "| %s | %.0f s | %.0f s | %d | %d | %d |\n", r.name, r.headReady.Seconds(), r.rejoined.Seconds(), r.created, r.deleted, r.restarts)
	}
	path := os.Getenv("KRAY_BENCH_REPORT")
	if path == "" {
		t.Log("\n" + b.String())
		return
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}
