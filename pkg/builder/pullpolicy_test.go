package builder

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

func TestDefaultPullPolicy(t *testing.T) {
	for image, want := range map[string]corev1.PullPolicy{
		"rayproject/ray:2.46.0":                   corev1.PullIfNotPresent,
		"rayproject/ray":                          corev1.PullAlways,
		"rayproject/ray:latest":                   corev1.PullAlways,
		"registry.example.com:5000/ray":           corev1.PullAlways,
		"registry.example.com:5000/ray:2.52.0":    corev1.PullIfNotPresent,
		"rayproject/ray@sha256:0123456789abcdef":  corev1.PullIfNotPresent,
		"rayproject/ray:latest@sha256:0123456789": corev1.PullAlways,
		"rayproject/ray:2.9.0@sha256:0123456789":  corev1.PullIfNotPresent,
		"":                                        corev1.PullIfNotPresent,
	} {
		if got := defaultPullPolicy(image); got != want {
			t.Errorf("defaultPullPolicy(%q) = %s, want %s", image, got, want)
		}
	}
}

func TestSetPullPolicies(t *testing.T) {
	tmpl := func(init, main []corev1.Container) *corev1.PodTemplateSpec {
		return &corev1.PodTemplateSpec{Spec: corev1.PodSpec{InitContainers: init, Containers: main}}
	}
	c := func(name, image string, p corev1.PullPolicy) corev1.Container {
		return corev1.Container{Name: name, Image: image, ImagePullPolicy: p}
	}
	cases := []struct {
		name       string
		tmpl, live *corev1.PodTemplateSpec
		want       *corev1.PodTemplateSpec
	}{{
		name: "no workload yet: the API server's default for each image",
		tmpl: tmpl([]corev1.Container{c("init", "busybox", "")}, []corev1.Container{c("ray-head", "rayproject/ray:2.46.0", ""), c("side", "side:latest", "")}),
		want: tmpl([]corev1.Container{c("init", "busybox", corev1.PullAlways)}, []corev1.Container{c("ray-head", "rayproject/ray:2.46.0", corev1.PullIfNotPresent), c("side", "side:latest", corev1.PullAlways)}),
	}, {
		name: "the user's policy wins over the live one",
		tmpl: tmpl(nil, []corev1.Container{c("ray-head", "rayproject/ray:2.46.0", corev1.PullNever)}),
		live: tmpl(nil, []corev1.Container{c("ray-head", "rayproject/ray:2.46.0", corev1.PullAlways)}),
		want: tmpl(nil, []corev1.Container{c("ray-head", "rayproject/ray:2.46.0", corev1.PullNever)}),
	}, {
		name: "a workload made with Kruise's Always keeps it; a new container gets the default",
		tmpl: tmpl(nil, []corev1.Container{c("ray-head", "rayproject/ray:2.52.0", ""), c("new", "new:1", "")}),
		live: tmpl(nil, []corev1.Container{c("ray-head", "rayproject/ray:2.46.0", corev1.PullAlways)}),
		want: tmpl(nil, []corev1.Container{c("ray-head", "rayproject/ray:2.52.0", corev1.PullAlways), c("new", "new:1", corev1.PullIfNotPresent)}),
	}, {
		name: "an init container does not take the policy of a container of the same name",
		tmpl: tmpl([]corev1.Container{c("x", "x:1", "")}, []corev1.Container{c("x", "x:1", "")}),
		live: tmpl(nil, []corev1.Container{c("x", "x:1", corev1.PullAlways)}),
		want: tmpl([]corev1.Container{c("x", "x:1", corev1.PullIfNotPresent)}, []corev1.Container{c("x", "x:1", corev1.PullAlways)}),
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var before *corev1.PodTemplateSpec
			if tc.live != nil {
				before = tc.live.DeepCopy()
			}
			setPullPolicies(tc.tmpl, tc.live)
			if diff := cmp.Diff(tc.want, tc.tmpl); diff != "" {
				t.Fatalf("(-want +got):\n%s", diff)
			}
			if tc.live != nil {
				if diff := cmp.Diff(before, tc.live); diff != "" {
					t.Fatalf("live modified:\n%s", diff)
				}
			}
		})
	}
}
