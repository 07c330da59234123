package batchscheduler

import (
	"strings"

	corev1 "k8s.io/api/core/v1"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/spec"
)

// gangSuffix marks a gang in Scheduling's annotation form.
const gangSuffix = ";gang"

// Scheduling is how a cluster's pods are scheduled: by which batch scheduler ("" for Kubernetes' default
// scheduler) and whether as one gang. It is fixed when the cluster's workloads are created (kept in their
// kray.io/batch-scheduler annotation), so that an operator started with another --batch-scheduler, or a gang
// label added later, never leaves a cluster with pods of two kinds: a gang whose older pods are not members
// would wait forever.
type Scheduling struct {
	Scheduler string
	Gang      bool
}

// Decide is the scheduling of a new cluster rc under the operator's batch scheduler: a gang when the cluster
// carries the gang scheduling label (whatever its value, as in KubeRay).
func Decide(rc *rayv1.RayCluster, operator string) Scheduling {
	if operator == "" {
		return Scheduling{}
	}
	_, gang := rc.Labels[LabelGangScheduling]
	return Scheduling{Scheduler: operator, Gang: gang}
}

// String is the annotation form: "", "scheduler-plugins" or "scheduler-plugins;gang".
func (s Scheduling) String() string {
	if s.Scheduler == "" {
		return ""
	}
	if s.Gang {
		return s.Scheduler + gangSuffix
	}
	return s.Scheduler
}

// Parse reads the annotation form; anything else is the default scheduler.
func Parse(v string) Scheduling {
	name, gang := strings.CutSuffix(v, gangSuffix)
	if !Implemented[name] {
		return Scheduling{}
	}
	return Scheduling{Scheduler: name, Gang: gang}
}

// PodGroupNeeded reports whether the cluster's pods are a scheduler-plugins gang.
func (s Scheduling) PodGroupNeeded() bool { return s.Scheduler == SchedulerPlugins && s.Gang }

// ApplyPod sets the scheduler's metadata on a pod template of the cluster named cluster: the scheduler's
// name, and for a scheduler-plugins gang the PodGroup label. The scheduler's name replaces the template's,
// as KubeRay does.
func (s Scheduling) ApplyPod(tmpl *corev1.PodTemplateSpec, cluster string) {
	switch s.Scheduler {
	case SchedulerPlugins:
		tmpl.Spec.SchedulerName = SchedulerPluginsName
		if s.Gang {
			if tmpl.Labels == nil {
				tmpl.Labels = map[string]string{}
			}
			tmpl.Labels[LabelPodGroup] = cluster
		}
	}
}

// MinMember is the gang's size: the head and every worker pod the cluster wants (clamped replicas times
// numOfHosts, suspended groups none), as KubeRay counts them.
func MinMember(rc *rayv1.RayCluster) int32 {
	n := int64(1)
	for i := range rc.Spec.WorkerGroupSpecs {
		n += int64(spec.GroupReplicas(rc, &rc.Spec.WorkerGroupSpecs[i]))
	}
	if n > 1<<31-1 {
		return 1<<31 - 1
	}
	return int32(n)
}

// MinResources are the resources of the pods MinMember counts, each pod's from its template's containers
// (requests, a limit where a resource has no request), as KubeRay counts a pod. KubeRay multiplies by the
// unclamped replicas here while it counts the clamped ones as members; kray counts the same pods for both.
func MinResources(rc *rayv1.RayCluster) corev1.ResourceList {
	total := corev1.ResourceList{}
	add(total, PodResources(&rc.Spec.HeadGroupSpec.Template.Spec), 1)
	for i := range rc.Spec.WorkerGroupSpecs {
		g := &rc.Spec.WorkerGroupSpecs[i]
		add(total, PodResources(&g.Template.Spec), int64(spec.GroupReplicas(rc, g)))
	}
	return total
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
