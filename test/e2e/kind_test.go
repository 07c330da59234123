package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/membership"
)

// The kind suite (make kind-e2e, and make test after the local cluster's suites): the operator runs from its
// chart in a kind cluster whose kubelets start real containers of the fake Ray image (test/kind/fakeray), so
// probes, init containers, evictions and container stops are the kubelet's own.

// kindTimeout bounds waits on real containers: image unpacking, init containers and probe periods.
const kindTimeout = 3 * time.Minute

// kindOperatorNS and kindDeployment are where hack/kind.sh installs the operator from charts/kray.
const (
	kindOperatorNS = "kray-system"
	kindDeployment = "kray"
)

// requireKind skips a test outside the kind suite.
func requireKind(t *testing.T) {
	t.Helper()
	if os.Getenv("KRAY_E2E_KIND") != "1" {
		t.Skip("needs the kind cluster with real kubelets (make kind-e2e)")
	}
}

// kindRayCluster is a RayCluster small enough for a kind node: the fake Ray image, 10m CPU per container, a
// head whose ephemeral storage is limited to 64Mi and one group of workers. Each worker still requests 200m
// CPU for its wait-gcs-ready init container (KubeRay's fixed resources), so the two-core control-plane node
// holds about four workers and the worker node about nine; the suite runs KRAY_KIND_PARALLEL (3) tests at
// once, and kindNamespace waits for a test's pods to be gone.
func kindRayCluster(ns, name string, workers int32) *rayv1.RayCluster {
	small := func(storage bool) corev1.ResourceRequirements {
		r := corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
		}
		if storage {
			r.Limits[corev1.ResourceEphemeralStorage] = resource.MustParse("64Mi")
		}
		return r
	}
	container := func(name string, storage bool) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: name, Image: "rayproject/ray:2.46.0", Resources: small(storage),
		}}}}
	}
	return &rayv1.RayCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: rayv1.RayClusterSpec{
			RayVersion:    "2.46.0",
			HeadGroupSpec: rayv1.HeadGroupSpec{RayStartParams: map[string]string{}, Template: container("ray-head", true)},
			WorkerGroupSpecs: []rayv1.WorkerGroupSpec{{
				GroupName: "workergroup", Replicas: ptr.To(workers), MinReplicas: ptr.To[int32](0), MaxReplicas: ptr.To[int32](10),
				RayStartParams: map[string]string{}, Template: container("ray-worker", false),
			}},
		},
	}
}

// kindNamespace is namespace, and after the test waits until the namespace is gone, so the next test has the
// node's CPU. A failed test's namespace goes too, once its pods, events and restart requests are in the test's
// log: pods left running on the one node would keep the next tests' pods Pending. Before that, the kubelet's
// probe events in it are audited (auditProbes).
func kindNamespace(t *testing.T) string {
	t.Helper()
	var name string
	t.Cleanup(func() {
		NewWithT(t).Eventually(func() bool {
			err := k8s.Get(context.Background(), client.ObjectKey{Name: name}, &corev1.Namespace{})
			return apierrors.IsNotFound(err)
		}, kindTimeout, time.Second).Should(BeTrue(), "namespace %s must be deleted", name)
	})
	name = namespace(t)
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, args := range [][]string{
			{"get", "pods", "-o", "wide"},
			{"get", "events", "--sort-by=.lastTimestamp"},
			{"get", "containerrecreaterequests", "-o", "yaml"},
		} {
			out, _ := exec.Command(filepath.Join(repoRoot, "bin", "kubectl"), append(args, "-n", name)...).CombinedOutput()
			t.Logf("kubectl %s -n %s:\n%s", strings.Join(args, " "), name, out)
		}
		_ = k8s.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	})
	t.Cleanup(func() { auditProbes(t, name) }) // first, so that a kill it finds is in the failed test's log
	return name
}

// waitKindReady is waitReady with kindTimeout.
func waitKindReady(t *testing.T, rc *rayv1.RayCluster, workers int) {
	t.Helper()
	waitReadyWithin(t, rc, workers, kindTimeout, time.Second)
}

// kubectl runs the kubectl of bin/ (the version the kind node runs) against the suite's cluster.
func kubectl(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(repoRoot, "bin", "kubectl"), args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	return out.String()
}

