package status

import (
	"strings"
	"testing"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	kruisev1beta1 "github.com/openkruise/kruise-api/apps/v1beta1"
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
		Status:     kruisev1beta1.StatefulSetStatus{ObservedGeneration: observed, Replicas: 1, UpdatedReplicas: updated, UpdatedReadyReplicas: updatedReady},
	}
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
		{"head updated and ready", HeadSetUpdated(headSet(2, 2, 1, 1)), true},
		{"head spec not observed yet", HeadSetUpdated(headSet(3, 2, 1, 1)), false},
		{"head updated, not ready", HeadSetUpdated(headSet(2, 2, 1, 0)), false},
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

func TestUpdateProgressAndCondition(t *testing.T) {
	rc := cluster()
	obs := Observed{Pods: allReady(), Now: now, HeadSet: headSet(1, 1, 1, 1), CloneSets: []kruisev1alpha1.CloneSet{cloneSet("g", 2, 2, 2, 2, 1, 1)}}
	st := Compute(rc, obs)
	want := []rayv1.GroupUpdateProgress{
		{GroupName: constants.HeadGroupName, Replicas: 1, UpdatedReplicas: 1, UpdatedReadyReplicas: 1, TargetReplicas: 1},
		{GroupName: "g", Replicas: 2, UpdatedReplicas: 1, UpdatedReadyReplicas: 1, TargetReplicas: 2},
	}
	if len(st.UpdateProgress) != 2 || st.UpdateProgress[0] != want[0] || st.UpdateProgress[1] != want[1] {
		t.Fatalf("UpdateProgress = %+v, want %+v", st.UpdateProgress, want)
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
	obs.CloneSets = []kruisev1alpha1.CloneSet{cloneSet("g", 2, 2, 2, 2, 2, 2)}
	if c := meta.FindStatusCondition(Compute(rc, obs).Conditions, constants.ConditionPodsUpToDate); c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("PodsUpToDate = %+v, want True", c)
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
	for _, tc := range []struct {
		name string
		head *kruisev1beta1.StatefulSet
		sets []kruisev1alpha1.CloneSet
		want metav1.ConditionStatus
	}{
		{"just created, not observed", noPods(headSet(1, 0, 0, 0)), []kruisev1alpha1.CloneSet{cloneSet("g", 1, 0, 0, 0, 0, 0)}, metav1.ConditionTrue},
		{"pods created, not ready", headSet(1, 1, 1, 0), []kruisev1alpha1.CloneSet{cloneSet("g", 1, 1, 2, 2, 2, 0)}, metav1.ConditionTrue},
		{"some pods on an older spec", headSet(2, 2, 1, 1), []kruisev1alpha1.CloneSet{cloneSet("g", 2, 2, 2, 2, 1, 1)}, metav1.ConditionFalse},
		{"a new spec not observed yet", headSet(2, 1, 1, 1), []kruisev1alpha1.CloneSet{cloneSet("g", 2, 2, 2, 2, 2, 2)}, metav1.ConditionFalse},
	} {
		obs := Observed{Pods: allReady(), Now: now, HeadSet: tc.head, CloneSets: tc.sets}
		if c := meta.FindStatusCondition(Compute(rc, obs).Conditions, constants.ConditionPodsUpToDate); c == nil || c.Status != tc.want {
			t.Errorf("%s: PodsUpToDate = %+v, want %s", tc.name, c, tc.want)
		}
	}
}
