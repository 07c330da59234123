package scale

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// InPlaceUpdateRestarts says whether Kruise's in-place update of pod to template restarts a container of the
// pod: a container whose image changes, or whose env takes a pod label or annotation whose value changes
// (Kruise's in-place update of env from metadata). A change of labels or annotations alone restarts nothing.
// A pod that cannot be updated in place (a container added or removed) is recreated, which counts as a restart.
func InPlaceUpdateRestarts(pod *corev1.Pod, template *corev1.PodTemplateSpec) bool {
	if len(pod.Spec.Containers) != len(template.Spec.Containers) {
		return true
	}
	for _, c := range pod.Spec.Containers {
		i := containerIndex(template.Spec.Containers, c.Name)
		if i < 0 || template.Spec.Containers[i].Image != c.Image {
			return true
		}
		for _, e := range c.Env {
			if e.ValueFrom == nil || e.ValueFrom.FieldRef == nil {
				continue
			}
			path := e.ValueFrom.FieldRef.FieldPath
			if metadataValue(path, pod.Labels, pod.Annotations) != metadataValue(path, template.Labels, template.Annotations) {
				return true
			}
		}
	}
	return false
}

func containerIndex(cs []corev1.Container, name string) int {
	for i := range cs {
		if cs[i].Name == name {
			return i
		}
	}
	return -1
}

// metadataValue is the value a downward-API field path of one label or annotation takes with these labels
// and annotations; "" for any other path (which an in-place update does not change).
func metadataValue(path string, labels, annotations map[string]string) string {
	for prefix, m := range map[string]map[string]string{"metadata.labels['": labels, "metadata.annotations['": annotations} {
		if key, ok := strings.CutPrefix(path, prefix); ok {
			return m[strings.TrimSuffix(key, "']")]
		}
	}
	return ""
}
