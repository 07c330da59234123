package status

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	kruisev1beta1 "github.com/openkruise/kruise-api/apps/v1beta1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/constants"
)

func headSet(generation, observed int64, updated, updatedReady int32) *kruisev1beta1.StatefulSet {
	return &kruisev1beta1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Generation: generation},
		Spec:       kruisev1beta1.StatefulSetSpec{Replicas: ptr.To[int32](1)},
		Status:     kruisev1beta1.StatefulSetStatus{ObservedGeneration: observed, Replicas: 1, UpdatedReplicas: updated, UpdatedReadyReplicas: updatedReady, UpdateRevision: "r2"},
	}
}

// headAt is a head pod at revision, ready or not, with Kruise's InPlaceUpdateReady condition at inPlace
// (none when empty), beside a worker; the head StatefulSet of headSet updates to r2.
func headAt(revision string, ready bool, inPlace corev1.ConditionStatus) []corev1.Pod {
	head := revPod("rc-head-0", constants.NodeTypeHead, constants.HeadGroupName, revision, ready)
	if inPlace != "" {
		head.Status.Conditions = append(head.Status.Conditions, corev1.PodCondition{Type: constants.ReadinessGateInPlaceUpdate, Status: inPlace})
	}
	return []corev1.Pod{head, revPod("w0", constants.NodeTypeWorker, "g", "r1", true)}
}

func cloneSet(group string, generation, observed int64, replicas, target, updated, updatedReady int32) kruisev1alpha1.CloneSet {
	return kruisev1alpha1.CloneSet{
		ObjectMeta: metav1.ObjectMeta{Generation: generation, Labels: map[string]string{constants.LabelGroup: group}},
		Status: kruisev1alpha1.CloneSetStatus{ObservedGeneration: observed, Replicas: replicas, ExpectedUpdatedReplicas: target,
			UpdatedReplicas: updated, UpdatedReadyReplicas: updatedReady},
	}
}

func TestWorkloadUpdated(t *testing.T) {
	for _, tc := range []struct {
		name string
		got  bool
		want bool
	}{
		{"head updated and ready", HeadSetUpdated(headSet(2, 2, 1, 1), headAt("r2", true, "")), true},
		{"head updated and ready, its in-place update done", HeadSetUpdated(headSet(2, 2, 1, 1), headAt("r2", true, corev1.ConditionTrue)), true},
		{"head spec not observed yet", HeadSetUpdated(headSet(3, 2, 1, 1), headAt("r2", true, "")), false},
		{"head updated, not ready", HeadSetUpdated(headSet(2, 2, 1, 0), headAt("r2", true, "")), false},
		// Kruise counts the pod from its label and a Ready condition the kubelet has not turned False yet.
		{"head pod relabelled for an in-place update not done yet", HeadSetUpdated(headSet(2, 2, 1, 1), headAt("r2", true, corev1.ConditionFalse)), false},
		{"head pod at the old revision", HeadSetUpdated(headSet(2, 2, 1, 1), headAt("r1", true, "")), false},
		{"head pod not ready", HeadSetUpdated(headSet(2, 2, 1, 1), headAt("r2", false, "")), false},
		{"no head pod", HeadSetUpdated(headSet(2, 2, 1, 1), nil), false},
		{"group at target", CloneSetUpdated(ptr.To(cloneSet("g", 4, 4, 4, 3, 3, 3))), true},
		{"group below target", CloneSetUpdated(ptr.To(cloneSet("g", 4, 4, 4, 4, 3, 3))), false},
		{"group spec not observed yet", CloneSetUpdated(ptr.To(cloneSet("g", 5, 4, 4, 4, 4, 4))), false},
		{"group updated, one not ready", CloneSetUpdated(ptr.To(cloneSet("g", 4, 4, 4, 4, 4, 3))), false},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, tc.got, tc.want)
		}
	}
}

// revPod is a Running pod of a group at a revision.
func revPod(name, nodeType, group, revision string, ready bool) corev1.Pod {
	p := rayPod(name, nodeType, ready)
	p.Labels[constants.LabelGroup] = group
	p.Labels[appsv1.ControllerRevisionHashLabelKey] = revision
	return p
}

// atRevisions is a ready head at headRev and one ready worker of group g per entry of workerRevs.
func atRevisions(headRev string, workerRevs ...string) []corev1.Pod {
	pods := []corev1.Pod{revPod("rc-head-0", constants.NodeTypeHead, constants.HeadGroupName, headRev, true)}
	for i, rev := range workerRevs {
		pods = append(pods, revPod(fmt.Sprintf("w%d", i), constants.NodeTypeWorker, "g", rev, true))
	}
	return pods
}

// withRevision sets the revision Kruise updates the workload's pods to.
func withRevision[T *kruisev1beta1.StatefulSet | *kruisev1alpha1.CloneSet](w T, revision string) T {
	switch w := any(w).(type) {
	case *kruisev1beta1.StatefulSet:
		w.Status.UpdateRevision = revision
	case *kruisev1alpha1.CloneSet:
		w.Status.UpdateRevision = revision
	}
	return w
}

