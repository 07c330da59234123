package builder_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
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

// The recreate hash ignores what the autoscaler and external controllers change, and follows the rest.
func TestRecreateHash(t *testing.T) {
	rc := load(t, "testdata/recreate.input.yaml")
	base := builder.RecreateHash(rc)
	scaled := rc.DeepCopy()
	scaled.Spec.WorkerGroupSpecs[0].Replicas = ptr.To[int32](4)
	scaled.Spec.WorkerGroupSpecs[0].MaxReplicas = ptr.To[int32](9)
	scaled.Spec.WorkerGroupSpecs[0].ScaleStrategy.WorkersToDelete = []string{"x"}
	scaled.Spec.WorkerGroupSpecs[0].Template.Spec.Tolerations = []corev1.Toleration{{Key: "kueue"}}
	scaled.Spec.UpgradeStrategy = nil
	if got := builder.RecreateHash(scaled); got != base {
		t.Errorf("hash changed with replicas, bounds, workersToDelete, tolerations or upgradeStrategy: %s != %s", got, base)
	}
	changed := rc.DeepCopy()
	changed.Spec.WorkerGroupSpecs[0].Template.Spec.Containers[0].Image = "rayproject/ray:2.47.0"
	if builder.RecreateHash(changed) == base {
		t.Error("hash ignored a worker image change")
	}
	head := builder.HeadStatefulSet(rc, builder.Options{})
	if head.Spec.Template.Annotations[constants.AnnotationRecreateHash] != base {
		t.Error("the head template does not carry the recreate hash")
	}
}

// Under RollingUpdate the head template leaves the workers out of its recreate hash: a worker change never
// updates the head pod.
func TestRollingWorkerChangeLeavesTheHead(t *testing.T) {
	rc := load(t, "testdata/rolling.input.yaml")
	before := builder.HeadStatefulSet(rc, builder.Options{})
	changed := rc.DeepCopy()
	changed.Spec.WorkerGroupSpecs[0].Template.Spec.Containers[0].Image = "rayproject/ray:2.47.0"
	after := builder.HeadStatefulSet(changed, builder.Options{})
	if before.Annotations[constants.AnnotationSpecHash] != after.Annotations[constants.AnnotationSpecHash] {
		t.Error("a worker image change rewrote the head StatefulSet")
	}
	changed.Spec.HeadGroupSpec.Template.Spec.Containers[0].Image = "rayproject/ray:2.47.0"
	if builder.HeadStatefulSet(changed, builder.Options{}).Spec.Template.Annotations[constants.AnnotationRecreateHash] == before.Spec.Template.Annotations[constants.AnnotationRecreateHash] {
		t.Error("the head's recreate hash ignored a head image change")
	}
}

// KubeRay's operator switches, as builder options.
func TestOperatorSwitches(t *testing.T) {
	rc := load(t, "testdata/minimal.input.yaml")
	g := &rc.Spec.WorkerGroupSpecs[0]
	def := builder.WorkerCloneSet(rc, g, builder.Options{}, false).Spec.Template.Spec
	off := builder.WorkerCloneSet(rc, g, builder.Options{NoInitContainerInjection: true, NoProbesInjection: true, LoginShell: true}, false).Spec.Template.Spec
	if len(def.InitContainers) != 1 || len(off.InitContainers) != 0 {
		t.Errorf("init containers: default %d, switched off %d", len(def.InitContainers), len(off.InitContainers))
	}
	if def.Containers[0].ReadinessProbe == nil || off.Containers[0].ReadinessProbe != nil || off.Containers[0].LivenessProbe != nil {
		t.Error("probes are injected by default and not when switched off")
	}
	if def.Containers[0].Command[1] != "-c" || off.Containers[0].Command[1] != "-lc" {
		t.Errorf("shell: default %v, login %v", def.Containers[0].Command, off.Containers[0].Command)
	}
	if svc := builder.HeadService(rc, builder.Options{}); svc.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Errorf("default head Service is not headless: %q", svc.Spec.ClusterIP)
	}
	if svc := builder.HeadService(rc, builder.Options{HeadClusterIPService: true}); svc.Spec.ClusterIP != "" || svc.Spec.PublishNotReadyAddresses {
		t.Errorf("cluster IP head Service: clusterIP %q, publishNotReadyAddresses %v", svc.Spec.ClusterIP, svc.Spec.PublishNotReadyAddresses)
	}
}
