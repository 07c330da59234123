package e2e

import (
	"context"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/constants"
)

const newImage = "rayproject/ray:2.47.0"

// podTimeline records every change of a cluster's pods, in the order the watch delivered them.
type podTimeline struct {
	mu     sync.Mutex
	events []timelineEvent
}

type timelineEvent struct {
	deleted bool
	pod     corev1.Pod
	at      time.Time // when the watch delivered it
}

// watchTimeline starts recording rc's pods; stop it with the returned function.
func watchTimeline(t *testing.T, rc *rayv1.RayCluster) *podTimeline {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w, err := clientset.CoreV1().Pods(rc.Namespace).Watch(ctx, metav1.ListOptions{LabelSelector: constants.LabelCluster + "=" + rc.Name})
	if err != nil {
		t.Fatal(err)
	}
	tl := &podTimeline{}
	go func() {
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			tl.mu.Lock()
			tl.events = append(tl.events, timelineEvent{deleted: ev.Type == watch.Deleted, pod: *p, at: time.Now()})
			tl.mu.Unlock()
		}
	}()
	return tl
}

// replay calls fn after each recorded event with the pods alive at that point (not deleted, not terminating).
func (tl *podTimeline) replay(fn func(step int, alive map[string]*corev1.Pod)) {
	tl.mu.Lock()
	events := slices.Clone(tl.events)
	tl.mu.Unlock()
	alive := map[string]*corev1.Pod{}
	for i, ev := range events {
		p := ev.pod
		if ev.deleted || p.DeletionTimestamp != nil {
			delete(alive, p.Name)
		} else {
			alive[p.Name] = &p
		}
		fn(i, alive)
	}
}

// watchUpdateProgress records, from a watch started before the test acts, the groups that rc's
// status.updateProgress listed at any moment.
func watchUpdateProgress(t *testing.T, rc *rayv1.RayCluster) func() []string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := watcher.Watch(ctx, &rayv1.RayClusterList{}, client.InNamespace(rc.Namespace))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); w.Stop() })
	var mu sync.Mutex
	seen := map[string]bool{}
	go func() {
		for e := range w.ResultChan() {
			cur, ok := e.Object.(*rayv1.RayCluster)
			if !ok || cur.Name != rc.Name {
				continue
			}
			mu.Lock()
			for _, p := range cur.Status.UpdateProgress {
				seen[p.GroupName] = true
			}
			mu.Unlock()
		}
	}()
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Collect(maps.Keys(seen))
	}
}

// sampleWithStrategy is the sample cluster in ns with the given upgradeStrategy.
func sampleWithStrategy(t *testing.T, ns string, strategy rayv1.RayClusterUpgradeType) *rayv1.RayCluster {
	t.Helper()
	sample := loadSample(t, "ray-cluster.sample.yaml", ns)
	sample.Spec.UpgradeStrategy = &rayv1.RayClusterUpgradeStrategy{Type: &strategy}
	return sample
}

func image(p *corev1.Pod) string { return p.Spec.Containers[0].Image }

// updatedAndReady reports whether the pod runs newImage, its status says so, and it is ready.
func updatedAndReady(p *corev1.Pod) bool {
	if image(p) != newImage || !podReady(p) {
		return false
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == p.Spec.Containers[0].Name {
			return cs.Image == newImage
		}
	}
	return false
}