func TestUpdateProgressAndCondition(t *testing.T) {
	rc := cluster()
	obs := Observed{Pods: atRevisions("rc-head-new", "rc-g-worker-new", "rc-g-worker-old"), Now: now,
		HeadSet:   withRevision(headSet(1, 1, 1, 1), "rc-head-new"),
		CloneSets: []kruisev1alpha1.CloneSet{*withRevision(ptr.To(cloneSet("g", 2, 2, 2, 2, 1, 1)), "rc-g-worker-new")}}
	st := Compute(rc, obs)
	want := []rayv1.GroupUpdateProgress{ // the head is up to date: only the group still rolling is listed
		{GroupName: "g", Replicas: 2, UpdatedReplicas: 1, UpdatedReadyReplicas: 1, TargetReplicas: 2},
	}
	if diff := cmp.Diff(want, st.UpdateProgress); diff != "" {
		t.Fatalf("UpdateProgress (-want +got):\n%s", diff)
	}
	for _, tc := range []struct {
		strategy *rayv1.RayClusterUpgradeType
		reason   string
	}{
		{nil, constants.ReasonUpgradeStrategyNone},
		{ptr.To(rayv1.RayClusterRecreate), constants.ReasonRecreating},
		{ptr.To(rayv1.RayClusterRollingUpdate), constants.ReasonRollingUpdate},
	} {
		rc.Spec.UpgradeStrategy = &rayv1.RayClusterUpgradeStrategy{Type: tc.strategy}
		c := meta.FindStatusCondition(Compute(rc, obs).Conditions, constants.ConditionPodsUpToDate)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != tc.reason || !strings.Contains(c.Message, "g 1/2 updated, 1 ready") {
			t.Errorf("strategy %v: PodsUpToDate = %+v, want False/%s naming group g", tc.strategy, c, tc.reason)
		}
	}
	obs.Pods = atRevisions("rc-head-new", "rc-g-worker-new", "rc-g-worker-new")
	done := Compute(rc, obs)
	if c := meta.FindStatusCondition(done.Conditions, constants.ConditionPodsUpToDate); c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("PodsUpToDate = %+v, want True", c)
	}
	if done.UpdateProgress != nil {
		t.Errorf("UpdateProgress %+v once every pod is up to date, want none", done.UpdateProgress)
	}
}

// A cluster being created is not being updated: its pods coming up, before and after Kruise reports on its
// workloads, list no progress, so they cost no status write for it.
func TestNewClusterListsNoProgress(t *testing.T) {
	rc := cluster()
	head, workers := headSet(1, 1, 1, 1), cloneSet("g", 2, 2, 2, 2, 2, 2)
	for name, pods := range map[string][]corev1.Pod{
		"no pod yet":    nil,
		"head up":       atRevisions("rc-head-new"),
		"all up":        atRevisions("rc-head-new", "rc-g-worker-new", "rc-g-worker-new"),
		"one not ready": append(atRevisions("rc-head-new", "rc-g-worker-new"), revPod("w9", constants.NodeTypeWorker, "g", "rc-g-worker-new", false)),
	} {
		for _, reported := range []bool{false, true} {
			h, w := *head, workers
			if !reported {
				h.Status.ObservedGeneration, w.Status.ObservedGeneration = 0, 0
			}
			obs := Observed{Pods: pods, Now: now, HeadSet: withRevision(&h, "rc-head-new"), CloneSets: []kruisev1alpha1.CloneSet{*withRevision(&w, "rc-g-worker-new")}}
			if got := Compute(rc, obs).UpdateProgress; got != nil {
				t.Errorf("%s (Kruise reported: %t): UpdateProgress %+v, want none", name, reported, got)
			}
		}
	}
}

// The counts follow the pods of the reconcile, not Kruise's status, which lags behind them.
func TestUpdateProgressCountsThePods(t *testing.T) {
	rc := cluster()
	terminating := revPod("w9", constants.NodeTypeWorker, "g", "rc-g-worker-new", true)
	terminating.DeletionTimestamp = &now
	notReady := revPod("w8", constants.NodeTypeWorker, "g", "6d5f7c9b8", false) // the short form of the hash
	other := revPod("x1", constants.NodeTypeWorker, "other", "rc-g-worker-new", true)
	pods := append(atRevisions("rc-head-new", "rc-g-worker-new", "rc-g-worker-6d5f7c9b8"), terminating, notReady, other)
	lagging := cloneSet("g", 2, 2, 0, 4, 0, 0) // Kruise has counted none of them yet
	obs := Observed{Pods: pods, Now: now, CloneSets: []kruisev1alpha1.CloneSet{*withRevision(&lagging, "rc-g-worker-6d5f7c9b8")}}
	got := Compute(rc, obs).UpdateProgress
	want := []rayv1.GroupUpdateProgress{{GroupName: "g", Replicas: 3, UpdatedReplicas: 2, UpdatedReadyReplicas: 1, TargetReplicas: 4}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("UpdateProgress (-want +got):\n%s", diff)
	}
	withRevision(&obs.CloneSets[0], "")
	if got := Compute(rc, obs).UpdateProgress; got[0].UpdatedReplicas != 0 {
		t.Errorf("with no update revision yet, %d pods counted as updated", got[0].UpdatedReplicas)
	}
}

