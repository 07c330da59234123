package e2e

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rayv1 "github.com/kray-project/kray/api/v1"
)

// The real Kueue (hack/cluster.sh start-kueue) with its ray.io/raycluster and ray.io/rayjob integrations
// runs beside kray. It has no webhook configuration, so the tests create workloads suspended, as Kueue's
// mutating webhook would.
const (
	kueueGroup       = "kueue.x-k8s.io"
	kueueVersion     = "v1beta2"
	labelQueueName   = "kueue.x-k8s.io/queue-name"
	labelPriorityCls = "kueue.x-k8s.io/priority-class"
	labelPodSet      = "kueue.x-k8s.io/podset"
	kueueTimeout     = 2 * time.Minute
)

// needKueue skips a test that needs the Kueue manager hack/e2e.sh starts.
func needKueue(t *testing.T) {
	t.Helper()
	if os.Getenv("KRAY_E2E_KUEUE") != "1" {
		t.Skip("needs the Kueue manager that hack/e2e.sh starts (KRAY_E2E_KUEUE=1)")
	}
}

// kueueObject is an unstructured Kueue object of kind, named name, with the given top-level fields.
func kueueObject(kind, ns, name string, fields map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	for k, v := range fields {
		u.Object[k] = v
	}
	u.SetAPIVersion(kueueGroup + "/" + kueueVersion)
	u.SetKind(kind)
	u.SetName(name)
	u.SetNamespace(ns)
	return u
}

