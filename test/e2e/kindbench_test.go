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
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/internal/controller/raycluster"
)

// The kind upgrade benchmark (make bench-kind-upgrade): the same image change of a 1-head, 4-worker cluster on
// real kubelets, under kray's RollingUpdate with workerDrain, kray's Recreate, and KubeRay's Recreate, one after
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
}

// TestUpgradeBenchOnKind runs the benchmark when KRAY_BENCH_KIND_UPGRADE=1 (hack/bench/kind.sh upgrade).
func TestUpgradeBenchOnKind(t *testing.T) {
	if os.Getenv("KRAY_BENCH_KIND_UPGRADE") != "1" {
		t.Skip("the kind upgrade benchmark: make bench-kind-upgrade")
	}
	runs := []upgradeRun{
		benchUpgrade(t, "kray, RollingUpdate with workerDrain", func(rc *rayv1.RayCluster) {
			withUpgrade(rc, rayv1.RayClusterRollingUpdate, 300)
		}),
		benchUpgrade(t, "kray, Recreate", func(rc *rayv1.RayCluster) { withUpgrade(rc, rayv1.RayClusterRecreate, 0) }),
	}
	stopKray := scaleKray(t, 0)
	removeKubeRay := deployKubeRay(t)
	runs = append(runs, benchUpgrade(t, "KubeRay "+os.Getenv("KRAY_BENCH_KUBERAY_VERSION")+", Recreate", func(rc *rayv1.RayCluster) {
		withUpgrade(rc, rayv1.RayClusterRecreate, 0)
	}))
	removeKubeRay()
	stopKray()
	writeUpgradeReport(t, runs)
}

// benchUpgrade creates a 1-head, 4-worker cluster shaped by strategy in a namespace of its own, changes its
// image once it is ready, and measures the upgrade; the namespace is gone when it returns.
func benchUpgrade(t *testing.T, name string, strategy func(*rayv1.RayCluster)) upgradeRun {
	t.Helper()
	g := NewWithT(t)
	ns, drop := benchNamespace(t, "bench-upgrade-")
	defer drop()
	rc := kindRayCluster(ns, "bench", benchWorkers)
	strategy(rc)
	create(t, rc)
	waitKindReady(t, rc, benchWorkers)
	created0, deleted0 := ledger.counts(t, rc)
	kept := uids(clusterPods(g, rc))
	ready := watchReadyWorkers(t, rc)

	start := time.Now()
	update(t, rc, func(c *rayv1.RayCluster) {
		c.Spec.HeadGroupSpec.Template.Spec.Containers[0].Image = kindUpgradeImage
		c.Spec.WorkerGroupSpecs[0].Template.Spec.Containers[0].Image = kindUpgradeImage
	})
	var run upgradeRun
	g.Eventually(func(g Gomega) {
		pods := clusterPods(g, rc)
		g.Expect(pods).To(HaveLen(1 + benchWorkers))
		for _, p := range pods {
			g.Expect(p.DeletionTimestamp).To(BeNil())
			g.Expect(podReady(&p)).To(BeTrue())
			g.Expect(runsImage(&p, kindUpgradeImage)).To(BeTrue())
		}
	}, 3*kindTimeout, 200*time.Millisecond).Should(Succeed())
	run.took = time.Since(start)
	run.notReady = ready(start)
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
	t.Logf("%s: %s, %d pods created, %d deleted, %.0f worker-seconds not Ready, %d drains, %d restarts",
		name, run.took.Round(time.Second), run.created, run.deleted, run.notReady.Seconds(), run.drains, run.restarts)
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

// watchReadyWorkers follows rc's worker pods from a watch started now and returns a function that gives, from
// since until the call, the worker-seconds by which the Ready workers fell short of benchWorkers.
func watchReadyWorkers(t *testing.T, rc *rayv1.RayCluster) func(since time.Time) time.Duration {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w, err := watcher.Watch(ctx, &corev1.PodList{}, client.InNamespace(rc.Namespace), client.MatchingLabels{"ray.io/node-type": "worker"})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	readyNow := map[types.UID]bool{}
	for _, p := range workerPods(NewWithT(t), rc, "workergroup") {
		readyNow[p.UID] = podReady(&p)
	}
	type change struct {
		at    time.Time
		ready int
	}
	count := func() int {
		n := 0
		for _, r := range readyNow {
			if r {
				n++
			}
		}
		return n
	}
	changes := []change{{time.Now(), count()}}
	go func() {
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			mu.Lock()
			readyNow[p.UID] = ev.Type != "DELETED" && p.DeletionTimestamp == nil && podReady(p)
			changes = append(changes, change{time.Now(), count()})
			mu.Unlock()
		}
	}()
	return func(since time.Time) time.Duration {
		mu.Lock()
		defer mu.Unlock()
		end := time.Now()
		var short time.Duration
		for i, c := range changes {
			from, to := c.at, end
			if i+1 < len(changes) {
				to = changes[i+1].at
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
	fmt.Fprintf(&b, `# An image change on real kubelets: kray's in-place upgrade against KubeRay's Recreate

Written by `+"`make bench-kind-upgrade`"+` (hack/bench/kind.sh, test/e2e/kindbench_test.go) on %s. One kind
node (a real kubelet and containerd, 2 cores), Kruise %s, the kind suite's fake Ray image. The same RayCluster
each time: one head and %d workers of rayproject/ray:2.46.0, ready, then the head's and the workers' image
changed to %s; measured from that change until every pod runs the new image and is Ready. Worker-seconds not
Ready add up, over the upgrade, how many of the %d workers were not Ready (or absent) and for how long. Drains
are the DrainNode requests sent (kray's DrainingWorker events); restarts are the container restarts of the
pods the upgrade kept. KubeRay's operator is built from its module, at the version named, and runs while kray's
is scaled to 0; both use the same CRDs.

`, time.Now().UTC().Format("2006-01-02"), os.Getenv("KRAY_BENCH_KRUISE_VERSION"), benchWorkers, kindUpgradeImage, benchWorkers)
	fmt.Fprintf(&b, "| upgrade | until every pod runs the new image, Ready | pods created | pods deleted | worker-seconds not Ready | drains sent | restarts of kept pods |\n|---|---|---|---|---|---|---|\n")
	for _, r := range runs {
		fmt.Fprintf(&b, "| %s | %.0f s | %d | %d | %.0f | %d | %d |\n", r.name, r.took.Seconds(), r.created, r.deleted, r.notReady.Seconds(), r.drains, r.restarts)
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