// RollingUpdate with an image change: every pod is updated in place (same pod, new image), the head
// first and then each group in spec order, never more than maxUnavailable pods of a group unready at once,
// and partition pods left on the old image.
func TestRollingUpdateImageInPlace(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ns := namespace(t)
	sample := sampleWithStrategy(t, ns, rayv1.RayClusterRollingUpdate)
	a := group(sample)
	a.GroupName, a.Replicas, a.MaxReplicas = "first", ptr.To[int32](4), ptr.To[int32](10)
	a.RollingUpdate = &rayv1.WorkerGroupRollingUpdate{MaxUnavailable: ptr.To(intstr.FromInt32(1))}
	b := a.DeepCopy()
	b.GroupName, b.Replicas = "second", ptr.To[int32](2)
	b.RollingUpdate = &rayv1.WorkerGroupRollingUpdate{Partition: ptr.To(intstr.FromInt32(1))}
	sample.Spec.WorkerGroupSpecs = append(sample.Spec.WorkerGroupSpecs, *b)
	rc := create(t, sample)
	waitReady(t, rc, 6)
	before := uids(clusterPods(g, rc))
	g.Expect(get(g, rc).Status.UpdateProgress).To(BeEmpty(), "a new cluster is not being updated")
	tl := watchTimeline(t, rc)
	listed := watchUpdateProgress(t, rc)

	update(t, rc, func(c *rayv1.RayCluster) {
		c.Spec.HeadGroupSpec.Template.Spec.Containers[0].Image = newImage
		for i := range c.Spec.WorkerGroupSpecs {
			c.Spec.WorkerGroupSpecs[i].Template.Spec.Containers[0].Image = newImage
		}
	})
	g.Eventually(func(g Gomega) {
		cur := get(g, rc)
		up := condition(cur, constants.ConditionPodsUpToDate)
		g.Expect(up).NotTo(BeNil())
		g.Expect(up.Status).To(Equal(metav1.ConditionTrue), "%s: %s", up.Reason, up.Message)
		g.Expect(updatedAndReady(headPod(g, rc))).To(BeTrue(), "head not updated")
		for _, p := range workerPods(g, rc, "first") {
			g.Expect(updatedAndReady(&p)).To(BeTrue(), "pod %s not updated", p.Name)
		}
		images := []string{}
		for _, p := range workerPods(g, rc, "second") {
			images = append(images, image(&p))
		}
		g.Expect(images).To(ConsistOf(newImage, "rayproject/ray:2.46.0"), "partition 1 keeps one pod of group second on the old image")
		g.Expect(cur.Status.UpdateProgress).To(BeEmpty(), "every group reached its target (second's partition keeps one pod)")
	}, readyTimeout, poll).Should(Succeed())
	// The head's one pod updates within a status write's hold, so only the worker groups are sure to be seen.
	g.Expect(listed()).To(ContainElements("first", "second"), "the worker groups were listed while they rolled or waited")

	// In place: the same pods, none created or deleted.
	g.Expect(uids(clusterPods(g, rc))).To(Equal(before))
	created, deleted := ledger.counts(t, rc)
	g.Expect([]int{created, deleted}).To(Equal([]int{7, 0}))

	// Order and pace, from the watch: the head was updated before any worker changed image, group first
	// finished before group second started, and group first never had more than 1 pod unready.
	headDone, firstStarted, firstDone, secondStarted := -1, -1, -1, -1
	maxUnready := 0
	tl.replay(func(step int, alive map[string]*corev1.Pod) {
		newFirst, readyFirst, unreadyFirst := 0, 0, 0
		for _, p := range alive {
			group := p.Labels[constants.LabelGroup]
			switch {
			case group == constants.HeadGroupName && headDone < 0 && updatedAndReady(p):
				headDone = step
			case group == "first":
				if image(p) == newImage {
					newFirst++
				}
				if updatedAndReady(p) {
					readyFirst++
				}
				if !podReady(p) {
					unreadyFirst++
				}
			case group == "second" && secondStarted < 0 && image(p) == newImage:
				secondStarted = step
			}
		}
		if firstStarted < 0 && newFirst > 0 {
			firstStarted = step
		}
		if firstDone < 0 && readyFirst == 4 {
			firstDone = step
		}
		maxUnready = max(maxUnready, unreadyFirst)
	})
	g.Expect(headDone).To(BeNumerically(">=", 0), "the watch never saw the head updated")
	g.Expect(firstStarted).To(BeNumerically(">", headDone), "group first started before the head was updated")
	g.Expect(firstDone).To(BeNumerically(">=", 0), "the watch never saw group first updated")
	g.Expect(secondStarted).To(BeNumerically(">", firstDone), "group second started before group first was done")
	g.Expect(maxUnready).To(Equal(1), "maxUnavailable 1: at most one pod of group first unready at a time")
}

