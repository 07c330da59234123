package raycluster

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	kruisev1beta1 "github.com/openkruise/kruise-api/apps/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/names"
)

// newImage is the image the tests below roll the worker groups to.
const newImage = "rayproject/ray:2.99.0"

// cloneSet reads the CloneSet of rc's group from the fake API server.
func (e *env) cloneSet(rc *rayv1.RayCluster, group string) *kruisev1alpha1.CloneSet {
	e.t.Helper()
	return e.get(&kruisev1alpha1.CloneSet{}, names.WorkerCloneSet(rc.Name, group)).(*kruisev1alpha1.CloneSet)
}

// rollImage sets every worker group's Ray container image to newImage, as a user editing the spec would.
func (e *env) rollImage(rc *rayv1.RayCluster) {
	e.t.Helper()
	e.updateSpec(rc, func(c *rayv1.RayCluster) {
		for i := range c.Spec.WorkerGroupSpecs {
			c.Spec.WorkerGroupSpecs[i].Template.Spec.Containers[0].Image = newImage
		}
	})
}

// A worker group's template change reaches its CloneSet's template in the update that carries the new spec
// hash, under every upgrade strategy (the strategy decides only whether Kruise rolls the pods).
func TestWorkerTemplateChangeReachesTheCloneSet(t *testing.T) {
	for _, strategy := range []rayv1.RayClusterUpgradeType{"", rayv1.RayClusterRollingUpdate} {
		t.Run("strategy "+string(strategy), func(t *testing.T) {
			rc := cluster("c").group("small", 2).with(func(rc *rayv1.RayCluster) {
				if strategy != "" {
					rc.Spec.UpgradeStrategy = &rayv1.RayClusterUpgradeStrategy{Type: ptr.To(strategy)}
				}
			}).obj()
			e := newEnv(t, rc)
			e.converge(rc)
			before := e.cloneSet(rc, "small")
			e.rollImage(rc)
			e.mustReconcile(rc)
			after := e.cloneSet(rc, "small")
			if got := after.Spec.Template.Spec.Containers[0].Image; got != newImage {
				t.Errorf("CloneSet image %s after the spec changed, want %s", got, newImage)
			}
			if after.Annotations["kray.io/spec-hash"] == before.Annotations["kray.io/spec-hash"] {
				t.Errorf("spec hash unchanged: the template change was not seen")
			}
			if got, want := after.Annotations[constants.AnnotationSpecGeneration], strconv.FormatInt(after.Generation, 10); got != want {
				t.Errorf("spec generation %q after the template write, want the CloneSet's generation %s", got, want)
			}
		})
	}
}

// Under upgradeStrategy RollingUpdate the head and then each group roll one at a time: while a workload's pods
// are not all updated (Kruise part-way), every later group's CloneSet has the new template with its update
// paused; once it is done, the next one's update goes on. A change of the workers alone leaves the head as it
// is (its recreate hash leaves the workers out under RollingUpdate), so the first group starts at once.
func TestRollingUpdateHoldsLaterGroupsUntilEarlierOnesAreDone(t *testing.T) {
	for _, headToo := range []bool{true, false} {
		t.Run(fmt.Sprintf("head changed %t", headToo), func(t *testing.T) {
			rc := cluster("c").group("first", 2).group("second", 2).with(func(rc *rayv1.RayCluster) {
				rc.Spec.UpgradeStrategy = &rayv1.RayClusterUpgradeStrategy{Type: ptr.To(rayv1.RayClusterRollingUpdate)}
			}).obj()
			e := newEnv(t, rc)
			e.converge(rc)
			headBefore := e.get(&kruisev1beta1.StatefulSet{}, names.HeadStatefulSet(rc.Name)).(*kruisev1beta1.StatefulSet).Annotations[constants.AnnotationSpecHash]
			e.rollImage(rc)
			if headToo {
				e.updateSpec(rc, func(c *rayv1.RayCluster) { c.Spec.HeadGroupSpec.Template.Spec.Containers[0].Image = newImage })
			}
			e.mustReconcile(rc)
			paused := func() (bool, bool) {
				return e.cloneSet(rc, "first").Spec.UpdateStrategy.Paused, e.cloneSet(rc, "second").Spec.UpdateStrategy.Paused
			}
			headAfter := e.get(&kruisev1beta1.StatefulSet{}, names.HeadStatefulSet(rc.Name)).(*kruisev1beta1.StatefulSet).Annotations[constants.AnnotationSpecHash]
			if headToo {
				if first, second := paused(); !first || !second {
					t.Fatalf("while the head rolls: first paused %t, second paused %t; want both held", first, second)
				}
				e.playKruiseFor(rc, names.HeadStatefulSet(rc.Name)) // the head is updated, no group yet
				e.mustReconcile(rc)
			} else if headAfter != headBefore {
				t.Fatalf("a worker change rewrote the head StatefulSet")
			}
			if first, second := paused(); first || !second {
				t.Fatalf("first paused %t, second paused %t; want the first rolling and the second held", first, second)
			}
			e.mustReconcile(rc) // Kruise has not moved: the first group is still part-way
			if _, second := paused(); !second {
				t.Errorf("the second group's update was released before the first group finished")
			}
			e.playKruiseFor(rc, names.WorkerCloneSet(rc.Name, "first")) // the first group's pods are updated
			e.mustReconcile(rc)
			if second := e.cloneSet(rc, "second"); second.Spec.UpdateStrategy.Paused || second.Spec.Template.Spec.Containers[0].Image != newImage {
				t.Errorf("after the first group finished: second paused %t image %s, want rolling to %s",
					second.Spec.UpdateStrategy.Paused, second.Spec.Template.Spec.Containers[0].Image, newImage)
			}
		})
	}
}

