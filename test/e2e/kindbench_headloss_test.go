package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/membership"
)

// The kind head-loss benchmark (make bench-kind-headloss): a cluster without GCS fault tolerance loses its head
// pod (deleted), under kray, under kray with its workers left to Ray's own timing (kray.io/worker-healing:
// "false"), and under KubeRay, in rounds: each round runs kray's two rows in a shuffled order, then KubeRay's,
// for each cluster size. The fake Ray keeps Ray's default timings (a raylet of a restarted GCS ends at its next
// liveness self-check, every 60 s). It measures, not asserts: the report is docs/bench/kind-headloss.md, with
// the median and the range of each figure over the rounds.

// headLossRun is one head loss's measurements.
type headLossRun struct {
	name    string
	workers int
	// headReady is from the head pod's deletion until a new head pod is Ready; rejoined until every worker is
	// live in the new head's GCS; afterReady is rejoined less headReady.
	headReady, rejoined, afterReady time.Duration
	created, deleted                int   // pods created and deleted
	restarts                        int32 // Ray container restarts of the workers, whose pods are kept
}

// headLossRows are the benchmark's rows run under kray, by name: how each shapes the cluster.
var headLossRows = []struct {
	name   string
	mutate func(*rayv1.RayCluster)
}{
	{name: "kray"},
	{name: "kray, kray.io/worker-healing: \"false\" (Ray's own timing)", mutate: func(rc *rayv1.RayCluster) {
		rc.Annotations = map[string]string{constants.AnnotationWorkerHealing: "false"}
	}},
}

// TestHeadLossBenchOnKind runs the benchmark when KRAY_BENCH_KIND_HEADLOSS=1 (hack/bench/kind.sh headloss):
// KRAY_BENCH_ROUNDS rounds (default 3) at each size of KRAY_BENCH_HEADLOSS_WORKERS (default "4").
func TestHeadLossBenchOnKind(t *testing.T) {
	if os.Getenv("KRAY_BENCH_KIND_HEADLOSS") != "1" {
		t.Skip("the kind head-loss benchmark: make bench-kind-headloss")
	}
	rounds := envInt(t, "KRAY_BENCH_ROUNDS", 3)
	sizes := []int{benchWorkers}
	if v := os.Getenv("KRAY_BENCH_HEADLOSS_WORKERS"); v != "" {
		sizes = nil
		for _, f := range strings.Fields(v) {
			n, err := strconv.Atoi(f)
			if err != nil || n < 1 {
				t.Fatalf("KRAY_BENCH_HEADLOSS_WORKERS: %q is not a worker count", f)
			}
			sizes = append(sizes, n)
		}
	}
	kuberay := "KubeRay " + os.Getenv("KRAY_BENCH_KUBERAY_VERSION")
	var runs []headLossRun
	for round := range rounds {
		phase := time.Duration(rand.Int64N(int64(time.Minute)))
		for _, n := range sizes {
			for _, i := range rand.Perm(len(headLossRows)) {
				row := headLossRows[i]
				runs = append(runs, benchHeadLoss(t, row.name, n, phase, row.mutate))
			}
			t.Logf("round %d of %d at %d workers (loss %s into the self-check period): kray's rows done", round+1, rounds, n, phase.Round(time.Second))
		}
		stopKray := scaleKray(t, 0)
		removeKubeRay := deployKubeRay(t)
		for _, n := range sizes {
			runs = append(runs, benchHeadLoss(t, kuberay, n, phase, nil))
		}
		removeKubeRay()
		stopKray()
	}
	writeHeadLossReport(t, runs, rounds)
}

// envInt is the positive integer in the environment variable name, def when it is unset.
func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s: %q is not a positive integer", name, v)
	}
	return n
}

