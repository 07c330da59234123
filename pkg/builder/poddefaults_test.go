package builder_test

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/kray-project/kray/pkg/builder"
	"github.com/kray-project/kray/pkg/constants"
)

// The Configuration file's pod defaults, as KubeRay applies them: sidecars last (after the autoscaler) in
// head and worker pods, labels, annotations and Ray container env only where the pod has none of that name
// (the user's and kray's own win), env on the Ray container only, and no init container touched.
func TestPodDefaults(t *testing.T) {
	rc := load(t, "testdata/autoscaler-v2.input.yaml")
	rc.Spec.HeadGroupSpec.Template.Labels = map[string]string{"team": "user"}
	rc.Spec.HeadGroupSpec.Template.Annotations = map[string]string{"scrape": "user"}
	rc.Spec.HeadGroupSpec.Template.Spec.Containers[0].Env = append(rc.Spec.HeadGroupSpec.Template.Spec.Containers[0].Env, corev1.EnvVar{Name: "LOG_LEVEL", Value: "user"})
	d := builder.PodDefaults{
		HeadSidecars:   []corev1.Container{{Name: "fluentbit-head", Image: "fluent/fluent-bit:1.9.6"}},
		WorkerSidecars: []corev1.Container{{Name: "fluentbit-worker", Image: "fluent/fluent-bit:1.9.6"}},
		Env:            []corev1.EnvVar{{Name: "LOG_LEVEL", Value: "default"}, {Name: "PLATFORM", Value: "gpu"}, {Name: "RAY_CLUSTER_NAME", Value: "default"}},
		Labels:         map[string]string{"team": "default", "cost-center": "ml", constants.LabelNodeType: "default"},
		Annotations:    map[string]string{"scrape": "default", "owner": "platform"},
	}
	opts := builder.Options{PodDefaults: d}
	head := builder.HeadPodTemplate(rc, opts)
	worker := builder.WorkerPodTemplate(rc, &rc.Spec.WorkerGroupSpecs[0], opts)

	names := func(cs []corev1.Container) []string {
		var out []string
		for _, c := range cs {
			out = append(out, c.Name)
		}
		return out
	}
	if got := names(head.Spec.Containers); got[len(got)-1] != "fluentbit-head" || got[len(got)-2] != "autoscaler" {
		t.Errorf("head containers %v, want the autoscaler then the sidecar last", got)
	}
	if got := names(worker.Spec.Containers); got[len(got)-1] != "fluentbit-worker" || slices.Contains(got, "fluentbit-head") {
		t.Errorf("worker containers %v, want the worker sidecar last and no head sidecar", got)
	}
	for name, want := range map[string]string{"team": "user", "cost-center": "ml", constants.LabelNodeType: constants.NodeTypeHead} {
		if head.Labels[name] != want {
			t.Errorf("head label %s = %q, want %q", name, head.Labels[name], want)
		}
	}
	if worker.Labels["team"] != "default" || worker.Labels[constants.LabelNodeType] != constants.NodeTypeWorker {
		t.Errorf("worker labels %v", worker.Labels)
	}
	if head.Annotations["scrape"] != "user" || head.Annotations["owner"] != "platform" || worker.Annotations["scrape"] != "default" {
		t.Errorf("annotations: head %v, worker %v", head.Annotations, worker.Annotations)
	}
	env := func(c corev1.Container, name string) []string {
		var out []string
		for _, e := range c.Env {
			if e.Name == name {
				out = append(out, e.Value)
			}
		}
		return out
	}
	ray := head.Spec.Containers[constants.RayContainerIndex]
	if got := env(ray, "LOG_LEVEL"); !slices.Equal(got, []string{"user"}) {
		t.Errorf("head LOG_LEVEL = %v, want the user's only", got)
	}
	if got := env(ray, "PLATFORM"); !slices.Equal(got, []string{"gpu"}) {
		t.Errorf("head PLATFORM = %v", got)
	}
	if got := env(worker.Spec.Containers[constants.RayContainerIndex], "PLATFORM"); !slices.Equal(got, []string{"gpu"}) {
		t.Errorf("worker PLATFORM = %v", got)
	}
	for _, c := range append(worker.Spec.InitContainers, head.Spec.Containers[1:]...) {
		if len(env(c, "PLATFORM")) > 0 {
			t.Errorf("container %s got a default env var; only the Ray container does", c.Name)
		}
	}
	// The input and the options are not changed.
	head.Spec.Containers[len(head.Spec.Containers)-1].Image = "changed"
	if d.HeadSidecars[0].Image != "fluent/fluent-bit:1.9.6" {
		t.Error("the pod shares its sidecar with the options")
	}
}
