package e2e

import (
	"context"
	"os"
	"testing"
	"time"

	grpcstatus "google.golang.org/grpc/status"

	. "github.com/onsi/gomega"
	kruisepub "github.com/openkruise/kruise-api/apps/pub"
	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	"google.golang.org/grpc/codes"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/internal/controller/raycluster"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/ray"
)

// drainCluster creates a cluster of one group with workers pods and workerDrain set; Ray drains in ns take
// drainTime (negative: never).
func drainCluster(t *testing.T, workers int32, timeout int32, drainTime time.Duration) *rayv1.RayCluster {
	t.Helper()
	needFakeGCS(t)
	ns := namespace(t)
	gcs.setDrainTime(ns, drainTime)
	sample := loadSample(t, "ray-cluster.sample.yaml", ns)
	w := group(sample)
	w.Replicas, w.MinReplicas, w.MaxReplicas = ptr.To(workers), ptr.To[int32](0), ptr.To[int32](10)
	sample.Spec.WorkerDrain = &rayv1.WorkerDrainOptions{TimeoutSeconds: ptr.To(timeout)}
	rc := create(t, sample)
	waitReady(t, rc, int(workers))
	return rc
}

// drainingRollout creates, in ns, the sample cluster under RollingUpdate with workerDrain (timeout seconds),
// workers pods in its group updated as ru says (nil: the defaults), and waits until it is ready.
func drainingRollout(t *testing.T, ns string, workers, timeout int32, ru *rayv1.WorkerGroupRollingUpdate) *rayv1.RayCluster {
	t.Helper()
	sample := sampleWithStrategy(t, ns, rayv1.RayClusterRollingUpdate)
	sample.Spec.WorkerDrain = &rayv1.WorkerDrainOptions{TimeoutSeconds: ptr.To(timeout)}
	w := group(sample)
	w.Replicas, w.MaxReplicas, w.RollingUpdate = ptr.To(workers), ptr.To[int32](10), ru
	rc := create(t, sample)
	waitReady(t, rc, int(workers))
	return rc
}

// needFakeGCS skips a test that drains through the fake Ray GCS, which only an operator running out of
// cluster (hack/e2e.sh) can reach.
func needFakeGCS(t *testing.T) {
	t.Helper()
	if gcs == nil {
		t.Skip("needs the fake Ray GCS that hack/e2e.sh serves to an operator running out of cluster")
	}
}

func podExists(g Gomega, ns, name string) bool {
	err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &corev1.Pod{})
	if apierrors.IsNotFound(err) {
		return false
	}
	g.Expect(err).NotTo(HaveOccurred())
	return true
}

func drainedNames(calls []drainCall, ns string) []string {
	var out []string
	for _, c := range calls {
		out = append(out, c.Pod[len(ns)+1:])
	}
	return out
}

// A named scale-down with workerDrain: kray asks Ray to drain exactly the named pods, Kruise holds them in
// PreparingDelete until Ray reports them drained, and only then are they deleted.
func TestDrainBeforeNamedScaleDown(t *testing.T) {
	const drainTime = 2 * time.Second
	rc := drainCluster(t, 4, 60, drainTime)
	g := NewWithT(t)
	pods := workerPods(g, rc, group(rc).GroupName)
	victims := podNames(pods)[:2]
	keep := podNames(pods)[2:]
	update(t, rc, func(c *rayv1.RayCluster) {
		group(c).Replicas = ptr.To[int32](2)
		group(c).ScaleStrategy.WorkersToDelete = victims
	})

	var calls []drainCall
	g.Eventually(func(g Gomega) {
		calls = gcs.drainedPods(rc.Namespace)
		g.Expect(drainedNames(calls, rc.Namespace)).To(ConsistOf(victims))
	}, readyTimeout, poll).Should(Succeed())
	for _, c := range calls {
		g.Expect(c.Reason).To(Equal(int32(ray.DrainReasonPreemption)))
		g.Expect(c.Deadline).To(BeTemporally("~", c.At.Add(60*time.Second), 2*time.Second))
	}
	for _, name := range victims {
		p := &corev1.Pod{}
		g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: rc.Namespace, Name: name}, p)).To(Succeed())
		g.Expect(p.Labels[constants.LabelKruiseLifecycleState]).To(Equal(constants.KruiseStatePreparingDelete))
	}
	// Until Ray reports the nodes drained, the pods stay.
	last := calls[len(calls)-1].At
	g.Consistently(func(g Gomega) {
		for _, name := range victims {
			g.Expect(podExists(g, rc.Namespace, name)).To(BeTrue(), "pod %s deleted before its node drained", name)
		}
	}, time.Until(last.Add(drainTime-300*time.Millisecond)), poll).Should(Succeed())
	g.Eventually(func(g Gomega) {
		for _, name := range victims {
			g.Expect(podExists(g, rc.Namespace, name)).To(BeFalse(), "pod %s still exists", name)
		}
	}, readyTimeout, poll).Should(Succeed())

	waitReady(t, rc, 2)
	g.Expect(podNames(workerPods(g, rc, group(rc).GroupName))).To(ConsistOf(keep))
	g.Expect(ledger.deletedNames(t, rc)).To(ConsistOf(victims))
	g.Expect(drainedNames(gcs.drainedPods(rc.Namespace), rc.Namespace)).To(ConsistOf(victims), "a drain was asked for a pod nobody named")
	g.Eventually(func(g Gomega) {
		g.Expect(eventCount(g, rc, raycluster.EventDrainingWorker)).To(BeNumerically(">=", 2))
		g.Expect(eventCount(g, rc, raycluster.EventDrainedWorker)).To(BeNumerically(">=", 2))
	}, readyTimeout, poll).Should(Succeed())
}

