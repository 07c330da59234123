package scale

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestInPlaceUpdateRestarts(t *testing.T) {
	fromLabel := corev1.EnvVar{Name: "TIER", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels['tier']"}}}
	fromName := corev1.EnvVar{Name: "POD", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}
	base := func() corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"tier": "a", "team": "x"}, Annotations: map[string]string{"note": "1"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{
				{Name: "ray-worker", Image: "rayproject/ray:2.46.0", Env: []corev1.EnvVar{fromLabel, fromName}},
				{Name: "side", Image: "side:1"},
			}},
		}
	}
	cases := []struct {
		name   string
		change func(*corev1.PodTemplateSpec)
		want   bool
	}{
		{name: "nothing", change: func(*corev1.PodTemplateSpec) {}, want: false},
		{name: "a label no env reads", change: func(t *corev1.PodTemplateSpec) { t.Labels["team"] = "y" }, want: false},
		{name: "an annotation", change: func(t *corev1.PodTemplateSpec) { t.Annotations["note"] = "2" }, want: false},
		{name: "the Ray image", change: func(t *corev1.PodTemplateSpec) { t.Spec.Containers[0].Image = "rayproject/ray:2.52.0" }, want: true},
		{name: "a sidecar's image", change: func(t *corev1.PodTemplateSpec) { t.Spec.Containers[1].Image = "side:2" }, want: true},
		{name: "a label an env var reads", change: func(t *corev1.PodTemplateSpec) { t.Labels["tier"] = "b" }, want: true},
		{name: "a container added", change: func(t *corev1.PodTemplateSpec) {
			t.Spec.Containers = append(t.Spec.Containers, corev1.Container{Name: "new", Image: "new:1"})
		}, want: true},
		{name: "a container renamed", change: func(t *corev1.PodTemplateSpec) { t.Spec.Containers[1].Name = "other" }, want: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			running := base()
			pod := &corev1.Pod{ObjectMeta: running.ObjectMeta, Spec: running.Spec}
			target := base()
			tc.change(&target)
			if got := InPlaceUpdateRestarts(pod, &target); got != tc.want {
				t.Errorf("InPlaceUpdateRestarts = %v, want %v", got, tc.want)
			}
		})
	}
}
