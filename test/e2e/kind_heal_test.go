package e2e

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/membership"
)

// healingRayCluster is kindRayCluster whose workers' raylets never end on their own within a test: Ray's
// liveness self-check (raylet_liveness_self_check_interval_ms), which ends a raylet whose GCS restarted, runs
// every 10 minutes instead of every minute, so a worker that comes back did so because kray restarted it.
func healingRayCluster(ns, name string, workers int32) *rayv1.RayCluster {
	rc := kindRayCluster(ns, name, workers)
	c := &rc.Spec.WorkerGroupSpecs[0].Template.Spec.Containers[0]
	c.Env = append(c.Env, corev1.EnvVar{Name: "RAY_raylet_liveness_self_check_interval_ms", Value: "600000"})
	return rc
}

// rayNodes lists the nodes the cluster's current GCS reports, by instance ID (the pod name), with their status.
func rayNodes(t *testing.T, rc *rayv1.RayCluster) map[string]string {
	t.Helper()
	return rayNodesOf(t, headPod(NewWithT(t), rc))
}

// rayNodesOf is rayNodes, asked of the GCS in head.
func rayNodesOf(t *testing.T, head *corev1.Pod) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(kubectl(t, "exec", "-n", head.Namespace, head.Name, "-c", "ray-head", "--", "ray", "list", "nodes")), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && out[f[0]] != "IDLE" && out[f[0]] != "RUNNING" {
			out[f[0]] = f[1]
		}
	}
	return out
}

// rayContainerRestarts is the restart count of each worker's Ray container in group (every group when ""),
// by pod name.
func rayContainerRestarts(g Gomega, rc *rayv1.RayCluster, group string) map[string]int32 {
	out := map[string]int32{}
	pods := workerPods(g, rc, group)
	if group == "" {
		pods = allWorkers(g, rc)
	}
	for _, p := range pods {
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name == "ray-worker" {
				out[p.Name] = cs.RestartCount
			}
		}
	}
	return out
}

// expectWorkersRejoin waits until every worker of before (pod name to UID) is live in the cluster's current
// GCS, in the same pod, its Ray container restarted exactly once, by a Kruise ContainerRecreateRequest kray
// made for the replaced head; it returns how long that took from the new head's readiness.
func expectWorkersRejoin(t *testing.T, rc *rayv1.RayCluster, before map[string]types.UID, headReady time.Time) time.Duration {
	t.Helper()
	g := NewWithT(t)
	var took time.Duration
	g.Eventually(func(g Gomega) {
		nodes := rayNodes(t, rc)
		for name := range before {
			g.Expect(nodes[name]).To(BeElementOf("IDLE", "RUNNING"), "worker %s in the new GCS (nodes %v)", name, nodes)
		}
		took = time.Since(headReady)
	}, kindTimeout, time.Second).Should(Succeed())
	g.Expect(uids(workerPods(g, rc, "workergroup"))).To(Equal(before), "the workers keep their pods")
	want := map[string]int32{}
	for name := range before {
		want[name] = 1
	}
	// The raylet registers as soon as its container starts; the kubelet reports the restart on its next status
	// sync, which can come later.
	g.Eventually(func(g Gomega) {
		g.Expect(rayContainerRestarts(g, rc, "workergroup")).To(Equal(want), "each worker's Ray container restarted once")
	}, kindTimeout, time.Second).Should(Succeed())
	crrs := &kruisev1alpha1.ContainerRecreateRequestList{}
	g.Expect(k8s.List(context.Background(), crrs, client.InNamespace(rc.Namespace), client.MatchingLabels{constants.LabelCluster: rc.Name})).To(Succeed())
	restarted := map[string]string{}
	for _, c := range crrs.Items {
		restarted[c.Spec.PodName] = c.Annotations[constants.AnnotationRestartReason]
	}
	for name := range before {
		g.Expect(restarted).To(HaveKeyWithValue(name, "HeadReplaced"), "kray restarted %s for the replaced head", name)
	}
	g.Expect(restarted).To(HaveLen(len(before)), "one restart per worker")
	return took
}

// newHeadReady waits until the head pod is a new one (not old), running and ready, and returns when it
// became ready.
func newHeadReady(t *testing.T, rc *rayv1.RayCluster, old types.UID) time.Time {
	t.Helper()
	var ready time.Time
	NewWithT(t).Eventually(func(g Gomega) {
		p := headPod(g, rc)
		g.Expect(p.UID).NotTo(Equal(old))
		g.Expect(podReady(p)).To(BeTrue())
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady {
				ready = c.LastTransitionTime.Time
			}
		}
	}, kindTimeout, time.Second).Should(Succeed())
	return ready
}