// RollingUpdate with an env change, which Kruise cannot apply in place: the group's pods are recreated one
// at a time (maxUnavailable 1), each exactly once, and the head is not touched.
func TestRollingUpdateEnvChangeRecreates(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ns := namespace(t)
	sample := sampleWithStrategy(t, ns, rayv1.RayClusterRollingUpdate)
	w := group(sample)
	w.Replicas, w.MaxReplicas = ptr.To[int32](3), ptr.To[int32](10)
	w.RollingUpdate = &rayv1.WorkerGroupRollingUpdate{MaxUnavailable: ptr.To(intstr.FromInt32(1))}
	rc := create(t, sample)
	waitReady(t, rc, 3)
	head := headPod(g, rc).UID
	old := podNames(workerPods(g, rc, w.GroupName))
	tl := watchTimeline(t, rc)

	update(t, rc, func(c *rayv1.RayCluster) {
		ctr := &c.Spec.WorkerGroupSpecs[0].Template.Spec.Containers[0]
		ctr.Env = append(ctr.Env, corev1.EnvVar{Name: "KRAY_E2E_ROLLING", Value: "1"})
	})
	g.Eventually(func(g Gomega) {
		pods := workerPods(g, rc, w.GroupName)
		g.Expect(pods).To(HaveLen(3))
		for _, p := range pods {
			g.Expect(old).NotTo(ContainElement(p.Name), "pod %s was not recreated", p.Name)
			g.Expect(p.Spec.Containers[0].Env).To(ContainElement(corev1.EnvVar{Name: "KRAY_E2E_ROLLING", Value: "1"}))
			g.Expect(podReady(&p)).To(BeTrue())
		}
		g.Expect(condition(get(g, rc), constants.ConditionPodsUpToDate).Status).To(Equal(metav1.ConditionTrue))
	}, readyTimeout, poll).Should(Succeed())
	g.Expect(headPod(g, rc).UID).To(Equal(head), "the head was restarted")
	g.Expect(ledger.deletedNames(t, rc)).To(ConsistOf(old))
	created, _ := ledger.counts(t, rc)
	g.Expect(created).To(Equal(1+3+3), "each worker recreated exactly once")

	// The watch starts by listing the pods one event at a time; count from the first moment all 3 are seen.
	minReady, seenAll := 3, false
	tl.replay(func(_ int, alive map[string]*corev1.Pod) {
		ready := 0
		for _, p := range alive {
			if p.Labels[constants.LabelGroup] == w.GroupName && podReady(p) {
				ready++
			}
		}
		seenAll = seenAll || ready == 3
		if seenAll {
			minReady = min(minReady, ready)
		}
	})
	g.Expect(minReady).To(Equal(2), "maxUnavailable 1: never fewer than 2 of 3 workers ready")
}

// upgradeStrategy None reports, without restarting anything, that pods run an older spec.
func TestUpgradeStrategyNoneReportsStalePods(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ns := namespace(t)
	rc := create(t, loadSample(t, "ray-cluster.sample.yaml", ns))
	waitReady(t, rc, 2)
	g.Eventually(func(g Gomega) {
		g.Expect(condition(get(g, rc), constants.ConditionPodsUpToDate).Status).To(Equal(metav1.ConditionTrue))
	}, readyTimeout, poll).Should(Succeed())
	update(t, rc, func(c *rayv1.RayCluster) { c.Spec.WorkerGroupSpecs[0].Template.Spec.Containers[0].Image = newImage })
	g.Eventually(func(g Gomega) {
		c := condition(get(g, rc), constants.ConditionPodsUpToDate)
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(constants.ReasonUpgradeStrategyNone))
		g.Expect(c.Message).To(ContainSubstring("workergroup 0/2 updated"))
	}, readyTimeout, poll).Should(Succeed())
	created, deleted := ledger.counts(t, rc)
	g.Expect([]int{created, deleted}).To(Equal([]int{3, 0}))
}

// upgradeStrategy Recreate follows KubeRay's spec hash: scaling (what the autoscaler writes) restarts
// nothing, while a change to one worker group recreates every pod, the head included.
func TestUpgradeStrategyRecreateFollowsSpecHash(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ns := namespace(t)
	sample := sampleWithStrategy(t, ns, rayv1.RayClusterRecreate)
	rc := create(t, sample)
	waitReady(t, rc, 2)
	before := uids(clusterPods(g, rc))
	update(t, rc, func(c *rayv1.RayCluster) { group(c).Replicas = ptr.To[int32](3) })
	waitReady(t, rc, 3)
	after := uids(clusterPods(g, rc))
	for name, uid := range before {
		g.Expect(after).To(HaveKeyWithValue(name, uid), "scaling recreated %s", name)
	}
	update(t, rc, func(c *rayv1.RayCluster) { group(c).Template.Spec.Containers[0].Image = newImage })
	g.Eventually(func(g Gomega) {
		pods := clusterPods(g, rc)
		g.Expect(pods).To(HaveLen(4))
		for _, p := range pods {
			g.Expect(after).NotTo(ContainElement(p.UID), "pod %s was not recreated", p.Name)
		}
	}, readyTimeout, poll).Should(Succeed())
	waitReady(t, rc, 3)
}

