package builder

import (
	corev1 "k8s.io/api/core/v1"
)

// apply adds d's labels and annotations that tmpl lacks and appends sidecars (copies) to its containers,
// last, after the Ray container, the user's containers and the autoscaler. The Ray container's env defaults
// are added by finishPod, before kray's own variables, as KubeRay adds them.
func (d PodDefaults) apply(tmpl *corev1.PodTemplateSpec, sidecars []corev1.Container) {
	for k, v := range d.Labels {
		if _, ok := tmpl.Labels[k]; !ok {
			tmpl.Labels[k] = v
		}
	}
	for k, v := range d.Annotations {
		if _, ok := tmpl.Annotations[k]; !ok {
			tmpl.Annotations[k] = v
		}
	}
	for i := range sidecars {
		tmpl.Spec.Containers = append(tmpl.Spec.Containers, *sidecars[i].DeepCopy())
	}
}