// selfChecks are the liveness self-check intervals of the groups of headLossRayCluster, in milliseconds: Ray's
// own raylets end at the first two within a minute of a new GCS; only kray restarts the last one's.
var selfChecks = []int{5000, 60000, 600000}

// headLossRayCluster is kindRayCluster with one worker in each of the groups named after the self-check
// intervals given (milliseconds), whose raylets self-check at those intervals, and a head whose Ray container
// starts only after an init container has slept as many seconds as the ConfigMap headHold says (none when it
// does not exist): a head that can be kept away.
func headLossRayCluster(ns, name string, checks ...int) *rayv1.RayCluster {
	rc := kindRayCluster(ns, name, 1)
	base := rc.Spec.WorkerGroupSpecs[0]
	rc.Spec.WorkerGroupSpecs = nil
	for _, ms := range checks {
		grp := *base.DeepCopy()
		grp.GroupName = fmt.Sprintf("check%ds", ms/1000)
		c := &grp.Template.Spec.Containers[0]
		c.Env = append(c.Env, corev1.EnvVar{Name: "RAY_raylet_liveness_self_check_interval_ms", Value: strconv.Itoa(ms)})
		rc.Spec.WorkerGroupSpecs = append(rc.Spec.WorkerGroupSpecs, grp)
	}
	head := &rc.Spec.HeadGroupSpec.Template.Spec
	head.Volumes = append(head.Volumes, corev1.Volume{Name: "hold", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: headHold}, Optional: ptr.To(true)}}})
	head.InitContainers = append(head.InitContainers, corev1.Container{
		Name: "hold", Image: head.Containers[0].Image, Command: []string{"sh", "-c", `sleep "$(cat /hold/seconds 2>/dev/null || echo 0)"`},
		VolumeMounts: []corev1.VolumeMount{{Name: "hold", MountPath: "/hold"}},
		Resources:    head.Containers[0].Resources,
	})
	return rc
}

// headHold is the ConfigMap whose key "seconds" keeps a new head of headLossRayCluster away that long.
const headHold = "head-hold"

// allWorkers are the cluster's worker pods.
func allWorkers(g Gomega, rc *rayv1.RayCluster) []corev1.Pod {
	return clusterPods(g, rc, constants.LabelNodeType, constants.NodeTypeWorker)
}

// restartRequests are the reasons of the ContainerRecreateRequests kray made for the cluster's pods, by pod name.
func restartRequests(g Gomega, rc *rayv1.RayCluster) map[string][]string {
	crrs := &kruisev1alpha1.ContainerRecreateRequestList{}
	g.Expect(k8s.List(context.Background(), crrs, client.InNamespace(rc.Namespace), client.MatchingLabels{constants.LabelCluster: rc.Name})).To(Succeed())
	out := map[string][]string{}
	for _, c := range crrs.Items {
		out[c.Spec.PodName] = append(out[c.Spec.PodName], c.Annotations[constants.AnnotationRestartReason])
	}
	return out
}

// expectRestartsThenNone waits until every worker of before has restarted its Ray container exactly want
// times, never more, in its own pod, live in the current GCS; then watches for 90 s more, counted from then or
// from the new head's readiness, whichever is later, that no container restarts again. kray's longest grace
// for a run that joins late is 60 s from its first GCS answer: a restart it wrongly asked for falls inside. It
// returns how long after the new head's readiness every worker was back.
func expectRestartsThenNone(t *testing.T, rc *rayv1.RayCluster, before map[string]types.UID, headReady time.Time, want int32) time.Duration {
	t.Helper()
	g := NewWithT(t)
	wanted := map[string]int32{}
	for name := range before {
		wanted[name] = want
	}
	atMost := func(g Gomega) map[string]int32 {
		got := rayContainerRestarts(g, rc, "")
		for name, n := range got {
			g.Expect(n).To(BeNumerically("<=", want), "worker %s restarted %d times, want %d", name, n, want)
		}
		return got
	}
	g.Eventually(func(g Gomega) {
		g.Expect(atMost(g)).To(Equal(wanted), "each worker's Ray container restarted %d times", want)
		nodes := rayNodes(t, rc)
		for name := range before {
			g.Expect(nodes[name]).To(BeElementOf("IDLE", "RUNNING"), "worker %s in the new GCS (nodes %v)", name, nodes)
		}
	}, kindTimeout, 2*time.Second).Should(Succeed())
	settled := time.Now()
	t.Logf("every worker restarted %d times and in the new GCS %s after the new head became ready", want, settled.Sub(headReady).Round(time.Second))
	g.Consistently(atMost, time.Until(latestOf(settled, headReady).Add(90*time.Second)), 2*time.Second).Should(Equal(wanted), "no more restarts")
	g.Expect(uids(allWorkers(g, rc))).To(Equal(before), "the workers keep their pods")
	return settled.Sub(headReady)
}

