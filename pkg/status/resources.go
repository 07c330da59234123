package status

import (
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/spec"
)

var migResource = regexp.MustCompile(`^nvidia\.com/mig-\d+g\.\d+gb$`)

// desiredResources sums CPU, memory, GPU and TPU over the head and every unsuspended group's raw
// replicas × numOfHosts, taking each container's request before its limit.
func desiredResources(rc *rayv1.RayCluster, st *rayv1.RayClusterStatus) {
	total := podResources(rc.Spec.HeadGroupSpec.Template.Spec)
	for i := range rc.Spec.WorkerGroupSpecs {
		g := &rc.Spec.WorkerGroupSpecs[i]
		if spec.GroupSuspended(rc, g) {
			continue
		}
		n := int64(ptr.Deref(g.Replicas, 0)) * int64(spec.NumOfHosts(g))
		per := podResources(g.Template.Spec)
		for name, q := range per {
			q.Mul(n)
			add(total, name, q)
		}
	}
	st.DesiredCPU = get(total, corev1.ResourceCPU)
	st.DesiredMemory = get(total, corev1.ResourceMemory)
	gpu := resource.Quantity{}
	for name, q := range total {
		if strings.HasSuffix(string(name), "gpu") || migResource.MatchString(string(name)) {
			gpu.Add(q)
		}
	}
	st.DesiredGPU = gpu
	st.DesiredTPU = get(total, "google.com/tpu")
}

func podResources(spec corev1.PodSpec) corev1.ResourceList {
	out := corev1.ResourceList{}
	for _, c := range spec.Containers {
		names := map[corev1.ResourceName]bool{}
		for n := range c.Resources.Limits {
			names[n] = true
		}
		for n := range c.Resources.Requests {
			names[n] = true
		}
		for n := range names {
			q, ok := c.Resources.Requests[n]
			if !ok {
				q = c.Resources.Limits[n]
			}
			add(out, n, q)
		}
	}
	return out
}

func add(list corev1.ResourceList, name corev1.ResourceName, q resource.Quantity) {
	cur := list[name]
	cur.Add(q)
	list[name] = cur
}

func get(list corev1.ResourceList, name corev1.ResourceName) resource.Quantity {
	q := list[name]
	return q
}
