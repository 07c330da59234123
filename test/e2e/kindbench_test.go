package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/internal/controller/raycluster"
	"github.com/kray-project/kray/pkg/constants"
)

// The kind upgrade benchmark (make bench-kind-upgrade): a busy 1-head, 4-worker cluster on real kubelets has its
// workers' image changed from one big image of the kind cluster's registry to another (KRAY_BENCH_OLD_IMAGE,
// KRAY_BENCH_NEW_IMAGE, pulled at the rate hack/bench/kind.sh sets), under KubeRay's Recreate, kray's Recreate,
// kray's RollingUpdate with workerDrain, and the same with kray.io/image-prepull and maxUnavailable 2, one after
// the other on one kind cluster. It measures, not asserts: the report is docs/bench/kind-upgrade.md.

// benchWorkers is the benchmark cluster's worker count.
const benchWorkers = 4

// upgradeRun is one upgrade's measurements.
type upgradeRun struct {
	name             string
	took             time.Duration // from the spec change until every pod runs the new image and is Ready
	created, deleted int           // pods created and deleted by the upgrade
	notReady         time.Duration // worker-seconds below benchWorkers Ready workers during the upgrade
	drains           int           // drain requests sent (DrainingWorker events)
	restarts         int32         // container restarts of the pods that were kept
	tasks            taskOutcome
	// pulledShort and pulled are the bytes the registry sent while fewer than benchWorkers workers were Ready,
	// and in all, during the upgrade.
	pulledShort, pulled int64
}

// TestUpgradeBenchOnKind runs the benchmark when KRAY_BENCH_KIND_UPGRADE=1 (hack/bench/kind.sh upgrade).
func TestUpgradeBenchOnKind(t *testing.T) {
	if os.Getenv("KRAY_BENCH_KIND_UPGRADE") != "1" {
		t.Skip("the kind upgrade benchmark: make bench-kind-upgrade")
	}
	var runs []upgradeRun
	runs = append(runs,
		benchUpgrade(t, "kray, Recreate", func(rc *rayv1.RayCluster) { withUpgrade(rc, rayv1.RayClusterRecreate, 0) }),
		benchUpgrade(t, "kray, RollingUpdate with workerDrain", func(rc *rayv1.RayCluster) {
			withUpgrade(rc, rayv1.RayClusterRollingUpdate, 300)
		}),
		benchUpgrade(t, "kray, RollingUpdate with workerDrain, image-prepull, maxUnavailable 2", func(rc *rayv1.RayCluster) {
			withUpgrade(rc, rayv1.RayClusterRollingUpdate, 300)
			rc.Annotations = map[string]string{constants.AnnotationImagePrepull: "true"}
			rc.Spec.WorkerGroupSpecs[0].RollingUpdate = &rayv1.WorkerGroupRollingUpdate{MaxUnavailable: ptr.To(intstr.FromInt32(2))}
		}),
	)
	stopKray := scaleKray(t, 0)
	removeKubeRay := deployKubeRay(t)
	runs = append([]upgradeRun{benchUpgrade(t, "KubeRay "+os.Getenv("KRAY_BENCH_KUBERAY_VERSION")+", Recreate", func(rc *rayv1.RayCluster) {
		withUpgrade(rc, rayv1.RayClusterRecreate, 0)
	})}, runs...)
	removeKubeRay()
	stopKray()
	writeUpgradeReport(t, runs)
}