// waitBound waits until kray has had the time to bind each worker's Ray run to the cluster ID of the head's
// GCS: it asks the GCS membership.BindAfter after it first saw a run with the head ready, which is at or after
// both the run started and the head became ready; 10 s more cover its reconcile and its view of the pods.
func waitBound(t *testing.T, rc *rayv1.RayCluster) {
	t.Helper()
	g := NewWithT(t)
	var latest time.Time
	for _, p := range append(allWorkers(g, rc), *headByLabel(g, rc)) {
		for _, cs := range p.Status.ContainerStatuses {
			if cs.State.Running != nil && cs.State.Running.StartedAt.After(latest) {
				latest = cs.State.Running.StartedAt.Time
			}
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.LastTransitionTime.After(latest) {
				latest = c.LastTransitionTime.Time
			}
		}
	}
	time.Sleep(time.Until(latest.Add(membership.BindAfter + 10*time.Second)))
}

// latestOf is the later of a and b.
func latestOf(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// kuberay#1141 with a real kubelet, and what kray must never do about it. A head pod deleted without GCS fault
// tolerance comes back as a new GCS, of a new cluster ID, that knows none of the workers: each worker's Ray
// container restarts exactly once, and never again in the 90 s after. kray bound each worker's run to the old
// cluster ID, so it restarts in place at the new GCS's first answer every run Ray has not ended yet (at its
// liveness self-check, every 5 s, 60 s and 10 minutes here): the workers are back well within the 75 s kray
// gives a run it could not bind. A worker restarted 10 s before the head goes is too recent to bind: Ray's own
// 60 s self-check ends it, and kray asks for nothing. A head kept away longer than Ray's 60 s reconnect timeout
// (a second cluster, beside): every raylet ends on its own, its new run waits for the GCS and joins it, and kray
// asks for no restart at all.
func TestKindHeadLossRestartsEachWorkerOnce(t *testing.T) {
	requireKind(t)
	t.Parallel()
	t.Cleanup(func() { expectOperatorNeverForbidden(t) }) // once both subtests are done
	t.Run("replaced", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		rc := create(t, headLossRayCluster(kindNamespace(t), "heal", selfChecks...))
		waitKindReady(t, rc, len(selfChecks))
		waitBound(t, rc)
		before := uids(allWorkers(g, rc))
		byGroup := map[string]string{}
		for _, p := range allWorkers(g, rc) {
			byGroup[p.Labels[constants.LabelGroup]] = p.Name
		}
		old := headPod(g, rc)
		g.Expect(k8s.Delete(context.Background(), old)).To(Succeed())
		back := expectRestartsThenNone(t, rc, before, newHeadReady(t, rc, old.UID), 1)
		asked := restartRequests(g, rc)
		t.Logf("restarts kray asked for: %v", asked)
		g.Expect(asked).To(HaveKeyWithValue(byGroup["check600s"], []string{"HeadReplaced"}),
			"kray restarts at once the worker Ray would leave out for ten minutes")
		for pod, reasons := range asked {
			g.Expect(reasons).To(Equal([]string{"HeadReplaced"}), "one restart of %s, for the replaced head", pod)
		}
		g.Expect(back).To(BeNumerically("<", membership.DefaultHeadReplacedGrace),
			"the workers are back before the grace of a run kray could not bind: kray did not wait for it")
		created, deleted := ledger.counts(t, rc)
		g.Expect(created).To(Equal(1+len(selfChecks)+1), "one replacement head, nothing else")
		g.Expect(deleted).To(Equal(1), "only the deleted head is gone")
	})
	t.Run("restarted just before", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		rc := create(t, headLossRayCluster(kindNamespace(t), "fresh", 60000))
		waitKindReady(t, rc, 1)
		before := uids(allWorkers(g, rc))
		w := allWorkers(g, rc)[0]
		// A restart of the test's own, not kray's: the new run registers with the GCS that is about to go,
		// too recently for kray to bind it, so kray cannot tell it from one waiting for the next GCS.
		own := &kruisev1alpha1.ContainerRecreateRequest{ObjectMeta: metav1.ObjectMeta{Namespace: rc.Namespace, Name: "restart-before"},
			Spec: kruisev1alpha1.ContainerRecreateRequestSpec{PodName: w.Name, Containers: []kruisev1alpha1.ContainerRecreateRequestContainer{{Name: "ray-worker"}}}}
		g.Expect(k8s.Create(context.Background(), own)).To(Succeed())
		var started time.Time
		g.Eventually(func(g Gomega) {
			g.Expect(rayContainerRestarts(g, rc, "")).To(HaveKeyWithValue(w.Name, int32(1)))
			g.Expect(rayNodes(t, rc)).To(HaveKeyWithValue(w.Name, BeElementOf("IDLE", "RUNNING")))
			p := allWorkers(g, rc)[0]
			for _, cs := range p.Status.ContainerStatuses {
				if cs.Name == "ray-worker" && cs.State.Running != nil {
					started = cs.State.Running.StartedAt.Time
				}
			}
			g.Expect(started).NotTo(BeZero())
		}, kindTimeout, time.Second).Should(Succeed())
		time.Sleep(time.Until(started.Add(10 * time.Second)))
		old := headPod(g, rc)
		g.Expect(k8s.Delete(context.Background(), old)).To(Succeed())
		expectRestartsThenNone(t, rc, before, newHeadReady(t, rc, old.UID), 2)
		g.Expect(restartRequests(g, rc)).To(BeEmpty(), "Ray's own self-check ends the run before kray's grace does")
	})
	t.Run("kept away", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		rc := create(t, headLossRayCluster(kindNamespace(t), "away", 60000))
		waitKindReady(t, rc, 1)
		before := uids(allWorkers(g, rc))
		hold := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: rc.Namespace, Name: headHold}, Data: map[string]string{"seconds": "75"}}
		g.Expect(k8s.Create(context.Background(), hold)).To(Succeed())
		old := headPod(g, rc)
		g.Expect(k8s.Delete(context.Background(), old)).To(Succeed())
		expectRestartsThenNone(t, rc, before, newHeadReady(t, rc, old.UID), 1)
		g.Expect(restartRequests(g, rc)).To(BeEmpty(), "kray asks for no restart of workers that rejoin a head kept away")
		created, deleted := ledger.counts(t, rc)
		g.Expect(created).To(Equal(1+1+1), "one replacement head, nothing else")
		g.Expect(deleted).To(Equal(1), "only the deleted head is gone")
	})
}

