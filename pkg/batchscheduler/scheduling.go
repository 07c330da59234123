package batchscheduler

import (
	"strings"

	corev1 "k8s.io/api/core/v1"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/constants"
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

// Decide is the scheduling of a new cluster rc under the operator's batch scheduler, as KubeRay decides it:
// under Volcano every cluster is a gang (a PodGroup for each); under scheduler-plugins and YuniKorn a cluster
// carrying the gang scheduling label (whatever its value); under KAI none is, for KAI groups pods itself.
func Decide(rc *rayv1.RayCluster, operator string) Scheduling {
	_, labelled := rc.Labels[LabelGangScheduling]
	switch operator {
	case Volcano:
		return Scheduling{Scheduler: operator, Gang: true}
	case SchedulerPlugins, YuniKorn:
		return Scheduling{Scheduler: operator, Gang: labelled}
	case KAI:
		return Scheduling{Scheduler: operator}
	}
	return Scheduling{}
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
	if !Known(name) {
		return Scheduling{}
	}
	return Scheduling{Scheduler: name, Gang: gang}
}

// Submitter is the scheduling of a RayJob's submitter pod next to its cluster scheduled as s: a
// scheduler-plugins gang counts only the cluster's pods (the submitter starts once they run, so waiting for
// it would deadlock), while Volcano and YuniKorn take the submitter into the group as KubeRay does (Volcano
// without counting it as a member, YuniKorn as a task group of one).
func (s Scheduling) Submitter() Scheduling {
	if s.Scheduler == SchedulerPlugins {
		s.Gang = false
	}
	return s
}

// PodGroupName is the name of the PodGroup a cluster's gang is scheduled by, "" when the scheduler uses
// none: the cluster's name under scheduler-plugins; ray-<name>-pg under Volcano, where name is the RayJob's
// for a RayJob's cluster, as KubeRay names them.
func (s Scheduling) PodGroupName(rc *rayv1.RayCluster) string {
	if !s.Gang {
		return ""
	}
	switch s.Scheduler {
	case SchedulerPlugins:
		return rc.Name
	case Volcano:
		name := rc.Name
		if rc.Labels[constants.LabelOriginatedFromCRD] == constants.OriginatedFromRayJob && rc.Labels[constants.LabelOriginatedFromCRName] != "" {
			name = rc.Labels[constants.LabelOriginatedFromCRName]
		}
		return "ray-" + name + "-pg"
	}
	return ""
}

// ApplyPod sets on a pod template of the cluster rc, in its group (a worker group's name, GroupHead or
// GroupSubmitter), the metadata its scheduler reads, as KubeRay sets it on each pod: the scheduler's name
// (replacing the template's), the labels copied from the cluster, and for a gang what makes the pod a
// member. The default scheduler changes nothing.
func (s Scheduling) ApplyPod(tmpl *corev1.PodTemplateSpec, rc *rayv1.RayCluster, group string) {
	switch s.Scheduler {
	case SchedulerPlugins:
		tmpl.Spec.SchedulerName = SchedulerPluginsName
		if s.Gang {
			setLabel(tmpl, LabelPodGroup, s.PodGroupName(rc))
		}
	case Volcano:
		tmpl.Spec.SchedulerName = VolcanoName
		copyLabel(tmpl, rc, LabelVolcanoQueue, LabelVolcanoQueue)
		copyLabel(tmpl, rc, LabelPriorityClassName, LabelPriorityClassName)
		setAnnotation(tmpl, AnnotationVolcanoGroupName, s.PodGroupName(rc))
		setAnnotation(tmpl, AnnotationVolcanoTaskSpec, group)
	case YuniKorn:
		tmpl.Spec.SchedulerName = YuniKornName
		copyLabel(tmpl, rc, LabelYuniKornAppID, LabelPodApplicationID)
		copyLabel(tmpl, rc, LabelYuniKornQueue, LabelPodQueue)
		if s.Gang {
			groups := rc.Annotations[AnnotationTaskGroups]
			if groups == "" {
				groups = TaskGroupsJSON(TaskGroups(rc))
			}
			setAnnotation(tmpl, AnnotationTaskGroups, groups)
			setAnnotation(tmpl, AnnotationTaskGroupName, group)
		}
	case KAI:
		tmpl.Spec.SchedulerName = KAIName
		copyLabel(tmpl, rc, LabelKAIQueue, LabelKAIQueue)
	}
}

// podKeys are the pod labels and annotations the scheduler sets (ApplyPod).
func (s Scheduling) podKeys() (labels, annotations []string) {
	switch s.Scheduler {
	case SchedulerPlugins:
		return []string{LabelPodGroup}, nil
	case Volcano:
		return []string{LabelVolcanoQueue, LabelPriorityClassName}, []string{AnnotationVolcanoGroupName, AnnotationVolcanoTaskSpec}
	case YuniKorn:
		return []string{LabelPodApplicationID, LabelPodQueue}, []string{AnnotationTaskGroups, AnnotationTaskGroupName}
	case KAI:
		return []string{LabelKAIQueue}, nil
	}
	return nil, nil
}

// Keep sets the scheduler's labels and annotations of tmpl to those of live, the template of the workload
// as it exists (none: tmpl is kept as it is): what a scheduler reads of a pod is fixed when its workload is
// created, so that a later change of the cluster's labels (a queue) or size (YuniKorn's task groups) never
// restarts pods under an upgrade strategy that updates them. New pods join the gang their workload was made
// for.
func (s Scheduling) Keep(tmpl, live *corev1.PodTemplateSpec) {
	if live == nil {
		return
	}
	labels, annotations := s.podKeys()
	keep(&tmpl.Labels, live.Labels, labels)
	keep(&tmpl.Annotations, live.Annotations, annotations)
}

// keep makes the keys of *m what they are in live: the same value, or absent.
func keep(m *map[string]string, live map[string]string, keys []string) {
	for _, k := range keys {
		v, ok := live[k]
		switch {
		case ok && *m == nil:
			*m = map[string]string{k: v}
		case ok:
			(*m)[k] = v
		default:
			delete(*m, k)
		}
	}
}

// copyLabel copies the cluster's label from, when set and not empty, to the template's label to.
func copyLabel(tmpl *corev1.PodTemplateSpec, rc *rayv1.RayCluster, from, to string) {
	if v := rc.Labels[from]; v != "" {
		setLabel(tmpl, to, v)
	}
}

func setLabel(tmpl *corev1.PodTemplateSpec, key, value string) {
	if tmpl.Labels == nil {
		tmpl.Labels = map[string]string{}
	}
	tmpl.Labels[key] = value
}

func setAnnotation(tmpl *corev1.PodTemplateSpec, key, value string) {
	if tmpl.Annotations == nil {
		tmpl.Annotations = map[string]string{}
	}
	tmpl.Annotations[key] = value
}
