// Package batchscheduler is what kray does for KubeRay's batch schedulers: which scheduler a cluster's pods
// go to, whether they are scheduled as a gang, and the objects and pod metadata each scheduler needs. It is
// pure: no client, no environment.
package batchscheduler

// The names --batch-scheduler takes, KubeRay's.
const (
	Volcano          = "volcano"
	YuniKorn         = "yunikorn"
	SchedulerPlugins = "scheduler-plugins"
	KAI              = "kai-scheduler"
)

// Implemented are the schedulers kray serves; the other names are KubeRay's and refused at start.
var Implemented = map[string]bool{SchedulerPlugins: true}

// KubeRay's labels and names.
const (
	// LabelGangScheduling on a RayCluster (or a RayJob or RayService, which copy their labels to their
	// clusters) asks for gang scheduling; its presence counts, whatever its value, as in KubeRay.
	LabelGangScheduling = "ray.io/gang-scheduling-enabled"
	// SchedulerPluginsName is the schedulerName of the pods scheduler-plugins' coscheduling scheduler binds.
	SchedulerPluginsName = "scheduler-plugins-scheduler"
	// LabelPodGroup names the PodGroup a pod belongs to (scheduler-plugins).
	LabelPodGroup = "scheduling.x-k8s.io/pod-group"
)
