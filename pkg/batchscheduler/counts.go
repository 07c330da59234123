package batchscheduler

import (
	"encoding/json"

	corev1 "k8s.io/api/core/v1"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/spec"
)

// MinMember is the gang's size: the head and every worker pod the cluster wants (clamped replicas times
// numOfHosts, suspended groups none), as KubeRay counts them.
func MinMember(rc *rayv1.RayCluster) int32 {
	return size(rc, func(g *rayv1.WorkerGroupSpec) int32 { return spec.GroupReplicas(rc, g) })
}

// MinResources are the resources of the pods MinMember counts, each pod's from its template's containers
// (requests, a limit where a resource has no request), as KubeRay counts a pod. KubeRay multiplies by the
// unclamped replicas here while it counts the clamped ones as members; kray counts the same pods for both.
func MinResources(rc *rayv1.RayCluster) corev1.ResourceList {
	return resources(rc, func(g *rayv1.WorkerGroupSpec) int32 { return spec.GroupReplicas(rc, g) })
}

// VolcanoSize is the size of a cluster's Volcano PodGroup: MinMember and MinResources, or for an
// autoscaling cluster the head and each group's minReplicas (the pods it keeps however far it scales down),
// as KubeRay sizes it. Suspended groups count nothing in either (KubeRay counts their minimum resources).
func VolcanoSize(rc *rayv1.RayCluster) (int32, corev1.ResourceList) {
	if !spec.AutoscalingEnabled(rc) {
		return MinMember(rc), MinResources(rc)
	}
	least := func(g *rayv1.WorkerGroupSpec) int32 {
		if spec.GroupSuspended(rc, g) {
			return 0
		}
		return minPods(g)
	}
	return size(rc, least), resources(rc, least)
}

// minPods is a group's minReplicas (none when unset) times its hosts.
func minPods(g *rayv1.WorkerGroupSpec) int32 {
	n := int64(0)
	if g.MinReplicas != nil {
		n = int64(*g.MinReplicas) * int64(spec.NumOfHosts(g))
	}
	return saturate(n)
}

// size is the head and pods(g) of each worker group.
func size(rc *rayv1.RayCluster, pods func(*rayv1.WorkerGroupSpec) int32) int32 {
	n := int64(1)
	for i := range rc.Spec.WorkerGroupSpecs {
		n += int64(pods(&rc.Spec.WorkerGroupSpecs[i]))
	}
	return saturate(n)
}

// resources are the head's and pods(g) times each worker group's pod resources.
func resources(rc *rayv1.RayCluster, pods func(*rayv1.WorkerGroupSpec) int32) corev1.ResourceList {
	total := corev1.ResourceList{}
	add(total, PodResources(&rc.Spec.HeadGroupSpec.Template.Spec), 1)
	for i := range rc.Spec.WorkerGroupSpecs {
		g := &rc.Spec.WorkerGroupSpecs[i]
		add(total, PodResources(&g.Template.Spec), int64(pods(g)))
	}
	return total
}

func saturate(n int64) int32 {
	if n > 1<<31-1 {
		return 1<<31 - 1
	}
	return int32(n)
}

// PodResources sums the requests of the pod's containers (init containers and overhead aside), a limit
// standing in for a resource the container does not request.
func PodResources(pod *corev1.PodSpec) corev1.ResourceList {
	total := corev1.ResourceList{}
	for i := range pod.Containers {
		c := &pod.Containers[i]
		r := c.Resources.Requests.DeepCopy()
		if r == nil {
			r = corev1.ResourceList{}
		}
		for name, q := range c.Resources.Limits {
			if _, ok := r[name]; !ok {
				r[name] = q
			}
		}
		add(total, r, 1)
	}
	return total
}

// ResourcesJSON is the JSON form of a resource list (the submitter's, on its cluster).
func ResourcesJSON(r corev1.ResourceList) string {
	out, err := json.Marshal(r)
	if err != nil {
		panic(err) // quantities always marshal
	}
	return string(out)
}

// ParseResources reads ResourcesJSON's form; anything else is no resources.
func ParseResources(s string) corev1.ResourceList {
	var r corev1.ResourceList
	if s == "" || json.Unmarshal([]byte(s), &r) != nil {
		return nil
	}
	return r
}

// Sum is the sum of resource lists.
func Sum(lists ...corev1.ResourceList) corev1.ResourceList {
	total := corev1.ResourceList{}
	for _, l := range lists {
		add(total, l, 1)
	}
	return total
}

// add adds n times r to total.
func add(total, r corev1.ResourceList, n int64) {
	if n == 0 {
		return
	}
	for name, q := range r {
		q = q.DeepCopy()
		q.Mul(n) // exact: past int64 it continues in decimal
		sum := total[name]
		sum.Add(q)
		total[name] = sum
	}
}
