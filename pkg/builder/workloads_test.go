package builder_test

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/kray-project/kray/pkg/builder"
	"github.com/kray-project/kray/pkg/constants"
)

// The spec hash depends on the template's content only, never on the order of its maps, and changes with any
// value in them.
func TestSpecHashIsStable(t *testing.T) {
	rc := load(t, "testdata/features.input.yaml")
	tmpl := &rc.Spec.WorkerGroupSpecs[0].Template
	tmpl.Labels, tmpl.Annotations, tmpl.Spec.NodeSelector = map[string]string{}, map[string]string{}, map[string]string{}
	for i := range 40 {
		tmpl.Labels[fmt.Sprintf("l%02d", i)] = "v"
		tmpl.Annotations[fmt.Sprintf("a%02d", i)] = "v"
		tmpl.Spec.NodeSelector[fmt.Sprintf("n%02d", i)] = "v"
	}
	hash := func() string {
		return builder.WorkerCloneSet(rc, &rc.Spec.WorkerGroupSpecs[0], builder.Options{}, false).Annotations[constants.AnnotationSpecHash]
	}
	first := hash()
	for range 20 {
		if got := hash(); got != first {
			t.Fatalf("spec hash %s, then %s, for the same template", first, got)
		}
	}
	tmpl.Spec.NodeSelector["n07"] = "w"
	if hash() == first {
		t.Error("a changed nodeSelector value left the spec hash unchanged")
	}
	tmpl.Spec.NodeSelector["n07"] = "v"
	rc.Spec.WorkerGroupSpecs[0].Template.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3")}
	if hash() == first {
		t.Error("a changed resource limit left the spec hash unchanged")
	}
}