// ray#64349 with a real kubelet, under GCS fault tolerance (a real Redis): the head pod deleted, the workers'
// raylets reconnect to the new GCS, which kept them in Redis, and they are not touched; a worker whose Ray
// container runs but never joins (a zombie: running, not ready) is restarted in place once it has been out for
// the grace period, and joins. The zombie is the group's third worker, added with a template whose first run
// of a container is a zombie (the fake Ray's marker file, kept in an emptyDir); under upgradeStrategy None the
// first two keep their template.
func TestKindZombieWorkerIsRestartedOnceUnderFaultTolerance(t *testing.T) {
	requireKind(t)
	t.Parallel()
	g := NewWithT(t)
	rc := healingRayCluster(kindNamespace(t), "zombie", 2)
	faultTolerant(t, rc)
	rc = create(t, rc)
	waitKindReady(t, rc, 2)
	healthy := uids(workerPods(g, rc, "workergroup"))
	update(t, rc, func(rc *rayv1.RayCluster) {
		grp := &rc.Spec.WorkerGroupSpecs[0]
		grp.Replicas = ptr.To[int32](3)
		spec := &grp.Template.Spec
		spec.Volumes = append(spec.Volumes, corev1.Volume{Name: "zombie", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
		c := &spec.Containers[0]
		c.Env = append(c.Env, corev1.EnvVar{Name: "FAKERAY_ZOMBIE_MARKER", Value: "/zombie/marker"})
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "zombie", MountPath: "/zombie"})
	})
	var zombie string
	g.Eventually(func(g Gomega) {
		for _, p := range workerPods(g, rc, "workergroup") {
			if _, ok := healthy[p.Name]; !ok {
				zombie = p.Name
			}
		}
		g.Expect(zombie).NotTo(BeEmpty())
	}, kindTimeout, time.Second).Should(Succeed())

	old := headPod(g, rc)
	g.Expect(k8s.Delete(context.Background(), old)).To(Succeed())
	newHeadReady(t, rc, old.UID)
	g.Eventually(func(g Gomega) {
		nodes := rayNodes(t, rc)
		for _, w := range append(podNames(workerPods(g, rc, "workergroup")), zombie) {
			g.Expect(nodes).To(HaveKeyWithValue(w, BeElementOf("IDLE", "RUNNING")), "worker %s in the new GCS", w)
		}
	}, kindTimeout, time.Second).Should(Succeed(), "the workers reconnect, the zombie is restarted and joins")
	waitKindReady(t, rc, 3)
	want := map[string]int32{zombie: 1}
	for name := range healthy {
		want[name] = 0
	}
	g.Expect(rayContainerRestarts(g, rc, "workergroup")).To(Equal(want), "only the zombie's Ray container restarted, once")
	g.Expect(uids(workerPods(g, rc, "workergroup"))).To(HaveLen(3))
	crrs := &kruisev1alpha1.ContainerRecreateRequestList{}
	g.Expect(k8s.List(context.Background(), crrs, client.InNamespace(rc.Namespace), client.MatchingLabels{constants.LabelCluster: rc.Name})).To(Succeed())
	g.Expect(crrs.Items).To(HaveLen(1))
	g.Expect(crrs.Items[0].Spec.PodName).To(Equal(zombie))
	g.Expect(crrs.Items[0].Annotations).To(HaveKeyWithValue(constants.AnnotationRestartReason, "NotInGCS"))
	expectOperatorNeverForbidden(t)
}

