package main

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// clusterSpec is the shape of a benchmark RayCluster: a head and one worker group "workers".
type clusterSpec struct {
	workers, minWorkers, maxWorkers int
	autoscaling                     bool // enableInTreeAutoscaling
}

// smallCluster is the default fixture: 1 head + 3 workers.
var smallCluster = clusterSpec{workers: 3, minWorkers: 0, maxWorkers: 10}

// resources requests and limits 1 CPU / 1 GiB per Ray container, as a real Ray pod would.
func resources() map[string]any {
	r := map[string]any{"cpu": "1", "memory": "1Gi"}
	return map[string]any{"requests": r, "limits": r}
}

func container(name string) map[string]any {
	return map[string]any{
		"name":      name,
		"image":     "rayproject/ray:2.46.0",
		"resources": resources(),
	}
}

// rayCluster renders a ray.io/v1 RayCluster that both KubeRay's and kray's CRD accept.
func rayCluster(namespace, name string, s clusterSpec) *unstructured.Unstructured {
	spec := map[string]any{
		"rayVersion": "2.46.0",
		"headGroupSpec": map[string]any{
			"rayStartParams": map[string]any{},
			"template": map[string]any{"spec": map[string]any{
				"containers": []any{container("ray-head")},
			}},
		},
		"workerGroupSpecs": []any{map[string]any{
			"groupName":      "workers",
			"replicas":       int64(s.workers),
			"minReplicas":    int64(s.minWorkers),
			"maxReplicas":    int64(s.maxWorkers),
			"rayStartParams": map[string]any{},
			"template": map[string]any{"spec": map[string]any{
				"containers": []any{container("ray-worker")},
			}},
		}},
	}
	if s.autoscaling {
		spec["enableInTreeAutoscaling"] = true
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "ray.io/v1",
		"kind":       "RayCluster",
		"metadata":   map[string]any{"name": name, "namespace": namespace},
		"spec":       spec,
	}}
}