// A node that never drains holds its pod only until workerDrain.timeoutSeconds.
func TestDrainTimeoutReleasesPod(t *testing.T) {
	t.Parallel()
	const timeout = 3
	rc := drainCluster(t, 2, timeout, -1)
	g := NewWithT(t)
	victim := podNames(workerPods(g, rc, group(rc).GroupName))[0]
	update(t, rc, func(c *rayv1.RayCluster) {
		group(c).Replicas = ptr.To[int32](1)
		group(c).ScaleStrategy.WorkersToDelete = []string{victim}
	})
	var calls []drainCall
	g.Eventually(func(g Gomega) {
		calls = gcs.drainedPods(rc.Namespace)
		g.Expect(drainedNames(calls, rc.Namespace)).To(ConsistOf(victim))
	}, readyTimeout, poll).Should(Succeed())
	// kray records the start with second precision, so the release may come up to 1 s early.
	g.Consistently(func(g Gomega) {
		g.Expect(podExists(g, rc.Namespace, victim)).To(BeTrue(), "released before the timeout")
	}, time.Until(calls[0].At.Add((timeout-1)*time.Second-300*time.Millisecond)), poll).Should(Succeed())
	g.Eventually(func(g Gomega) { g.Expect(podExists(g, rc.Namespace, victim)).To(BeFalse()) }, readyTimeout, poll).Should(Succeed())
	waitReady(t, rc, 1)
	g.Expect(ledger.deletedNames(t, rc)).To(ConsistOf(victim))
	g.Eventually(func(g Gomega) { g.Expect(eventCount(g, rc, raycluster.EventDrainTimedOut)).To(BeNumerically(">=", 1)) }, readyTimeout, poll).Should(Succeed())
}

// Turning workerDrain on for a running cluster (upgradeStrategy None, so no template change reaches the
// pods) still drains its existing workers: kray puts the hook on them.
func TestDrainEnabledOnRunningCluster(t *testing.T) {
	t.Parallel()
	needFakeGCS(t)
	g := NewWithT(t)
	ns := namespace(t)
	gcs.setDrainTime(ns, 500*time.Millisecond)
	sample := loadSample(t, "ray-cluster.sample.yaml", ns)
	group(sample).Replicas, group(sample).MinReplicas, group(sample).MaxReplicas = ptr.To[int32](3), ptr.To[int32](0), ptr.To[int32](10)
	plain := create(t, sample)
	waitReady(t, plain, 3)
	pods := podNames(workerPods(g, plain, group(plain).GroupName))
	update(t, plain, func(c *rayv1.RayCluster) { c.Spec.WorkerDrain = &rayv1.WorkerDrainOptions{} })
	g.Eventually(func(g Gomega) {
		for _, p := range workerPods(g, plain, group(plain).GroupName) {
			g.Expect(p.Labels).To(HaveKeyWithValue(constants.LabelDrainHook, constants.DrainHookValue), "pod %s", p.Name)
		}
	}, readyTimeout, poll).Should(Succeed())
	g.Expect(podNames(workerPods(g, plain, group(plain).GroupName))).To(ConsistOf(pods), "turning the drain on restarted a pod")
	update(t, plain, func(c *rayv1.RayCluster) {
		group(c).Replicas = ptr.To[int32](2)
		group(c).ScaleStrategy.WorkersToDelete = pods[:1]
	})
	g.Eventually(func(g Gomega) { g.Expect(podExists(g, ns, pods[0])).To(BeFalse()) }, readyTimeout, poll).Should(Succeed())
	g.Expect(drainedNames(gcs.drainedPods(ns), ns)).To(ConsistOf(pods[0]))
	waitReady(t, plain, 2)
	g.Expect(ledger.deletedNames(t, plain)).To(ConsistOf(pods[0]))
}

