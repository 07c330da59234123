package batchscheduler

import (
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/spec"
)

// TaskGroup is one group of a YuniKorn gang, in the form of YuniKorn's yunikorn.apache.org/task-groups
// annotation (its fields in the order KubeRay writes them): YuniKorn reserves minMember placeholders of
// minResource each, placed as the selector, affinity and tolerations say, before any real pod binds.
type TaskGroup struct {
	MinResource  map[string]resource.Quantity `json:"minResource"`
	NodeSelector map[string]string            `json:"nodeSelector,omitempty"`
	Affinity     *corev1.Affinity             `json:"affinity,omitempty"`
	Name         string                       `json:"name"`
	Tolerations  []corev1.Toleration          `json:"tolerations,omitempty"`
	MinMember    int32                        `json:"minMember"`
}

// TaskGroups are a cluster's YuniKorn task groups, as KubeRay makes them: the head (one pod), then each
// worker group in order with its minReplicas times numOfHosts, every pod sized by its template's containers.
// A suspended group has no member (KubeRay counts its minimum, whose pods never come).
func TaskGroups(rc *rayv1.RayCluster) []TaskGroup {
	groups := []TaskGroup{taskGroup(GroupHead, 1, &rc.Spec.HeadGroupSpec.Template.Spec)}
	for i := range rc.Spec.WorkerGroupSpecs {
		g := &rc.Spec.WorkerGroupSpecs[i]
		n := minPods(g)
		if spec.GroupSuspended(rc, g) {
			n = 0
		}
		groups = append(groups, taskGroup(g.GroupName, n, &g.Template.Spec))
	}
	return groups
}

// SubmitterTaskGroup is the task group of a RayJob's submitter pod, whose template is tmpl.
func SubmitterTaskGroup(tmpl *corev1.PodTemplateSpec) TaskGroup {
	return taskGroup(GroupSubmitter, 1, &tmpl.Spec)
}

func taskGroup(name string, members int32, pod *corev1.PodSpec) TaskGroup {
	min := map[string]resource.Quantity{}
	for k, q := range PodResources(pod) {
		min[string(k)] = q
	}
	return TaskGroup{MinResource: min, NodeSelector: pod.NodeSelector, Affinity: pod.Affinity, Name: name,
		Tolerations: pod.Tolerations, MinMember: members}
}

// TaskGroupsJSON is the annotation value of groups.
func TaskGroupsJSON(groups []TaskGroup) string {
	out, err := json.Marshal(groups)
	if err != nil {
		panic(err) // maps of strings and quantities and API types always marshal
	}
	return string(out)
}