// faultTolerant gives rc GCS fault tolerance on a Redis of its own namespace (kindRedis) and, after the test
// (passed or failed), deletes rc before its namespace goes: its Redis cleanup Job (Ray's cleanup_redis_storage) needs the
// Redis, and the cluster goes once the Job is done.
func faultTolerant(t *testing.T, rc *rayv1.RayCluster) {
	t.Helper()
	rc.Spec.GcsFaultToleranceOptions = &rayv1.GcsFaultToleranceOptions{RedisAddress: kindRedis(t, rc.Namespace)}
	t.Cleanup(func() {
		g := NewWithT(t)
		g.Expect(client.IgnoreNotFound(k8s.Delete(context.Background(), rc))).To(Succeed())
		g.Eventually(func() bool {
			return apierrors.IsNotFound(k8s.Get(context.Background(), client.ObjectKeyFromObject(rc), &rayv1.RayCluster{}))
		}, kindTimeout, time.Second).Should(BeTrue(), "the cluster must go once its Redis data is deleted")
	})
}

// kindRedis runs Debian's redis-server (the kind suite's image KRAY_KIND_REDIS_IMAGE, hack/kind-e2e.sh) in ns behind a Service, waits
// until it is ready, and returns its address.
func kindRedis(t *testing.T, ns string) string {
	t.Helper()
	g := NewWithT(t)
	labels := map[string]string{"app": "redis"}
	port := corev1.ContainerPort{Name: "redis", ContainerPort: 6379}
	objs := []client.Object{
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "redis"},
			Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "redis", Image: os.Getenv("KRAY_KIND_REDIS_IMAGE"),
						Args:           []string{"--port", "6379", "--protected-mode", "no", "--save", "", "--appendonly", "no"},
						Ports:          []corev1.ContainerPort{port},
						ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(6379)}}, PeriodSeconds: 1},
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
							corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")}},
					}},
				}}}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "redis"},
			Spec: corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Name: "redis", Port: 6379, TargetPort: intstr.FromInt32(6379)}}}},
	}
	for _, o := range objs {
		g.Expect(k8s.Create(context.Background(), o)).To(Succeed())
	}
	g.Eventually(func(g Gomega) {
		d := &appsv1.Deployment{}
		g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "redis"}, d)).To(Succeed())
		g.Expect(d.Status.ReadyReplicas).To(BeEquivalentTo(1))
	}, kindTimeout, time.Second).Should(Succeed())
	return "redis:6379"
}