// kueueQueues creates a ResourceFlavor, a ClusterQueue with cpu quota (preempting lower priorities within
// it) and a LocalQueue "user-queue" in ns, all removed after the test.
func kueueQueues(t *testing.T, ns, cpu string) {
	t.Helper()
	ctx := context.Background()
	cq := "cq-" + ns
	objs := []*unstructured.Unstructured{
		kueueObject("ResourceFlavor", "", "default-flavor", map[string]any{"spec": map[string]any{}}),
		kueueObject("ClusterQueue", "", cq, map[string]any{"spec": map[string]any{
			"namespaceSelector": map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": ns}},
			"preemption":        map[string]any{"withinClusterQueue": "LowerPriority"},
			"resourceGroups": []any{map[string]any{
				"coveredResources": []any{"cpu", "memory"},
				"flavors": []any{map[string]any{"name": "default-flavor", "resources": []any{
					map[string]any{"name": "cpu", "nominalQuota": cpu},
					map[string]any{"name": "memory", "nominalQuota": "1Ti"},
				}}},
			}},
		}}),
		kueueObject("LocalQueue", ns, "user-queue", map[string]any{"spec": map[string]any{"clusterQueue": cq}}),
		kueueObject("WorkloadPriorityClass", "", "kray-e2e-high", map[string]any{"value": int64(1000)}),
	}
	for _, o := range objs {
		if err := k8s.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("create %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
	t.Cleanup(func() {
		_ = k8s.Delete(ctx, kueueObject("ClusterQueue", "", cq, nil))
	})
}

// queuedCluster is the RayCluster sample with one worker (2 CPUs in all) in queue user-queue, created
// suspended.
func queuedCluster(t *testing.T, ns, name string, labels map[string]string) *rayv1.RayCluster {
	t.Helper()
	rc := loadSample(t, "ray-cluster.sample.yaml", ns)
	rc.Name = name
	rc.Labels = map[string]string{labelQueueName: "user-queue"}
	for k, v := range labels {
		rc.Labels[k] = v
	}
	rc.Spec.Suspend = ptr.To(true)
	w := group(rc)
	w.Replicas, w.MinReplicas, w.MaxReplicas = ptr.To[int32](1), ptr.To[int32](1), ptr.To[int32](1)
	return create(t, rc)
}

func suspended(g Gomega, rc *rayv1.RayCluster) bool {
	return ptr.Deref(get(g, rc).Spec.Suspend, false)
}

// expectQueued checks, for a while, that rc stays suspended without pods.
func expectQueued(t *testing.T, rc *rayv1.RayCluster) {
	t.Helper()
	NewWithT(t).Consistently(func(g Gomega) {
		g.Expect(suspended(g, rc)).To(BeTrue(), "%s was admitted", rc.Name)
		g.Expect(clusterPods(g, rc)).To(BeEmpty())
	}, 3*time.Second, poll).Should(Succeed())
}

// Queued while over quota, admitted and ready (Kueue's labels on kray's pods), preempted by a higher
// priority (suspended, pods gone, state leaves ready, quota released), re-admitted, deleted. The ledger
// counts the pods: none while suspended.
func TestKueueQueuesAdmitsAndPreemptsRayClusters(t *testing.T) {
	t.Parallel()
	needKueue(t)
	g := NewWithT(t)
	ns := namespace(t)
	kueueQueues(t, ns, "2") // exactly one 2-CPU cluster
	first := queuedCluster(t, ns, "first", nil)
	g.Eventually(func(g Gomega) { g.Expect(suspended(g, first)).To(BeFalse()) }, kueueTimeout, poll).Should(Succeed())
	waitReady(t, first, 1)
	for _, p := range clusterPods(g, first) {
		g.Expect(p.Labels).To(HaveKey(labelPodSet), "pod %s lacks Kueue's podset label", p.Name)
	}

	second := queuedCluster(t, ns, "second", nil)
	expectQueued(t, second)

	g.Expect(k8s.Delete(context.Background(), first)).To(Succeed())
	g.Eventually(func(g Gomega) { g.Expect(suspended(g, second)).To(BeFalse()) }, kueueTimeout, poll).Should(Succeed())
	waitReady(t, second, 1)

	urgent := queuedCluster(t, ns, "urgent", map[string]string{labelPriorityCls: "kray-e2e-high"})
	g.Eventually(func(g Gomega) {
		g.Expect(suspended(g, second)).To(BeTrue(), "the lower priority cluster is preempted")
		g.Expect(clusterPods(g, second)).To(BeEmpty())
		g.Expect(get(g, second).Status.State).NotTo(Equal(rayv1.Ready))
	}, kueueTimeout, poll).Should(Succeed())
	g.Eventually(func(g Gomega) { g.Expect(suspended(g, urgent)).To(BeFalse()) }, kueueTimeout, poll).Should(Succeed())
	waitReady(t, urgent, 1)

	g.Expect(k8s.Delete(context.Background(), urgent)).To(Succeed())
	g.Eventually(func(g Gomega) { g.Expect(suspended(g, second)).To(BeFalse()) }, kueueTimeout, poll).Should(Succeed())
	waitReady(t, second, 1)

	for _, rc := range []*rayv1.RayCluster{first, second, urgent} {
		ledger.settle(t, rc)
		created, deleted := ledger.counts(t, rc)
		t.Logf("%s: %d pods created, %d deleted", rc.Name, created, deleted)
	}
	// first ran once (2 pods); second ran twice (2 + 2, the first pair deleted by the preemption);
	// urgent ran once.
	for _, c := range []struct {
		rc               *rayv1.RayCluster
		created, deleted int
	}{{first, 2, 2}, {second, 4, 2}, {urgent, 2, 2}} {
		created, deleted := ledger.counts(t, c.rc)
		g.Expect(created).To(Equal(c.created), "%s: pods created", c.rc.Name)
		g.Expect(deleted).To(Equal(c.deleted), "%s: pods deleted", c.rc.Name)
	}
	g.Expect(k8s.Delete(context.Background(), second)).To(Succeed())
}

// A RayJob queued by Kueue gets no cluster until admitted; admitted, it runs to Complete; a second RayJob
// waits for the first one's quota and then runs too.
func TestKueueRunsRayJobs(t *testing.T) {
	needKueue(t)
	needFakeDashboard(t)
	g := NewWithT(t)
	ns := namespace(t)
	kueueQueues(t, ns, "2")
	clusters := watchCreations(t, ns, &rayv1.RayClusterList{})
	var jobs []*rayv1.RayJob
	for i := 1; i <= 2; i++ {
		spec := rayJob(t, ns, fmt.Sprintf("queued-%d", i), rayv1.HTTPMode, func(j *rayv1.RayJob) {
			j.Labels = map[string]string{labelQueueName: "user-queue"}
			j.Spec.Suspend = true
			j.Spec.ShutdownAfterJobFinishes = true
			j.Spec.RayClusterSpec.WorkerGroupSpecs[0].MinReplicas = ptr.To[int32](1)
			j.Spec.RayClusterSpec.WorkerGroupSpecs[0].MaxReplicas = ptr.To[int32](1)
		})
		dash.plan(spec.Spec.Entrypoint, jobPlan{runFor: 5 * time.Second, outcome: rayv1.JobStatusSucceeded})
		jobs = append(jobs, createJob(t, spec))
	}
	// One fits: exactly one is admitted and running while the other waits suspended with no cluster.
	var running, waiting *rayv1.RayJob
	g.Eventually(func(g Gomega) {
		a, b := getJob(g, jobs[0]), getJob(g, jobs[1])
		g.Expect(a.Spec.Suspend != b.Spec.Suspend).To(BeTrue(), "one admitted, one queued")
		running, waiting = a, b
		if a.Spec.Suspend {
			running, waiting = b, a
		}
		g.Expect(running.Status.JobDeploymentStatus).To(Equal(rayv1.JobDeploymentStatusRunning))
	}, kueueTimeout, poll).Should(Succeed())
	g.Expect(getJob(g, waiting).Status.JobDeploymentStatus).To(Equal(rayv1.JobDeploymentStatusSuspended))
	g.Expect(clusters.created()).To(HaveLen(1))

	waitJobState(t, running, rayv1.JobDeploymentStatusComplete)
	g.Eventually(func(g Gomega) { g.Expect(getJob(g, waiting).Spec.Suspend).To(BeFalse()) }, kueueTimeout, poll).Should(Succeed())
	done := waitJobState(t, waiting, rayv1.JobDeploymentStatusComplete)
	g.Expect(done.Status.JobStatus).To(Equal(rayv1.JobStatusSucceeded))
	g.Expect(clusters.created()).To(HaveLen(2), "one cluster per RayJob")
	for _, j := range jobs {
		g.Expect(dash.acceptedWithPrefix(j.Name+"-")).To(HaveLen(1), "%s: submissions", j.Name)
	}
}

// Kueue's admission is a JSON merge patch built from KubeRay's types, which replaces workerGroupSpecs: a
// group's rollingUpdate is not in it. The settings kray keeps in annotations go on applying after admission.
func TestKueueAdmissionKeepsKrayExtensions(t *testing.T) {
	t.Parallel()
	needKueue(t)
	g := NewWithT(t)
	ns := namespace(t)
	kueueQueues(t, ns, "2")
	rc := loadSample(t, "ray-cluster.sample.yaml", ns)
	rc.Labels = map[string]string{labelQueueName: "user-queue"}
	rc.Spec.Suspend = ptr.To(true)
	rc.Spec.UpgradeStrategy = &rayv1.RayClusterUpgradeStrategy{Type: ptr.To(rayv1.RayClusterUpgradeType("RollingUpdate"))}
	rc.Spec.WorkerDrain = &rayv1.WorkerDrainOptions{TimeoutSeconds: ptr.To[int32](120)}
	two := intstr.FromInt32(2)
	w := group(rc)
	w.Replicas, w.MinReplicas, w.MaxReplicas = ptr.To[int32](1), ptr.To[int32](1), ptr.To[int32](1)
	w.RollingUpdate = &rayv1.WorkerGroupRollingUpdate{MaxUnavailable: &two}
	create(t, rc)
	g.Eventually(func(g Gomega) { g.Expect(suspended(g, rc)).To(BeFalse()) }, kueueTimeout, poll).Should(Succeed())
	waitReady(t, rc, 1)
	admitted := get(g, rc)
	t.Logf("after Kueue's admission the spec holds: workerDrain %t, rollingUpdate %t",
		admitted.Spec.WorkerDrain != nil, group(admitted).RollingUpdate != nil)
	g.Eventually(func(g Gomega) {
		var list kruisev1alpha1.CloneSetList
		g.Expect(k8s.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
		g.Expect(list.Items).To(HaveLen(1))
		cs := list.Items[0]
		g.Expect(cs.Spec.Lifecycle).NotTo(BeNil(), "the drain hook")
		g.Expect(cs.Spec.Lifecycle.PreDelete).NotTo(BeNil(), "the drain hook")
		g.Expect(cs.Spec.UpdateStrategy.MaxUnavailable).To(Equal(&two))
	}, readyTimeout, poll).Should(Succeed())
}