// benchUpgrade creates a 1-head, 4-worker cluster of the old image shaped by strategy in a namespace of its own,
// keeps it busy once it is ready, changes its workers' image and measures the upgrade; the namespace is gone
// when it returns. No node has the new image when the upgrade starts.
func benchUpgrade(t *testing.T, name string, strategy func(*rayv1.RayCluster)) upgradeRun {
	t.Helper()
	g := NewWithT(t)
	oldImage, newImage := os.Getenv("KRAY_BENCH_OLD_IMAGE"), os.Getenv("KRAY_BENCH_NEW_IMAGE")
	forgetImage(t, newImage)
	ns, drop := benchNamespace(t, "bench-upgrade-")
	defer drop()
	rc := kindRayCluster(ns, "bench", benchWorkers)
	rc.Spec.HeadGroupSpec.Template.Spec.Containers[0].Image = oldImage
	rc.Spec.WorkerGroupSpecs[0].Template.Spec.Containers[0].Image = oldImage
	// The load runs on the workers, one task per CPU (kray and KubeRay derive one from the 500m limit).
	rc.Spec.HeadGroupSpec.RayStartParams["num-cpus"] = "0"
	strategy(rc)
	create(t, rc)
	waitReadyWithin(t, rc, benchWorkers, 2*kindTimeout, time.Second)
	load := startTaskLoad(t, rc)
	g.Eventually(load.running, 2*time.Minute, time.Second).Should(BeNumerically(">=", 3), "the load keeps three workers busy")
	created0, deleted0 := ledger.counts(t, rc)
	kept := uids(clusterPods(g, rc))
	ready := watchReadyWorkers(t, rc)
	pulled := watchRegistryBytes(t, os.Getenv("KRAY_BENCH_REGISTRY_CONTAINER"), func() bool { return ready.now() < benchWorkers })

	load.mark()
	start := time.Now()
	update(t, rc, func(c *rayv1.RayCluster) {
		c.Spec.WorkerGroupSpecs[0].Template.Spec.Containers[0].Image = newImage
	})
	var run upgradeRun
	g.Eventually(func(g Gomega) {
		pods := clusterPods(g, rc)
		g.Expect(pods).To(HaveLen(1 + benchWorkers))
		for _, p := range pods {
			g.Expect(p.DeletionTimestamp).To(BeNil())
			g.Expect(podReady(&p)).To(BeTrue())
			if p.Labels[constants.LabelNodeType] == constants.NodeTypeWorker {
				g.Expect(runsImage(&p, newImage)).To(BeTrue())
			}
		}
	}, 3*kindTimeout, 200*time.Millisecond).Should(Succeed())
	run.took = time.Since(start)
	run.notReady = ready.shortfall(start)
	run.tasks = load.stop(context.Background())
	run.pulledShort, run.pulled = pulled.stop()
	created1, deleted1 := ledger.counts(t, rc)
	run.name, run.created, run.deleted = name, created1-created0, deleted1-deleted0
	run.drains = int(eventCount(g, rc, raycluster.EventDrainingWorker))
	for _, p := range clusterPods(g, rc) {
		if kept[p.Name] == p.UID {
			for _, cs := range p.Status.ContainerStatuses {
				run.restarts += cs.RestartCount
			}
		}
	}
	t.Logf("%s: %s, %d pods created, %d deleted, %.0f worker-seconds not Ready, %d drains, %d restarts, tasks %+v, "+
		"%d of %d bytes pulled while short", name, run.took.Round(time.Second), run.created, run.deleted,
		run.notReady.Seconds(), run.drains, run.restarts, run.tasks, run.pulledShort, run.pulled)
	return run
}

// benchNamespace creates a namespace named from prefix and returns its name and a function that deletes it
// and waits until it is gone.
func benchNamespace(t *testing.T, prefix string) (string, func()) {
	t.Helper()
	g := NewWithT(t)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix}}
	g.Expect(k8s.Create(context.Background(), ns)).To(Succeed())
	return ns.Name, func() {
		g.Expect(k8s.Delete(context.Background(), ns)).To(Succeed())
		g.Eventually(func() bool {
			return apierrors.IsNotFound(k8s.Get(context.Background(), client.ObjectKeyFromObject(ns), &corev1.Namespace{}))
		}, kindTimeout, time.Second).Should(BeTrue())
	}
}

// readyWatch follows a cluster's Ready worker pods.
type readyWatch struct {
	mu      sync.Mutex
	ready   map[types.UID]bool
	changes []readyChange
}

// readyChange is a Ready worker count and when it began.
type readyChange struct {
	at    time.Time
	ready int
}