// A rolling recreate (an env change under RollingUpdate) drains each old worker before it goes.
func TestDrainBeforeRollingRecreate(t *testing.T) {
	t.Parallel()
	needFakeGCS(t)
	g := NewWithT(t)
	ns := namespace(t)
	gcs.setDrainTime(ns, 300*time.Millisecond)
	rc := drainingRollout(t, ns, 3, 60, &rayv1.WorkerGroupRollingUpdate{MaxUnavailable: ptr.To(intstr.FromInt32(1))})
	old := podNames(workerPods(g, rc, group(rc).GroupName))
	update(t, rc, func(c *rayv1.RayCluster) {
		ctr := &group(c).Template.Spec.Containers[0]
		ctr.Env = append(ctr.Env, corev1.EnvVar{Name: "KRAY_E2E_DRAIN", Value: "1"})
	})
	g.Eventually(func(g Gomega) {
		pods := workerPods(g, rc, group(rc).GroupName)
		g.Expect(pods).To(HaveLen(3))
		for _, p := range pods {
			g.Expect(old).NotTo(ContainElement(p.Name))
			g.Expect(podReady(&p)).To(BeTrue())
		}
	}, readyTimeout, poll).Should(Succeed())
	g.Expect(drainedNames(gcs.drainedPods(ns), ns)).To(ConsistOf(old), "every recreated worker drained once, no other")
	g.Expect(ledger.deletedNames(t, rc)).To(ConsistOf(old))
	g.Eventually(func(g Gomega) {
		g.Expect(eventCount(g, rc, raycluster.EventDrainedWorker)).To(BeNumerically(">=", 3))
		g.Expect(eventCount(g, rc, raycluster.EventDrainTimedOut)).To(BeZero())
	}, readyTimeout, poll).Should(Succeed())
}

// Removing a worker group with workerDrain set drains its workers before its CloneSet goes (what KubeRay's
// proposal #5142 asks for); the other group is untouched.
func TestDrainOnWorkerGroupRemoval(t *testing.T) {
	t.Parallel()
	needFakeGCS(t)
	g := NewWithT(t)
	ns := namespace(t)
	gcs.setDrainTime(ns, 500*time.Millisecond)
	sample := loadSample(t, "ray-cluster.sample.yaml", ns)
	sample.Spec.WorkerDrain = &rayv1.WorkerDrainOptions{TimeoutSeconds: ptr.To[int32](60)}
	extra := group(sample).DeepCopy()
	extra.GroupName = "retired"
	sample.Spec.WorkerGroupSpecs = append(sample.Spec.WorkerGroupSpecs, *extra)
	rc := create(t, sample)
	waitReady(t, rc, 4)
	kept := uids(workerPods(g, rc, group(rc).GroupName))
	retired := podNames(workerPods(g, rc, "retired"))
	update(t, rc, func(c *rayv1.RayCluster) { c.Spec.WorkerGroupSpecs = c.Spec.WorkerGroupSpecs[:1] })
	g.Eventually(func(g Gomega) {
		g.Expect(workerPods(g, rc, "retired")).To(BeEmpty())
		g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: rc.Name + "-retired-worker"}, &kruisev1alpha1.CloneSet{})).
			To(Satisfy(apierrors.IsNotFound), "the removed group's CloneSet still exists")
	}, readyTimeout, poll).Should(Succeed())
	g.Expect(drainedNames(gcs.drainedPods(ns), ns)).To(ConsistOf(retired))
	g.Expect(uids(workerPods(g, rc, group(rc).GroupName))).To(Equal(kept))
	g.Expect(ledger.deletedNames(t, rc)).To(ConsistOf(retired))
}