// available reports whether the pod is ready with every readiness gate True (Kruise's KruisePodReady and
// InPlaceUpdateReady): the moment a gate turns False counts, before kwok's stages fold it into Ready.
func available(p *corev1.Pod) bool {
	if !podReady(p) || p.DeletionTimestamp != nil {
		return false
	}
	for _, gate := range p.Spec.ReadinessGates {
		ok := false
		for _, c := range p.Status.Conditions {
			if c.Type == gate.ConditionType {
				ok = c.Status == corev1.ConditionTrue
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// workerUIDs are the UIDs of rc's workers of group as they are now.
func workerUIDs(g Gomega, rc *rayv1.RayCluster, group string) map[types.UID]bool {
	uids := map[types.UID]bool{}
	for _, p := range workerPods(g, rc, group) {
		uids[p.UID] = true
	}
	return uids
}

// expectRolled checks (inside an Eventually) that group has n workers, each on newImage and available.
func expectRolled(g Gomega, rc *rayv1.RayCluster, group string, n int) {
	pods := workerPods(g, rc, group)
	g.Expect(pods).To(HaveLen(n))
	for _, p := range pods {
		g.Expect(updatedAndReady(&p)).To(BeTrue(), "pod %s", p.Name)
		g.Expect(available(&p)).To(BeTrue(), "pod %s", p.Name)
	}
}

// rollBounds is what a roll of a cluster's workers looked like in a timeline, counted from the moment the
// watch (which opens with one event per existing pod) held every old worker.
type rollBounds struct {
	fewestAvailable, mostWorkers int
	// newWorker: a worker pod not among the old ones was seen; otherDown: a pod that is not a worker (the
	// head) was not available at some point.
	newWorker, otherDown bool
}

// rollBounds replays the timeline with old, the UIDs of the workers before the roll.
func (tl *podTimeline) rollBounds(old map[types.UID]bool) rollBounds {
	b := rollBounds{fewestAvailable: len(old)}
	loaded := false
	tl.replay(func(step int, alive map[string]*corev1.Pod) {
		workers, up, seen := 0, 0, 0
		for _, p := range alive {
			if p.Labels[constants.LabelNodeType] != constants.NodeTypeWorker {
				b.otherDown = b.otherDown || (loaded && !available(p))
				continue
			}
			workers++
			if available(p) {
				up++
			}
			if old[p.UID] {
				seen++
			} else {
				b.newWorker = true
			}
		}
		if loaded = loaded || seen == len(old); loaded {
			b.fewestAvailable, b.mostWorkers = min(b.fewestAvailable, up), max(b.mostWorkers, workers)
		}
	})
	return b
}

// RollingUpdate with maxSurge 1 and maxUnavailable 0 (and workerDrain): a new pod starts before any old one
// is taken out, so the group never has fewer available workers than its replicas nor more than one extra
// pod; each old worker is drained once, then updated in place, or deleted in place of the extra pod.
func TestRollingUpdateWithSurge(t *testing.T) {
	t.Parallel()
	needFakeGCS(t)
	g := NewWithT(t)
	ns := namespace(t)
	gcs.setDrainTime(ns, 300*time.Millisecond)
	rc := drainingRollout(t, ns, 3, 60, &rayv1.WorkerGroupRollingUpdate{MaxUnavailable: ptr.To(intstr.FromInt32(0)), MaxSurge: ptr.To(intstr.FromInt32(1))})
	w := group(rc)
	uids := workerUIDs(g, rc, w.GroupName)
	tl := watchTimeline(t, rc)
	update(t, rc, func(c *rayv1.RayCluster) { group(c).Template.Spec.Containers[0].Image = newImage })
	g.Eventually(func(g Gomega) { expectRolled(g, rc, w.GroupName, 3) }, 2*readyTimeout, poll).Should(Succeed())
	b := tl.rollBounds(uids)
	g.Expect(b.newWorker).To(BeTrue(), "no extra pod was started")
	g.Expect(b.mostWorkers).To(Equal(4), "workers at most: replicas + maxSurge")
	g.Expect(b.fewestAvailable).To(Equal(3), "available workers never below replicas")
	kept := 0
	for _, p := range workerPods(g, rc, w.GroupName) {
		if uids[p.UID] {
			kept++
		}
	}
	// Kruise takes the surge back by deleting an old pod rather than updating it: at most maxSurge replaced.
	g.Expect(kept).To(BeNumerically(">=", 2), "workers updated in place")
	drained := drainedNames(gcs.drainedPods(ns), ns)
	g.Expect(drained).To(HaveLen(3), "each old worker drained once, before its update or its deletion")
	seen := map[string]bool{}
	for _, name := range drained {
		g.Expect(seen[name]).To(BeFalse(), "pod %s drained twice", name)
		seen[name] = true
	}
	t.Logf("%d of 3 workers kept their pod (updated in place); drained: %v", kept, drained)
}
