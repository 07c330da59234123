package validation

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/constants"
)

// resizable is a cluster whose worker group g Ray's autoscaler v2 may resize in place under annotation.
func resizable(annotation string, mutate ...func(*rayv1.RayCluster)) *rayv1.RayCluster {
	return cluster(append([]func(*rayv1.RayCluster){func(rc *rayv1.RayCluster) {
		rc.Annotations = map[string]string{constants.AnnotationIPPR: annotation}
		rc.Spec.EnableInTreeAutoscaling = ptr.To(true)
		rc.Spec.AutoscalerOptions = &rayv1.AutoscalerOptions{Version: ptr.To(rayv1.AutoscalerVersionV2)}
		rc.Spec.WorkerGroupSpecs[0].Template.Spec.Containers[0].Resources.Requests = corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("1Gi"),
		}
	}}, mutate...)...)
}

func TestIPPRWarnings(t *testing.T) {
	const valid = `{"groups": {"g": {"max-cpu": "4", "max-memory": "8Gi", "resize-timeout": 60}}}`
	for _, tc := range []struct {
		name string
		rc   *rayv1.RayCluster
		want []string // one substring per warning, in order
	}{
		{"no annotation", cluster(), nil},
		{"valid", resizable(valid), nil},
		{"numbers for the maxima", resizable(`{"groups": {"g": {"max-cpu": 1.5, "max-memory": 2147483648, "resize-timeout": 30}}}`), nil},
		{"the head group", resizable(`{"groups": {"headgroup": {"max-cpu": "2", "max-memory": "4Gi", "resize-timeout": 30}}}`, func(rc *rayv1.RayCluster) {
			rc.Spec.HeadGroupSpec.Template.Spec.Containers[0].Resources.Requests = corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("2Gi"),
			}
		}), nil},
		{"not JSON", resizable(`groups: g`), []string{"not a JSON object of the form"}},
		{"autoscaler v1", resizable(valid, func(rc *rayv1.RayCluster) { rc.Spec.AutoscalerOptions = nil }), []string{"autoscaler v2"}},
		{"no autoscaler", resizable(valid, func(rc *rayv1.RayCluster) { rc.Spec.EnableInTreeAutoscaling = nil }), []string{"autoscaler v2"}},
		{"a field missing", resizable(`{"groups": {"g": {"max-cpu": "4", "max-memory": "8Gi"}}}`), []string{`group g: "resize-timeout" is required`}},
		{"a bad quantity", resizable(`{"groups": {"g": {"max-cpu": "four", "max-memory": "8Gi", "resize-timeout": 60}}}`), []string{`"max-cpu": "four" is not a Kubernetes quantity`}},
		{"fractional bytes", resizable(`{"groups": {"g": {"max-cpu": "4", "max-memory": 1.5, "resize-timeout": 60}}}`), []string{"whole number of bytes"}},
		{"a fractional timeout", resizable(`{"groups": {"g": {"max-cpu": "4", "max-memory": "8Gi", "resize-timeout": 1.5}}}`), []string{"whole number of seconds"}},
		{"a string timeout", resizable(`{"groups": {"g": {"max-cpu": "4", "max-memory": "8Gi", "resize-timeout": "60"}}}`), []string{"whole number of seconds"}},
		{"an unknown group", resizable(`{"groups": {"h": {"max-cpu": "4", "max-memory": "8Gi", "resize-timeout": 60}}}`), []string{"group h is not a group of this cluster"}},
		{"num-cpus in rayStartParams", resizable(valid, func(rc *rayv1.RayCluster) {
			rc.Spec.WorkerGroupSpecs[0].RayStartParams = map[string]string{"num-cpus": "2"}
		}), []string{"group g: should not have 'num-cpus' or 'memory' in rayStartParams if IPPR is used"}},
		{"memory in rayStartParams", resizable(valid, func(rc *rayv1.RayCluster) {
			rc.Spec.WorkerGroupSpecs[0].RayStartParams = map[string]string{"memory": "1000000"}
		}), []string{"should not have 'num-cpus' or 'memory'"}},
		{"no memory request", resizable(valid, func(rc *rayv1.RayCluster) {
			delete(rc.Spec.WorkerGroupSpecs[0].Template.Spec.Containers[0].Resources.Requests, corev1.ResourceMemory)
		}), []string{"should have 'cpu' and 'memory' in resource requests as the resources lower bounds if IPPR is used"}},
		{"a restarting resize", resizable(valid, func(rc *rayv1.RayCluster) {
			rc.Spec.WorkerGroupSpecs[0].Template.Spec.Containers[0].ResizePolicy = []corev1.ContainerResizePolicy{
				{ResourceName: corev1.ResourceCPU, RestartPolicy: corev1.NotRequired},
				{ResourceName: corev1.ResourceMemory, RestartPolicy: corev1.RestartContainer},
			}
		}), []string{"IPPR only supports restartPolicy=NotRequired"}},
		{"only the Ray container counts", resizable(valid, func(rc *rayv1.RayCluster) {
			tmpl := &rc.Spec.WorkerGroupSpecs[0].Template.Spec
			tmpl.Containers = append(tmpl.Containers, corev1.Container{Name: "sidecar", ResizePolicy: []corev1.ContainerResizePolicy{
				{ResourceName: corev1.ResourceMemory, RestartPolicy: corev1.RestartContainer},
			}})
		}), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := IPPRWarnings(tc.rc)
			if len(got) != len(tc.want) {
				t.Fatalf("got %d warnings, want %d: %+v", len(got), len(tc.want), got)
			}
			for i, w := range got {
				if w.Reason != EventInvalidIPPRSpec || !strings.Contains(w.Message, tc.want[i]) {
					t.Errorf("warning %d = %s %q, want %s containing %q", i, w.Reason, w.Message, EventInvalidIPPRSpec, tc.want[i])
				}
			}
		})
	}
	// Warnings carries them with the cluster's other warnings.
	if got := Warnings(resizable(`{}x`)); len(got) != 1 || got[0].Reason != EventInvalidIPPRSpec {
		t.Errorf("Warnings = %+v, want the IPPR warning", got)
	}
}