// Suspending a cluster takes its head (and GCS) down too, so workers are not held for a drain.
func TestSuspendDoesNotWaitForDrains(t *testing.T) {
	t.Parallel()
	rc := drainCluster(t, 2, 600, -1)
	g := NewWithT(t)
	update(t, rc, func(c *rayv1.RayCluster) { c.Spec.Suspend = ptr.To(true) })
	g.Eventually(func(g Gomega) {
		g.Expect(clusterPods(g, rc)).To(BeEmpty())
		g.Expect(get(g, rc).Status.State).To(Equal(rayv1.Suspended))
	}, readyTimeout, poll).Should(Succeed())
	g.Expect(gcs.drainedPods(rc.Namespace)).To(BeEmpty())
}

// The operator is killed while a pod waits for its drain: the drain is not asked twice, and the timeout
// still counts from the first request (recorded in the pod), not from the restart.
func TestDrainSurvivesOperatorRestart(t *testing.T) {
	if !localCluster() {
		t.Skip("needs the operator run by hack/operator.sh")
	}
	const timeout = 6
	rc := drainCluster(t, 2, timeout, -1)
	g := NewWithT(t)
	victim := podNames(workerPods(g, rc, group(rc).GroupName))[0]
	update(t, rc, func(c *rayv1.RayCluster) {
		group(c).Replicas = ptr.To[int32](1)
		group(c).ScaleStrategy.WorkersToDelete = []string{victim}
	})
	var started time.Time
	g.Eventually(func(g Gomega) {
		p := &corev1.Pod{}
		g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: rc.Namespace, Name: victim}, p)).To(Succeed())
		stamp, err := time.Parse(time.RFC3339, p.Annotations[constants.AnnotationDrainStarted])
		g.Expect(err).NotTo(HaveOccurred())
		started = stamp
	}, readyTimeout, poll).Should(Succeed())
	t.Cleanup(func() { hack(t, "operator.sh", "start") })
	hack(t, "operator.sh", "kill")
	// Stay down past the timeout: a restarted operator must release the pod at once, not start a new timeout.
	time.Sleep(time.Until(started.Add((timeout + 1) * time.Second)))
	hack(t, "operator.sh", "start")
	g.Eventually(func(g Gomega) { g.Expect(podExists(g, rc.Namespace, victim)).To(BeFalse()) }, 3*time.Second, poll).Should(Succeed(),
		"not released within 3 s of the restart, although its timeout (from %s) had passed", started)
	g.Expect(drainedNames(gcs.drainedPods(rc.Namespace), rc.Namespace)).To(ConsistOf(victim), "the drain was asked more than once")
	waitReady(t, rc, 1)
}