// noPods is the head StatefulSet before its pod exists.
func noPods(sts *kruisev1beta1.StatefulSet) *kruisev1beta1.StatefulSet {
	sts.Status.Replicas = 0
	return sts
}

// A cluster being created runs no pod on an older spec: its workloads, not yet observed by Kruise or with
// new pods that are not ready, are up to date (they were reported behind, "upgradeStrategy None leaves
// running pods on their spec", on every new cluster).
func TestCreationIsNotAnUpdate(t *testing.T) {
	rc := cluster()
	notReady := []corev1.Pod{
		revPod("rc-head-0", constants.NodeTypeHead, constants.HeadGroupName, "rc-head-new", false),
		revPod("w0", constants.NodeTypeWorker, "g", "rc-g-worker-new", false),
		revPod("w1", constants.NodeTypeWorker, "g", "rc-g-worker-new", false),
	}
	head := func(generation, observed int64) *kruisev1beta1.StatefulSet {
		return withRevision(headSet(generation, observed, 0, 0), "rc-head-new")
	}
	group := func(generation, observed int64) []kruisev1alpha1.CloneSet {
		return []kruisev1alpha1.CloneSet{*withRevision(ptr.To(cloneSet("g", generation, observed, 2, 2, 0, 0)), "rc-g-worker-new")}
	}
	for _, tc := range []struct {
		name string
		pods []corev1.Pod
		head *kruisev1beta1.StatefulSet
		sets []kruisev1alpha1.CloneSet
		want metav1.ConditionStatus
	}{
		{"just created, not observed", nil, noPods(headSet(1, 0, 0, 0)), []kruisev1alpha1.CloneSet{cloneSet("g", 1, 0, 0, 0, 0, 0)}, metav1.ConditionTrue},
		{"pods created before Kruise's first status", notReady, noPods(headSet(1, 0, 0, 0)), []kruisev1alpha1.CloneSet{cloneSet("g", 1, 0, 0, 0, 0, 0)}, metav1.ConditionTrue},
		{"pods created, not ready", notReady, head(1, 1), group(1, 1), metav1.ConditionTrue},
		{"some pods on an older spec", atRevisions("rc-head-new", "rc-g-worker-new", "rc-g-worker-old"), head(2, 2), group(2, 2), metav1.ConditionFalse},
		{"a new spec not observed yet", atRevisions("rc-head-old", "rc-g-worker-new", "rc-g-worker-new"), head(2, 1), group(2, 2), metav1.ConditionFalse},
	} {
		obs := Observed{Pods: tc.pods, Now: now, HeadSet: tc.head, CloneSets: tc.sets}
		if c := meta.FindStatusCondition(Compute(rc, obs).Conditions, constants.ConditionPodsUpToDate); c == nil || c.Status != tc.want {
			t.Errorf("%s: PodsUpToDate = %+v, want %s", tc.name, c, tc.want)
		}
	}
}

// A workload Kruise has not caught up with is behind only when kray's last write to it changed its spec
// (kray.io/spec-generation); a replicas change, which also raises the generation, leaves the pods on their
// spec, and an annotation above the generation (a write that changed no spec) counts as the generation.
func TestUnobservedWriteIsBehindOnlyForANewSpec(t *testing.T) {
	rc := cluster()
	pods := atRevisions("rc-head-new", "rc-g-worker-new", "rc-g-worker-new")
	for _, tc := range []struct {
		name           string
		specGeneration string
		behind         bool
	}{
		{"created, then scaled", "", false},
		{"a new template, then scaled", "3", false},
		{"a new template not observed", "4", true},
		{"an annotation above the generation", "9", true},
		{"a malformed annotation", "x", false},
	} {
		cs := cloneSet("g", 4, 3, 2, 2, 2, 2)
		if tc.specGeneration != "" {
			cs.Annotations = map[string]string{constants.AnnotationSpecGeneration: tc.specGeneration}
		}
		obs := Observed{Pods: pods, Now: now, HeadSet: withRevision(headSet(1, 1, 1, 1), "rc-head-new"),
			CloneSets: []kruisev1alpha1.CloneSet{*withRevision(&cs, "rc-g-worker-new")}}
		if got := Compute(rc, obs).UpdateProgress != nil; got != tc.behind {
			t.Errorf("%s: listed %t, want %t", tc.name, got, tc.behind)
		}
	}
}