// watchReadyWorkers follows rc's worker pods from a watch started now.
func watchReadyWorkers(t *testing.T, rc *rayv1.RayCluster) *readyWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w, err := watcher.Watch(ctx, &corev1.PodList{}, client.InNamespace(rc.Namespace), client.MatchingLabels{"ray.io/node-type": "worker"})
	if err != nil {
		t.Fatal(err)
	}
	r := &readyWatch{ready: map[types.UID]bool{}}
	for _, p := range workerPods(NewWithT(t), rc, "workergroup") {
		r.ready[p.UID] = podReady(&p)
	}
	r.changes = []readyChange{{time.Now(), r.countLocked()}}
	go func() {
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			r.mu.Lock()
			r.ready[p.UID] = ev.Type != "DELETED" && p.DeletionTimestamp == nil && podReady(p)
			r.changes = append(r.changes, readyChange{time.Now(), r.countLocked()})
			r.mu.Unlock()
		}
	}()
	return r
}

func (r *readyWatch) countLocked() int {
	n := 0
	for _, ready := range r.ready {
		if ready {
			n++
		}
	}
	return n
}

// now is the Ready worker count now.
func (r *readyWatch) now() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.countLocked()
}

// shortfall is, from since until now, the worker-seconds by which the Ready workers fell short of benchWorkers.
func (r *readyWatch) shortfall(since time.Time) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	end := time.Now()
	var short time.Duration
	for i, c := range r.changes {
		from, to := c.at, end
		if i+1 < len(r.changes) {
			to = r.changes[i+1].at
		}
		if to.Before(since) {
			continue
		}
		if from.Before(since) {
			from = since
		}
		short += time.Duration(max(0, benchWorkers-c.ready)) * to.Sub(from)
	}
	return short
}

// scaleKray sets the replicas of kray's Deployment and waits until that many operator pods run; the returned
// function scales it back to 1.
func scaleKray(t *testing.T, replicas int32) func() {
	t.Helper()
	set := func(n int32) {
		g := NewWithT(t)
		d := &appsv1.Deployment{}
		g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: kindOperatorNS, Name: kindDeployment}, d)).To(Succeed())
		d.Spec.Replicas = ptr.To(n)
		g.Expect(k8s.Update(context.Background(), d)).To(Succeed())
		g.Eventually(func(g Gomega) {
			ready := 0
			for _, p := range operatorPods(g) {
				g.Expect(n > 0 || p.DeletionTimestamp != nil).To(BeTrue(), "operator pod %s still running", p.Name)
				if podReady(&p) {
					ready++
				}
			}
			if n > 0 {
				g.Expect(ready).To(BeEquivalentTo(n))
			}
		}, kindTimeout, time.Second).Should(Succeed())
	}
	set(replicas)
	return func() { set(1) }
}

// kubeRayNS is where the benchmark runs KubeRay's operator.
const kubeRayNS = "kuberay-system"

// deployKubeRay runs KubeRay's operator (the image KRAY_BENCH_KUBERAY_IMAGE, with the ClusterRole of its module's
// config/rbac/role.yaml at KRAY_BENCH_KUBERAY_ROLE) as its config/manager does, and waits until it is ready; the
// returned function removes it.
func deployKubeRay(t *testing.T) func() {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	data, err := os.ReadFile(os.Getenv("KRAY_BENCH_KUBERAY_ROLE"))
	g.Expect(err).NotTo(HaveOccurred())
	role := &rbacv1.ClusterRole{}
	g.Expect(yaml.Unmarshal(data, role)).To(Succeed())
	role.Name = "bench-kuberay-operator"
	labels := map[string]string{"app.kubernetes.io/name": "kuberay-bench"}
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: kubeRayNS}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: kubeRayNS, Name: "kuberay-operator"}},
		role,
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: kubeRayNS, Name: "kuberay-operator"}}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: kubeRayNS, Name: "kuberay-operator"},
			Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
					ServiceAccountName: "kuberay-operator",
					Containers: []corev1.Container{{Name: "kuberay-operator", Image: os.Getenv("KRAY_BENCH_KUBERAY_IMAGE"),
						ImagePullPolicy: corev1.PullNever, Command: []string{"/manager"},
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{}}}},
				}}}},
	}
	for _, o := range objs {
		g.Expect(k8s.Create(ctx, o)).To(Succeed(), "create %T %s", o, o.GetName())
	}
	g.Eventually(func(g Gomega) {
		d := &appsv1.Deployment{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: kubeRayNS, Name: "kuberay-operator"}, d)).To(Succeed())
		g.Expect(d.Status.ReadyReplicas).To(BeEquivalentTo(1))
	}, kindTimeout, time.Second).Should(Succeed())
	return func() {
		for _, o := range objs {
			_ = k8s.Delete(ctx, o)
		}
		g.Eventually(func() bool {
			return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKey{Name: kubeRayNS}, &corev1.Namespace{}))
		}, kindTimeout, time.Second).Should(BeTrue())
	}
}