// Ray 2.52+ with token auth: the GCS refuses every call without the cluster's token (the fake GCS does, too:
// a drain asked without it is refused, the positive control below). A named worker of such a cluster is
// drained with the token and goes in seconds, long before the 60 s timeout.
func TestDrainOnTokenAuthCluster(t *testing.T) {
	needFakeGCS(t)
	g := NewWithT(t)
	ns := namespace(t)
	gcs.setDrainTime(ns, time.Second)
	sample := loadSample(t, "ray-cluster.sample.yaml", ns)
	sample.Spec.RayVersion = "2.52.0"
	sample.Spec.AuthOptions = &rayv1.AuthOptions{Mode: rayv1.AuthModeToken}
	w := group(sample)
	w.Replicas, w.MinReplicas, w.MaxReplicas = ptr.To[int32](3), ptr.To[int32](0), ptr.To[int32](10)
	sample.Spec.WorkerDrain = &rayv1.WorkerDrainOptions{TimeoutSeconds: ptr.To[int32](60)}
	rc := create(t, sample)
	waitReady(t, rc, 3)
	secret := &corev1.Secret{}
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: rc.Name}, secret)).To(Succeed())
	token := string(secret.Data["auth_token"])
	g.Expect(token).NotTo(BeEmpty())
	gcs.requireToken(ns, token)

	victim := podNames(workerPods(g, rc, group(rc).GroupName))[0]
	unauthenticated, err := (&ray.GRPCDialer{}).Dial(os.Getenv("KRAY_E2E_GCS_ADDRESS"), ray.Credentials{})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = unauthenticated.Drain(context.Background(), fakeNodeID(g, ns, victim), "test", time.Now().Add(time.Minute))
	g.Expect(grpcstatus.Code(err)).To(Equal(codes.Unauthenticated), "the fake GCS must refuse a drain without the token")

	start := time.Now()
	update(t, rc, func(c *rayv1.RayCluster) {
		group(c).Replicas = ptr.To[int32](2)
		group(c).ScaleStrategy.WorkersToDelete = []string{victim}
	})
	g.Eventually(func(g Gomega) {
		g.Expect(drainedNames(gcs.drainedPods(ns), ns)).To(ConsistOf(victim))
		g.Expect(podExists(g, ns, victim)).To(BeFalse())
	}, readyTimeout, poll).Should(Succeed())
	g.Expect(time.Since(start)).To(BeNumerically("<", 30*time.Second), "released by the drain, not by the 60 s timeout")
	g.Expect(eventCount(g, rc, raycluster.EventDrainFailed)).To(BeZero())
	g.Eventually(func(g Gomega) { g.Expect(eventCount(g, rc, raycluster.EventDrainedWorker)).To(BeNumerically(">=", 1)) }, readyTimeout, poll).Should(Succeed())
}

// fakeNodeID is the Ray node ID the fake GCS gives the pod ns/name.
func fakeNodeID(g Gomega, ns, name string) []byte {
	p := &corev1.Pod{}
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, p)).To(Succeed())
	return nodeIDOf(p.UID)
}

// kruisePodReady is the pod's KruisePodReady condition: False while Kruise holds it out of every Service's
// endpoints (markPodNotReady).
func kruisePodReady(p *corev1.Pod) corev1.ConditionStatus {
	for _, c := range p.Status.Conditions {
		if c.Type == kruisepub.KruisePodReadyConditionType {
			return c.Status
		}
	}
	return ""
}

// Under RollingUpdate with workerDrain, an image change updates each worker in place only after its Ray node
// drained: Kruise holds the pod in PreparingUpdate and marks it not ready (out of every Service's endpoints),
// kray asks the GCS once to drain its node, and the image changes only after that; one pod of the group at a
// time (maxUnavailable 1), the same pods throughout, the head never held.
func TestDrainBeforeInPlaceUpdate(t *testing.T) {
	needFakeGCS(t)
	g := NewWithT(t)
	ns := namespace(t)
	gcs.setDrainTime(ns, 500*time.Millisecond)
	rc := drainingRollout(t, ns, 3, 60, &rayv1.WorkerGroupRollingUpdate{MaxUnavailable: ptr.To(intstr.FromInt32(1))})
	uids := map[string]types.UID{}
	for _, p := range workerPods(g, rc, group(rc).GroupName) {
		uids[p.Name] = p.UID
	}
	head := headPod(g, rc)
	timeline := watchTimeline(t, rc)
	update(t, rc, func(c *rayv1.RayCluster) { group(c).Template.Spec.Containers[0].Image = newImage })
	g.Eventually(func(g Gomega) {
		pods := workerPods(g, rc, group(rc).GroupName)
		g.Expect(pods).To(HaveLen(3))
		for _, p := range pods {
			g.Expect(p.UID).To(Equal(uids[p.Name]), "pod %s replaced, not updated in place", p.Name)
			g.Expect(updatedAndReady(&p)).To(BeTrue(), "pod %s", p.Name)
			g.Expect(p.Labels[constants.LabelKruiseLifecycleState]).To(Equal(constants.KruiseStateNormal))
			g.Expect(p.Labels[constants.LabelDrainHook]).To(Equal(constants.DrainHookValue), "pod %s hooked again", p.Name)
		}
	}, 2*readyTimeout, poll).Should(Succeed())
	g.Expect(headPod(g, rc).UID).To(Equal(head.UID))

	drains := map[string]time.Time{}
	for _, c := range gcs.drainedPods(ns) {
		name := c.Pod[len(ns)+1:]
		g.Expect(drains).NotTo(HaveKey(name), "pod %s drained twice", name)
		drains[name] = c.At
	}
	g.Expect(drains).To(HaveLen(3), "every worker drained once")
	notReady, updated, preparing := map[string]time.Time{}, map[string]time.Time{}, map[string]bool{}
	most := 0
	timeline.replay(func(step int, alive map[string]*corev1.Pod) {
		held := 0
		for name, p := range alive {
			if p.Labels[constants.LabelNodeType] != constants.NodeTypeWorker {
				continue
			}
			if st := p.Labels[constants.LabelKruiseLifecycleState]; st != constants.KruiseStateNormal {
				held++
				preparing[name] = preparing[name] || st == constants.KruiseStatePreparingUpdate
			}
		}
		most = max(most, held)
	})
	timeline.mu.Lock()
	for _, ev := range timeline.events {
		p := ev.pod
		if _, ok := uids[p.Name]; !ok {
			continue
		}
		if _, seen := notReady[p.Name]; !seen && kruisePodReady(&p) == corev1.ConditionFalse {
			notReady[p.Name] = ev.at
		}
		if _, seen := updated[p.Name]; !seen && image(&p) == newImage {
			updated[p.Name] = ev.at
		}
	}
	timeline.mu.Unlock()
	for name := range uids {
		g.Expect(preparing[name]).To(BeTrue(), "pod %s never held in PreparingUpdate", name)
		g.Expect(notReady).To(HaveKey(name), "pod %s never marked not ready", name)
		g.Expect(notReady[name]).To(BeTemporally("<=", drains[name]), "pod %s drained while still ready", name)
		g.Expect(updated[name]).To(BeTemporally(">=", drains[name]), "pod %s updated before its drain", name)
	}
	g.Expect(most).To(Equal(1), "workers held or updating at once")
}

