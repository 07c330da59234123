package raycluster

import (
	"testing"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/internal/writetest"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/names"
)

// A client holding KubeRay's types (a typed Update, Kueue's merge patch of workerGroupSpecs) drops
// spec.workerDrain and rollingUpdate; the settings kray keeps in annotations go on applying, and kray writes
// no spec.
func TestExtensionsSurviveAClientThatDropsThem(t *testing.T) {
	two := intstr.FromInt32(2)
	rc := cluster("c").group("g", 2).with(func(rc *rayv1.RayCluster) {
		rc.Spec.UpgradeStrategy = &rayv1.RayClusterUpgradeStrategy{Type: ptr.To(rayv1.RayClusterUpgradeType("RollingUpdate"))}
		rc.Spec.WorkerDrain = &rayv1.WorkerDrainOptions{TimeoutSeconds: ptr.To[int32](30)}
		rc.Spec.WorkerGroupSpecs[0].RollingUpdate = &rayv1.WorkerGroupRollingUpdate{MaxUnavailable: &two}
	}).obj()
	e := newEnv(t, rc)
	e.converge(rc)
	kept := e.get(&rayv1.RayCluster{}, "c").(*rayv1.RayCluster)
	if kept.Annotations[constants.AnnotationWorkerDrain] != `{"timeoutSeconds":30}` ||
		kept.Annotations[constants.AnnotationRollingUpdate] != `{"g":{"maxUnavailable":2}}` {
		t.Fatalf("annotations %v, want the settings kept", kept.Annotations)
	}
	before := e.get(&kruisev1alpha1.CloneSet{}, names.WorkerCloneSet("c", "g")).(*kruisev1alpha1.CloneSet).DeepCopy()

	e.updateSpec(rc, func(rc *rayv1.RayCluster) { // what a KubeRay-typed read-modify-write sends
		rc.Spec.UpgradeStrategy = nil // KubeRay's types before v1.6 have no upgradeStrategy
		rc.Spec.WorkerDrain = nil
		rc.Spec.WorkerGroupSpecs[0].RollingUpdate = nil
		rc.Spec.WorkerGroupSpecs[0].Replicas = ptr.To[int32](3)
	})
	e.writer.Reset()
	e.converge(rc)
	for _, w := range e.writer.Writes() {
		if w.Kind == "RayCluster" && w.Verb != writetest.Status {
			t.Errorf("kray wrote the RayCluster: %s", w)
		}
	}
	cs := e.get(&kruisev1alpha1.CloneSet{}, names.WorkerCloneSet("c", "g")).(*kruisev1alpha1.CloneSet)
	if cs.Spec.Lifecycle == nil || cs.Spec.Lifecycle.PreDelete == nil {
		t.Error("the drain hook is gone from the CloneSet")
	}
	if got := cs.Spec.UpdateStrategy.MaxUnavailable; got == nil || *got != two {
		t.Errorf("maxUnavailable = %v, want 2 (before: %v)", got, before.Spec.UpdateStrategy.MaxUnavailable)
	}
	if *cs.Spec.Replicas != 3 {
		t.Errorf("replicas = %d, want the client's 3", *cs.Spec.Replicas)
	}
}