// writeUpgradeReport writes the runs to KRAY_BENCH_REPORT as a Markdown table.
func writeUpgradeReport(t *testing.T, runs []upgradeRun) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, `# A busy cluster's image change on real kubelets: what an upgrade costs under KubeRay and kray

Written by `+"`make bench-kind-upgrade`"+` (hack/bench/kind.sh, test/e2e/kindbench_test.go) on %s. Two kind nodes
(real kubelets and containerd) on one 2-core machine, Kruise %s, the kind suite's fake Ray. The same RayCluster
each time: one head (no CPUs for tasks) and %d workers of one CPU each, of the image %s, ready, with a driver
submitting one task of %d s every %s through the head's dashboard (three workers busy on average). Then the
workers' image is changed to %s, and the run is measured from that change until every pod is Ready and every
worker runs the new image. Each image carries %s of incompressible layer of its own; the nodes pull from the
kind cluster's registry (Debian's docker-registry) at %s each (tc, one HTB class per node), with the
API server's default pull policy (IfNotPresent); no node has the new image when a run starts.

- Tasks killed and task-seconds lost: attempts that died with their node, and how long each had run; for a
  head that went (Recreate replaces it), the tasks it was running, killed with the driver, and how long they
  had run by its last answer (read every second). Tasks queued on a replaced head are lost too: they are
  counted below the table.
- Tasks completed: during the upgrade, on any head.
- Worker-seconds not Ready: over the upgrade, how many of the %d workers were not Ready (or absent) and for how long.
- Pulled while short: the bytes the registry sent while fewer than %d workers were Ready, of all it sent
  during the upgrade.

KubeRay's operator is built from its module, at the version named, and runs while kray's is scaled to 0; both
use the same CRDs.

`, time.Now().UTC().Format("2006-01-02"), os.Getenv("KRAY_BENCH_KRUISE_VERSION"), benchWorkers, os.Getenv("KRAY_BENCH_OLD_IMAGE"),
		benchTaskSeconds, benchTaskEvery, os.Getenv("KRAY_BENCH_NEW_IMAGE"), os.Getenv("KRAY_BENCH_PAD"),
		os.Getenv("KRAY_BENCH_PULL_RATE"), benchWorkers, benchWorkers)
	fmt.Fprintf(&b, "| upgrade | until every pod runs the new image, Ready | tasks killed | task-seconds lost | tasks completed | worker-seconds not Ready | pulled while short / in all | pods created / deleted |\n|---|---|---|---|---|---|---|---|\n")
	for _, r := range runs {
		fmt.Fprintf(&b, "| %s | %.0f s | %d | %.0f | %d | %.0f | %.2f / %.2f GB | %d / %d |\n", r.name, r.took.Seconds(),
			r.tasks.killed, r.tasks.lostSeconds, r.tasks.completed, r.notReady.Seconds(),
			float64(r.pulledShort)/1e9, float64(r.pulled)/1e9, r.created, r.deleted)
	}
	b.WriteString("\n")
	for _, r := range runs {
		fmt.Fprintf(&b, "- %s: %d drain requests, %d container restarts of kept pods, %d queued tasks lost with a head, %d submissions found no head.\n",
			r.name, r.drains, r.restarts, r.tasks.dropped, r.tasks.refused)
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
