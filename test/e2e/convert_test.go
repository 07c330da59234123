package e2e

import "k8s.io/apimachinery/pkg/runtime"

// runtimeToUnstructured converts a typed object to the map form used by unstructured objects.
func runtimeToUnstructured(obj any) (map[string]any, error) {
	return runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
}
