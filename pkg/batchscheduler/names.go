// Package batchscheduler is what kray does for KubeRay's batch schedulers: which scheduler a cluster's pods
// go to, whether they are scheduled as a gang, and the objects and pod metadata each scheduler needs. It is
// pure: no client, no environment.
package batchscheduler

import "github.com/kray-project/kray/pkg/constants"

// The names --batch-scheduler takes, KubeRay's.
const (
	Volcano          = "volcano"
	YuniKorn         = "yunikorn"
	SchedulerPlugins = "scheduler-plugins"
	KAI              = "kai-scheduler"
)

// Known reports whether name is one of the batch schedulers KubeRay integrates.
func Known(name string) bool {
	switch name {
	case Volcano, YuniKorn, SchedulerPlugins, KAI:
		return true
	}
	return false
}

// UsesPodGroups reports whether the batch scheduler name schedules gangs by a PodGroup that kray makes
// (scheduler-plugins and Volcano; YuniKorn reads its pods' annotations, and KAI makes its own).
func UsesPodGroups(name string) bool {
	return name == SchedulerPlugins || name == Volcano
}

// KubeRay's labels, annotations and names, shared by the schedulers.
const (
	// LabelGangScheduling on a RayCluster (or a RayJob or RayService, which copy their labels to their
	// clusters) asks for gang scheduling; its presence counts, whatever its value, as in KubeRay.
	LabelGangScheduling = "ray.io/gang-scheduling-enabled"
	// LabelPriorityClassName on a cluster is its Volcano PodGroup's priority class, copied to its pods.
	LabelPriorityClassName = "ray.io/priority-class-name"
	// GroupHead and GroupSubmitter name the head's and the RayJob submitter's groups in a gang, as worker
	// groups are named by their groupName.
	GroupHead      = constants.HeadGroupName
	GroupSubmitter = "submittergroup"
)

// scheduler-plugins' coscheduling.
const (
	// SchedulerPluginsName is the schedulerName of the pods scheduler-plugins' coscheduling scheduler binds.
	SchedulerPluginsName = "scheduler-plugins-scheduler"
	// LabelPodGroup names the PodGroup a pod belongs to (scheduler-plugins).
	LabelPodGroup = "scheduling.x-k8s.io/pod-group"
)

// Volcano.
const (
	// VolcanoName is the schedulerName of Volcano's pods.
	VolcanoName = "volcano"
	// LabelVolcanoQueue on a cluster is its PodGroup's queue, copied to its pods.
	LabelVolcanoQueue = "volcano.sh/queue-name"
	// LabelNetworkTopologyMode and LabelNetworkTopologyHighestTier on a cluster are its PodGroup's network
	// topology: a mode, and the highest tier (an integer) the gang may span.
	LabelNetworkTopologyMode        = "volcano.sh/network-topology-mode"
	LabelNetworkTopologyHighestTier = "volcano.sh/network-topology-highest-tier-allowed"
	// AnnotationVolcanoGroupName names a pod's PodGroup; AnnotationVolcanoTaskSpec its task (group) in it.
	AnnotationVolcanoGroupName = "scheduling.k8s.io/group-name"
	AnnotationVolcanoTaskSpec  = "volcano.sh/task-spec"
)

// Apache YuniKorn.
const (
	// YuniKornName is the schedulerName of YuniKorn's pods.
	YuniKornName = "yunikorn"
	// LabelYuniKornAppID and LabelYuniKornQueue on a cluster become its pods' LabelPodApplicationID and
	// LabelPodQueue.
	LabelYuniKornAppID = "yunikorn.apache.org/app-id"
	LabelYuniKornQueue = "yunikorn.apache.org/queue"
	// LabelPodApplicationID and LabelPodQueue are the pod labels YuniKorn reads the application and queue from.
	LabelPodApplicationID = "applicationId"
	LabelPodQueue         = "queue"
	// AnnotationTaskGroups is a gang's task groups (JSON); AnnotationTaskGroupName the pod's group in it.
	AnnotationTaskGroups    = "yunikorn.apache.org/task-groups"
	AnnotationTaskGroupName = "yunikorn.apache.org/task-group-name"
)

// NVIDIA's KAI Scheduler.
const (
	// KAIName is the schedulerName of KAI's pods.
	KAIName = "kai-scheduler"
	// LabelKAIQueue on a cluster is its pods' KAI queue; without it KAI leaves them pending.
	LabelKAIQueue = "kai.scheduler/queue"
)