// watchPod records every phase and reason the pod of that UID is seen with, from a watch started now, so a
// state that lasts less than a poll is still seen.
func watchPod(t *testing.T, p *corev1.Pod) func() []string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w, err := watcher.Watch(ctx, &corev1.PodList{}, client.InNamespace(p.Namespace),
		client.MatchingFields{"metadata.name": p.Name})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []string
	go func() {
		for ev := range w.ResultChan() {
			cur, ok := ev.Object.(*corev1.Pod)
			if !ok || cur.UID != p.UID {
				continue
			}
			s := string(cur.Status.Phase) + "/" + cur.Status.Reason
			mu.Lock()
			if len(seen) == 0 || seen[len(seen)-1] != s {
				seen = append(seen, s)
			}
			mu.Unlock()
		}
	}()
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), seen...)
	}
}

// operatorPods lists the pods of the operator's Deployment.
func operatorPods(g Gomega) []corev1.Pod {
	list, err := clientset.CoreV1().Pods(kindOperatorNS).List(context.Background(), metav1.ListOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	var pods []corev1.Pod
	for _, p := range list.Items {
		if strings.HasPrefix(p.Name, kindDeployment+"-") {
			pods = append(pods, p)
		}
	}
	return pods
}

// expectOperatorNeverForbidden fails the test when the running operator's log carries an API server refusal:
// the chart's RBAC must grant everything the operator does.
func expectOperatorNeverForbidden(t *testing.T) {
	t.Helper()
	for _, p := range operatorPods(NewWithT(t)) {
		logs, err := clientset.CoreV1().Pods(kindOperatorNS).GetLogs(p.Name, &corev1.PodLogOptions{}).DoRaw(context.Background())
		if err != nil {
			t.Fatalf("logs of %s: %v", p.Name, err)
		}
		for _, line := range strings.Split(string(logs), "\n") {
			if strings.Contains(line, "forbidden") || strings.Contains(line, " 403") {
				t.Errorf("operator %s was refused by the API server: %s", p.Name, line)
			}
		}
	}
}

// The second seed with a real kubelet: the head writes past its ephemeral-storage limit, the kubelet itself
// evicts it (Failed, reason Evicted), and kray's head workload replaces it; the workers keep their pods, and
// kray, which bound their runs to the lost head's cluster ID, brings them back into the new head's GCS at once
// (kind_heal_test.go).
func TestKindHeadEvictedByKubeletIsReplaced(t *testing.T) {
	requireKind(t)
	t.Parallel()
	g := NewWithT(t)
	rc := create(t, healingRayCluster(kindNamespace(t), "evict", 2))
	waitKindReady(t, rc, 2)
	waitBound(t, rc)
	old := headPod(g, rc)
	workers := uids(workerPods(g, rc, "workergroup"))
	seen := watchPod(t, old)

	// 96Mi into the container's writable layer, past its 64Mi limit; the kubelet's eviction manager measures
	// it on its next pass.
	kubectl(t, "exec", "-n", old.Namespace, old.Name, "-c", "ray-head", "--",
		"dd", "if=/dev/zero", "of=/tmp/fill", "bs=1M", "count=96")
	g.Eventually(seen, kindTimeout, time.Second).Should(ContainElement("Failed/Evicted"),
		"the kubelet must evict the head")
	ready := newHeadReady(t, rc, old.UID)
	g.Expect(headPod(g, rc).Status.Phase).To(Equal(corev1.PodRunning))
	took := expectWorkersRejoin(t, rc, workers, ready)
	t.Logf("every worker live in the new GCS %s after the new head became ready", took.Round(time.Second))
	g.Expect(took).To(BeNumerically("<", membership.DefaultHeadReplacedGrace), "kray restarts the workers bound to the lost head's cluster at once")
	waitKindReady(t, rc, 2)
	created, deleted := ledger.counts(t, rc)
	g.Expect(created).To(Equal(1+2+1), "one replacement head, nothing else")
	g.Expect(deleted).To(Equal(1), "only the evicted head is gone")
	expectOperatorNeverForbidden(t)
}

// The autoscaler's patch (fewer replicas and workersToDelete) removes exactly the named workers: their
// containers are stopped by the kubelet and the pods are gone; the others keep running untouched.
func TestKindAutoscalerPatchRemovesNamedWorkers(t *testing.T) {
	requireKind(t)
	t.Parallel()
	g := NewWithT(t)
	rc := create(t, kindRayCluster(kindNamespace(t), "scale", 3))
	waitKindReady(t, rc, 3)
	before := workerPods(g, rc, "workergroup")
	victims := []string{before[0].Name, before[2].Name}
	keep := map[string]types.UID{before[1].Name: before[1].UID}
	update(t, rc, func(c *rayv1.RayCluster) {
		c.Spec.WorkerGroupSpecs[0].Replicas = ptr.To[int32](1)
		c.Spec.WorkerGroupSpecs[0].ScaleStrategy.WorkersToDelete = victims
	})
	g.Eventually(func(g Gomega) {
		g.Expect(uids(workerPods(g, rc, "workergroup"))).To(Equal(keep))
	}, kindTimeout, time.Second).Should(Succeed())
	waitKindReady(t, rc, 1)
	g.Expect(ledger.deletedNames(t, rc)).To(ConsistOf(victims))
	created, _ := ledger.counts(t, rc)
	g.Expect(created).To(Equal(1 + 3))
	expectOperatorNeverForbidden(t)
}

// No double creation across an operator pod killed in the middle of a scale-up: the Deployment's
// replacement takes over (after the dead pod's leader lease runs out) and every pod is created once.
func TestKindOperatorPodKilledDuringScaleUp(t *testing.T) {
	requireKind(t)
	g := NewWithT(t)
	rc := create(t, kindRayCluster(kindNamespace(t), "killed", 1))
	waitKindReady(t, rc, 1)
	operators := operatorPods(g)
	update(t, rc, func(c *rayv1.RayCluster) { c.Spec.WorkerGroupSpecs[0].Replicas = ptr.To[int32](4) })
	for _, p := range operators {
		kubectl(t, "delete", "pod", "-n", kindOperatorNS, p.Name, "--grace-period=0", "--force", "--wait=false")
	}
	waitKindReady(t, rc, 4)
	created, deleted := ledger.counts(t, rc)
	g.Expect(created).To(Equal(1 + 4))
	g.Expect(deleted).To(BeZero())
	g.Expect(operators).NotTo(BeEmpty())
	g.Eventually(func(g Gomega) {
		var fresh int
		for _, p := range operatorPods(g) {
			for _, o := range operators {
				g.Expect(p.UID).NotTo(Equal(o.UID), "the killed operator pod must be gone")
			}
			if podReady(&p) {
				fresh++
			}
		}
		g.Expect(fresh).To(Equal(1), "the Deployment must have replaced the operator pod")
	}, kindTimeout, time.Second).Should(Succeed())
	expectOperatorNeverForbidden(t)
}

// A RayJob in K8sJobMode: the submitter Job's container really runs `ray job submit` against the head's
// dashboard, the entrypoint really runs in the head, and the RayJob completes with the job's status.
func TestKindRayJobSubmitterRunsTheJob(t *testing.T) {
	requireKind(t)
	t.Parallel()
	g := NewWithT(t)
	ns := kindNamespace(t)
	rc := kindRayCluster(ns, "", 1)
	job := &rayv1.RayJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "job"},
		Spec: rayv1.RayJobSpec{
			Entrypoint:     "echo kind-job-ran-on-$(hostname) && sleep 2",
			RayClusterSpec: &rc.Spec,
		},
	}
	g.Expect(k8s.Create(context.Background(), job)).To(Succeed())
	g.Eventually(func(g Gomega) {
		cur := &rayv1.RayJob{}
		g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(job), cur)).To(Succeed())
		g.Expect(cur.Status.JobStatus).To(Equal(rayv1.JobStatusSucceeded))
		g.Expect(cur.Status.JobDeploymentStatus).To(Equal(rayv1.JobDeploymentStatusComplete))
	}, kindTimeout, time.Second).Should(Succeed())

	submitter := &batchv1.Job{}
	g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(job), submitter)).To(Succeed())
	g.Expect(submitter.Status.Succeeded).To(BeNumerically(">=", 1))
	pods, err := clientset.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "job-name=" + submitter.Name})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pods.Items).NotTo(BeEmpty())
	logs, err := clientset.CoreV1().Pods(ns).GetLogs(pods.Items[0].Name, &corev1.PodLogOptions{}).DoRaw(context.Background())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(logs)).To(ContainSubstring("submitted successfully"))
	g.Expect(string(logs)).To(ContainSubstring("kind-job-ran-on-"+job.Name), "the entrypoint's output, from the head")
	expectOperatorNeverForbidden(t)
}