// cloneSetWrites returns the writes to CloneSets among writes.
func cloneSetWrites(writes []string) []string {
	var out []string
	for _, w := range writes {
		if strings.Contains(w, " CloneSet/") {
			out = append(out, w)
		}
	}
	return out
}

// A RollingUpdate holds only groups that have pods to update: creating a cluster while its head comes up,
// or a head pod that is not ready after a restart, pauses no CloneSet and so writes none (a pause and its
// release would each be a CloneSet write and a generation Kruise must catch up with).
func TestRollingUpdateHoldsNothingWithoutAnUpdate(t *testing.T) {
	rc := cluster("c").group("first", 2).group("second", 2).with(func(rc *rayv1.RayCluster) {
		rc.Spec.UpgradeStrategy = &rayv1.RayClusterUpgradeStrategy{Type: ptr.To(rayv1.RayClusterRollingUpdate)}
	}).obj()
	e := newEnv(t, rc)
	e.mustReconcile(rc)
	if got := cloneSetWrites(e.mustReconcile(rc)); len(got) != 0 {
		t.Errorf("a new cluster whose head is not ready yet: CloneSet writes %v, want none", got)
	}
	e.converge(rc)
	sts := e.get(&kruisev1beta1.StatefulSet{}, names.HeadStatefulSet(rc.Name)).(*kruisev1beta1.StatefulSet)
	sts.Status.ReadyReplicas, sts.Status.UpdatedReadyReplicas = 0, 0
	if err := e.api.Status().Update(context.Background(), sts); err != nil {
		t.Fatal(err)
	}
	if got := cloneSetWrites(e.mustReconcile(rc)); len(got) != 0 {
		t.Errorf("the head pod restarting: CloneSet writes %v, want none", got)
	}
	for _, group := range []string{"first", "second"} {
		if e.cloneSet(rc, group).Spec.UpdateStrategy.Paused {
			t.Errorf("group %s paused without an update", group)
		}
	}
}

// A head pod that Kruise has relabelled for an in-place update it has not finished (InPlaceUpdateReady False,
// the kubelet not yet reporting the restart, so Ready is still True and the StatefulSet counts the pod updated
// and ready) holds every worker group: they roll only once the head's update is done.
func TestRollingUpdateWaitsForTheHeadPodNotItsStatefulSetsCount(t *testing.T) {
	rc := cluster("c").group("first", 2).with(func(rc *rayv1.RayCluster) {
		rc.Spec.UpgradeStrategy = &rayv1.RayClusterUpgradeStrategy{Type: ptr.To(rayv1.RayClusterRollingUpdate)}
	}).obj()
	e := newEnv(t, rc)
	e.converge(rc)
	e.rollImage(rc)
	e.updateSpec(rc, func(c *rayv1.RayCluster) { c.Spec.HeadGroupSpec.Template.Spec.Containers[0].Image = newImage })
	e.mustReconcile(rc)
	e.playKruiseFor(rc, names.HeadStatefulSet(rc.Name))
	e.setHeadInPlaceUpdateReady(rc, corev1.ConditionFalse)
	e.mustReconcile(rc)
	if !e.cloneSet(rc, "first").Spec.UpdateStrategy.Paused {
		t.Fatal("the group rolls while the head's in-place update is not done")
	}
	e.setHeadInPlaceUpdateReady(rc, corev1.ConditionTrue)
	e.mustReconcile(rc)
	if e.cloneSet(rc, "first").Spec.UpdateStrategy.Paused {
		t.Error("the head's update is done, and the group is still held")
	}
}

// setHeadInPlaceUpdateReady sets Kruise's InPlaceUpdateReady condition of rc's head pod to status.
func (e *env) setHeadInPlaceUpdateReady(rc *rayv1.RayCluster, status corev1.ConditionStatus) {
	e.t.Helper()
	head := e.get(&corev1.Pod{}, names.HeadPod(rc.Name)).(*corev1.Pod)
	for i, c := range head.Status.Conditions {
		if c.Type == constants.ReadinessGateInPlaceUpdate {
			head.Status.Conditions[i].Status = status
		}
	}
	if err := e.api.Status().Update(context.Background(), head); err != nil {
		e.t.Fatal(err)
	}
}
