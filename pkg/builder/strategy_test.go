package builder_test

import (
	"testing"

	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/builder"
	"github.com/kray-project/kray/pkg/constants"
)

// held pauses a group's update only under RollingUpdate; None always pauses, Recreate never does.
func TestWorkerCloneSetHeld(t *testing.T) {
	rc := load(t, "testdata/rolling.input.yaml")
	g := &rc.Spec.WorkerGroupSpecs[0]
	for _, tc := range []struct {
		strategy rayv1.RayClusterUpgradeType
		held     bool
		paused   bool
	}{
		{rayv1.RayClusterRollingUpdate, false, false},
		{rayv1.RayClusterRollingUpdate, true, true},
		{rayv1.RayClusterUpgradeNone, false, true},
		{rayv1.RayClusterRecreate, true, false},
	} {
		rc.Spec.UpgradeStrategy = &rayv1.RayClusterUpgradeStrategy{Type: ptr.To(tc.strategy)}
		cs := builder.WorkerCloneSet(rc, g, builder.Options{}, tc.held)
		if cs.Spec.UpdateStrategy.Paused != tc.paused {
			t.Errorf("%s held=%v: paused = %v, want %v", tc.strategy, tc.held, cs.Spec.UpdateStrategy.Paused, tc.paused)
		}
	}
	rc.Spec.UpgradeStrategy = &rayv1.RayClusterUpgradeStrategy{Type: ptr.To(rayv1.RayClusterRollingUpdate)}
	held := builder.WorkerCloneSet(rc, g, builder.Options{}, true)
	free := builder.WorkerCloneSet(rc, g, builder.Options{}, false)
	if held.Annotations[constants.AnnotationSpecHash] == free.Annotations[constants.AnnotationSpecHash] {
		t.Error("releasing a held group must change the spec hash, or kray would never write it")
	}
}

// Under RollingUpdate the group's own maxUnavailable and partition apply; other strategies keep 100% and 0.
func TestWorkerCloneSetRollingKnobs(t *testing.T) {
	rc := load(t, "testdata/rolling.input.yaml")
	g := &rc.Spec.WorkerGroupSpecs[0]
	cs := builder.WorkerCloneSet(rc, g, builder.Options{}, false)
	if got := cs.Spec.UpdateStrategy; *got.MaxUnavailable != intstr.FromInt32(1) || *got.Partition != intstr.FromString("50%") || got.Type != "InPlaceIfPossible" {
		t.Errorf("RollingUpdate strategy = %+v", got)
	}
	rc.Spec.UpgradeStrategy = nil
	cs = builder.WorkerCloneSet(rc, g, builder.Options{}, false)
	if got := cs.Spec.UpdateStrategy; *got.MaxUnavailable != intstr.FromString("100%") || *got.Partition != intstr.FromInt32(0) || got.Type != "ReCreate" {
		t.Errorf("None strategy = %+v", got)
	}
	if len(cs.Spec.Template.Spec.InitContainers) != 1 {
		t.Errorf("outside RollingUpdate the wait-gcs-ready init container stays: %d init containers", len(cs.Spec.Template.Spec.InitContainers))
	}
}