// benchHeadLoss creates a cluster of one head and n workers shaped by mutate in a namespace of its own, deletes
// its head pod once it is ready, has run long enough for kray to bind its workers' runs (waitBound, the same
// wait in every row) and phase more, and measures until every worker is live in the new head's GCS; the namespace is gone when
// it returns.
func benchHeadLoss(t *testing.T, name string, n int, phase time.Duration, mutate func(*rayv1.RayCluster)) headLossRun {
	t.Helper()
	g := NewWithT(t)
	ns, drop := benchNamespace(t, "bench-headloss-")
	defer drop()
	rc := kindRayCluster(ns, "bench", int32(n))
	if mutate != nil {
		mutate(rc)
	}
	create(t, rc)
	waitKindReady(t, rc, n)
	waitBound(t, rc)
	// A head is lost at any point of its raylets' 60 s self-check period, which decides when Ray ends them on its
	// own: the loss comes at a random point of it, the same draw for every row of a round.
	time.Sleep(phase)
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
	run.afterReady = run.rejoined - run.headReady
	waitKindReady(t, rc, n)
	created1, deleted1 := ledger.counts(t, rc)
	run.name, run.workers, run.created, run.deleted = name, n, created1-created0, deleted1-deleted0
	for _, p := range workerPods(g, rc, "workergroup") {
		if workers[p.Name] == p.UID {
			for _, cs := range p.Status.ContainerStatuses {
				run.restarts += cs.RestartCount
			}
		}
	}
	t.Logf("%s, %d workers: head Ready after %s, every worker in the new GCS after %s, %d pods created, %d deleted, %d worker restarts",
		name, n, run.headReady.Round(time.Second), run.rejoined.Round(time.Second), run.created, run.deleted, run.restarts)
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

// writeHeadLossReport writes the runs to KRAY_BENCH_REPORT as a Markdown table: per row and size, the median
// and the range of each figure.
func writeHeadLossReport(t *testing.T, runs []headLossRun, rounds int) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, `# A lost head on real kubelets: how long until the whole cluster is back

Written by `+"`make bench-kind-headloss`"+` (hack/bench/kind.sh, test/e2e/kindbench_headloss_test.go) on %s. A kind
cluster (real kubelets and containerd, 2 cores), Kruise %s with kruise-daemon, the kind suite's fake Ray image
with Ray's default timings: without GCS fault tolerance a new head's GCS, of a new cluster ID, knows none of
the workers, and a worker's raylet ends at its next liveness self-check (every 60 s), after which its container
restarts and joins. The same RayCluster each time: one head and the workers, ready, then, %s after the last
worker started (kray binds a run to its GCS's cluster ID %s after it first saw it) and a random part of the
raylets' 60 s self-check period more (one draw per round, the same for its rows), the head pod deleted. Measured from the deletion until a new head pod is Ready, and until every worker is live
in the new head's GCS (ray list nodes in the head). Restarts are the workers' container restarts (their pods
are kept). KubeRay's operator is built from its module, at the version named, and runs while kray's is scaled
to 0; both use the same CRDs. %d rounds; in each, kray's two rows in a shuffled order, then KubeRay's. Each
figure is the median over the rounds, with the range in brackets.

`, time.Now().UTC().Format("2006-01-02"), os.Getenv("KRAY_BENCH_KRUISE_VERSION"), membership.BindAfter+10*time.Second,
		membership.BindAfter, rounds)
	fmt.Fprintf(&b, "| operator | workers | new head Ready | every worker in the new GCS | of which after the new head was Ready | pods created | pods deleted | worker restarts |\n|---|---|---|---|---|---|---|---|\n")
	type key struct {
		name    string
		workers int
	}
	var order []key
	byKey := map[key][]headLossRun{}
	for _, r := range runs {
		k := key{r.name, r.workers}
		if _, ok := byKey[k]; !ok {
			order = append(order, k)
		}
		byKey[k] = append(byKey[k], r)
	}
	slices.SortStableFunc(order, func(a, b key) int { return a.workers - b.workers })
	for _, k := range order {
		rs := byKey[k]
		secs := func(f func(headLossRun) time.Duration) string {
			return spread(rs, func(r headLossRun) float64 { return f(r).Seconds() }, "%.0f s")
		}
		count := func(f func(headLossRun) float64) string { return spread(rs, f, "%.0f") }
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s | %s | %s |\n", k.name, k.workers,
			secs(func(r headLossRun) time.Duration { return r.headReady }),
			secs(func(r headLossRun) time.Duration { return r.rejoined }),
			secs(func(r headLossRun) time.Duration { return r.afterReady }),
			count(func(r headLossRun) float64 { return float64(r.created) }),
			count(func(r headLossRun) float64 { return float64(r.deleted) }),
			count(func(r headLossRun) float64 { return float64(r.restarts) }))
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

// spread is the median of f over runs, formatted with format, and its range in brackets when the runs differ.
func spread(runs []headLossRun, f func(headLossRun) float64, format string) string {
	vs := make([]float64, 0, len(runs))
	for _, r := range runs {
		vs = append(vs, f(r))
	}
	slices.Sort(vs)
	median := vs[len(vs)/2]
	if len(vs)%2 == 0 {
		median = (vs[len(vs)/2-1] + vs[len(vs)/2]) / 2
	}
	out := fmt.Sprintf(format, median)
	if lo, hi := fmt.Sprintf(format, vs[0]), fmt.Sprintf(format, vs[len(vs)-1]); lo != hi {
		out += " [" + lo + " to " + hi + "]"
	}
	return out
}