// A worker whose drain never completes is released for its in-place update at workerDrain's deadline, also
// when the operator was SIGKILLed mid-drain and comes back after the deadline: one drain request, the same
// pod updated, a DrainTimedOut Warning.
func TestInPlaceDrainSurvivesOperatorKill(t *testing.T) {
	if !localCluster() {
		t.Skip("needs the operator run by hack/operator.sh")
	}
	needFakeGCS(t)
	g := NewWithT(t)
	ns := namespace(t)
	const timeout = 6
	gcs.setDrainTime(ns, -1)
	rc := drainingRollout(t, ns, 1, timeout, nil)
	worker := workerPods(g, rc, group(rc).GroupName)[0]
	update(t, rc, func(c *rayv1.RayCluster) { group(c).Template.Spec.Containers[0].Image = newImage })
	var started time.Time
	g.Eventually(func(g Gomega) {
		p := &corev1.Pod{}
		g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(&worker), p)).To(Succeed())
		g.Expect(p.Labels[constants.LabelKruiseLifecycleState]).To(Equal(constants.KruiseStatePreparingUpdate))
		stamp, err := time.Parse(time.RFC3339, p.Annotations[constants.AnnotationDrainStarted])
		g.Expect(err).NotTo(HaveOccurred())
		started = stamp
	}, readyTimeout, poll).Should(Succeed())
	t.Cleanup(func() { hack(t, "operator.sh", "start") })
	hack(t, "operator.sh", "kill")
	p := &corev1.Pod{}
	g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(&worker), p)).To(Succeed())
	g.Expect(image(p)).NotTo(Equal(newImage), "updated before its drain ended")
	time.Sleep(time.Until(started.Add((timeout + 1) * time.Second)))
	hack(t, "operator.sh", "start")
	g.Eventually(func(g Gomega) {
		p := &corev1.Pod{}
		g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(&worker), p)).To(Succeed())
		g.Expect(p.UID).To(Equal(worker.UID))
		g.Expect(updatedAndReady(p)).To(BeTrue())
		g.Expect(p.Labels[constants.LabelKruiseLifecycleState]).To(Equal(constants.KruiseStateNormal))
	}, readyTimeout, poll).Should(Succeed())
	g.Expect(drainedNames(gcs.drainedPods(ns), ns)).To(ConsistOf(worker.Name), "the drain was asked more than once")
	g.Eventually(func(g Gomega) { g.Expect(eventCount(g, rc, raycluster.EventDrainTimedOut)).To(BeNumerically(">=", 1)) }, readyTimeout, poll).Should(Succeed())
}
