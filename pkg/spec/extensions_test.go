package spec

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/constants"
)

func extCluster(annotations map[string]string, edit func(*rayv1.RayCluster)) *rayv1.RayCluster {
	rc := &rayv1.RayCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "c", Annotations: annotations},
		Spec:       rayv1.RayClusterSpec{WorkerGroupSpecs: []rayv1.WorkerGroupSpec{{GroupName: "a"}, {GroupName: "b"}}},
	}
	if edit != nil {
		edit(rc)
	}
	return rc
}

func TestWithExtensions(t *testing.T) {
	one := intstr.FromInt32(1)
	half := intstr.FromString("50%")
	tests := []struct {
		name        string
		rc          *rayv1.RayCluster
		wantDrain   *int32
		wantRolling map[string]*intstr.IntOrString // group -> maxUnavailable
		wantErr     string
	}{
		{name: "nothing", rc: extCluster(nil, nil), wantRolling: map[string]*intstr.IntOrString{}},
		{name: "spec fields only", rc: extCluster(nil, func(rc *rayv1.RayCluster) {
			rc.Spec.WorkerDrain = &rayv1.WorkerDrainOptions{TimeoutSeconds: ptr.To[int32](30)}
			rc.Spec.WorkerGroupSpecs[0].RollingUpdate = &rayv1.WorkerGroupRollingUpdate{MaxUnavailable: &one}
		}), wantDrain: ptr.To[int32](30), wantRolling: map[string]*intstr.IntOrString{"a": &one}},
		{name: "fields dropped by a client: the annotations fill them", rc: extCluster(map[string]string{
			constants.AnnotationWorkerDrain:   `{"timeoutSeconds":30}`,
			constants.AnnotationRollingUpdate: `{"a":{"maxUnavailable":1},"gone":{"maxUnavailable":"50%"}}`,
		}, nil), wantDrain: ptr.To[int32](30), wantRolling: map[string]*intstr.IntOrString{"a": &one}},
		{name: "a set field wins over the annotation", rc: extCluster(map[string]string{
			constants.AnnotationWorkerDrain:   `{"timeoutSeconds":30}`,
			constants.AnnotationRollingUpdate: `{"a":{"maxUnavailable":1}}`,
		}, func(rc *rayv1.RayCluster) {
			rc.Spec.WorkerDrain = &rayv1.WorkerDrainOptions{TimeoutSeconds: ptr.To[int32](90)}
			rc.Spec.WorkerGroupSpecs[0].RollingUpdate = &rayv1.WorkerGroupRollingUpdate{MaxUnavailable: &half}
		}), wantDrain: ptr.To[int32](90), wantRolling: map[string]*intstr.IntOrString{"a": &half}},
		{name: "not JSON", rc: extCluster(map[string]string{constants.AnnotationWorkerDrain: `timeoutSeconds: 30`}, nil),
			wantErr: "annotation kray.io/worker-drain: not valid JSON"},
		{name: "misspelt field", rc: extCluster(map[string]string{constants.AnnotationRollingUpdate: `{"a":{"maxUnavailble":1}}`}, nil),
			wantErr: `unknown field "maxUnavailble"`},
		{name: "upgrade type not known", rc: extCluster(map[string]string{constants.AnnotationUpgradeStrategy: `{"type":"Rolling"}`}, nil),
			wantErr: `type must be Recreate, None or RollingUpdate, got "Rolling"`},
		{name: "timeout out of range", rc: extCluster(map[string]string{constants.AnnotationWorkerDrain: `{"timeoutSeconds":0}`}, nil),
			wantErr: "timeoutSeconds must be between 1 and 86400, got 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.rc.DeepCopy()
			got, err := WithExtensions(tt.rc)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(before, tt.rc); diff != "" {
				t.Errorf("the input was changed:\n%s", diff)
			}
			var drain *int32
			if got.Spec.WorkerDrain != nil {
				drain = got.Spec.WorkerDrain.TimeoutSeconds
			}
			if !cmp.Equal(drain, tt.wantDrain) {
				t.Errorf("workerDrain.timeoutSeconds = %v, want %v", drain, tt.wantDrain)
			}
			rolling := map[string]*intstr.IntOrString{}
			for _, g := range got.Spec.WorkerGroupSpecs {
				if g.RollingUpdate != nil {
					rolling[g.GroupName] = g.RollingUpdate.MaxUnavailable
				}
			}
			if diff := cmp.Diff(tt.wantRolling, rolling); diff != "" {
				t.Errorf("rollingUpdate (-want +got):\n%s", diff)
			}
		})
	}
}

func TestExtensionAnnotations(t *testing.T) {
	one := intstr.FromInt32(1)
	rc := extCluster(map[string]string{
		constants.AnnotationRollingUpdate: `{"b":{"partition":2},"removed-group":{"partition":1}}`,
	}, func(rc *rayv1.RayCluster) {
		rc.Spec.WorkerDrain = &rayv1.WorkerDrainOptions{TimeoutSeconds: ptr.To[int32](30)}
		rc.Spec.WorkerGroupSpecs[0].RollingUpdate = &rayv1.WorkerGroupRollingUpdate{MaxUnavailable: &one}
	})
	got, err := ExtensionAnnotations(rc)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		constants.AnnotationWorkerDrain:     `{"timeoutSeconds":30}`,
		constants.AnnotationRollingUpdate:   `{"a":{"maxUnavailable":1},"b":{"partition":2}}`,
		constants.AnnotationUpgradeStrategy: "",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("annotations (-want +got):\n%s", diff)
	}
	if !ExtensionAnnotationsDiffer(rc, got) {
		t.Error("the cluster's annotations differ from what kray keeps, but ExtensionAnnotationsDiffer says no")
	}
	rc.Annotations = got
	if ExtensionAnnotationsDiffer(rc, got) {
		t.Error("kept annotations reported as differing")
	}
	none, err := ExtensionAnnotations(extCluster(nil, nil))
	if err != nil || none[constants.AnnotationWorkerDrain] != "" || none[constants.AnnotationRollingUpdate] != "" {
		t.Errorf("no settings: %v %v, want both annotations absent", none, err)
	}
	if ExtensionAnnotationsDiffer(extCluster(nil, nil), none) {
		t.Error("a cluster without settings or annotations differs")
	}
}

func TestUpgradeStrategyKeptInAnnotation(t *testing.T) {
	rolling := rayv1.RayClusterRollingUpdate
	rc := extCluster(nil, func(rc *rayv1.RayCluster) {
		rc.Spec.UpgradeStrategy = &rayv1.RayClusterUpgradeStrategy{Type: &rolling}
	})
	kept, err := ExtensionAnnotations(rc)
	if err != nil || kept[constants.AnnotationUpgradeStrategy] != `{"type":"RollingUpdate"}` {
		t.Fatalf("annotation %q (%v)", kept[constants.AnnotationUpgradeStrategy], err)
	}
	dropped := extCluster(kept, nil) // a client without upgradeStrategy wrote the object back
	got, err := WithExtensions(dropped)
	if err != nil || !Rolling(got) {
		t.Errorf("rolling after the field was dropped: %t (%v)", Rolling(got), err)
	}
}
