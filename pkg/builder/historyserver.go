package builder

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/constants"
)

// The history server's collector sidecar, as KubeRay v1.7 renders it for historyServerOptions.
const (
	// CollectorContainerName is the collector sidecar of every Ray pod of a cluster with historyServerOptions.
	CollectorContainerName = "ray-history-collector"
	// collectorEventsPort is where the collector takes the events Ray exports.
	collectorEventsPort = "8084"
	// rayExposableEventTypes are the Ray event types exported to the collector.
	rayExposableEventTypes = "TASK_DEFINITION_EVENT,TASK_LIFECYCLE_EVENT,ACTOR_TASK_DEFINITION_EVENT,TASK_PROFILE_EVENT," +
		"DRIVER_JOB_DEFINITION_EVENT,DRIVER_JOB_LIFECYCLE_EVENT,ACTOR_DEFINITION_EVENT,ACTOR_LIFECYCLE_EVENT," +
		"NODE_DEFINITION_EVENT,NODE_LIFECYCLE_EVENT"
)

// CollectorManagedEnv are the collector's variables that the operator sets; historyServerOptions.collectorOptions.env
// may not set them.
var CollectorManagedEnv = []string{"POD_IP", "FQ_RAY_IP", "RAY_CLUSTER_NAME", "RAY_CLUSTER_NAMESPACE", "RAY_ROLE", "OWNER_KIND", "OWNER_NAME", "EVENTS_PORT"}

// collectorOptions are rc's collector options, nil when it asks for no collector.
func collectorOptions(rc *rayv1.RayCluster) *rayv1.CollectorOptions {
	if rc.Spec.HistoryServerOptions == nil {
		return nil
	}
	return rc.Spec.HistoryServerOptions.CollectorOptions
}

// addCollector appends the history collector sidecar to a Ray pod of rc that asks for one, shares the Ray
// container's log directory with it, and has the Ray container export its events to it; it changes nothing
// otherwise. Called once the Ray container is complete, so the event variables come after KubeRay's own.
func addCollector(rc *rayv1.RayCluster, tmpl *corev1.PodTemplateSpec, head bool, opts Options) {
	o := collectorOptions(rc)
	if o == nil {
		return
	}
	c := collectorContainer(rc, o, head, opts)
	ClientAuthEnv(rc, &c) // it reads the dashboard
	tmpl.Spec.Containers = append(tmpl.Spec.Containers, c)
	addEmptyDir(&tmpl.Spec, RayLogsVolumeName, RayLogsMountPath, "", nil,
		&tmpl.Spec.Containers[constants.RayContainerIndex], &tmpl.Spec.Containers[len(tmpl.Spec.Containers)-1])
	appendEnvIfAbsent(&tmpl.Spec.Containers[constants.RayContainerIndex],
		corev1.EnvVar{Name: "RAY_enable_ray_event", Value: "true"},
		corev1.EnvVar{Name: "RAY_enable_core_worker_ray_event_to_aggregator", Value: "true"},
		corev1.EnvVar{Name: "RAY_DASHBOARD_AGGREGATOR_AGENT_EVENTS_EXPORT_ADDR", Value: "http://localhost:" + collectorEventsPort + "/v1/events"},
		corev1.EnvVar{Name: "RAY_DASHBOARD_AGGREGATOR_AGENT_EXPOSABLE_EVENT_TYPES", Value: rayExposableEventTypes},
		corev1.EnvVar{Name: "RAY_DASHBOARD_AGGREGATOR_AGENT_PUBLISHER_HTTP_ENDPOINT_EXPOSABLE_EVENT_TYPES", Value: rayExposableEventTypes},
	)
}

// collectorContainer is the collector sidecar: the user's image, pull policy (IfNotPresent), resources (50m
// and 64Mi asked, 200m and 256Mi at most) and env after the variables that tell it which pod, cluster and
// owner it reports for; the image's own entrypoint.
func collectorContainer(rc *rayv1.RayCluster, o *rayv1.CollectorOptions, head bool, opts Options) corev1.Container {
	c := corev1.Container{
		Name:            CollectorContainerName,
		ImagePullPolicy: corev1.PullIfNotPresent,
		Resources: corev1.ResourceRequirements{
			Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
		},
	}
	if o.Image != nil {
		c.Image = *o.Image
	}
	if o.ImagePullPolicy != nil {
		c.ImagePullPolicy = *o.ImagePullPolicy
	}
	if o.Resources != nil {
		c.Resources = *o.Resources.DeepCopy()
	}
	role := "Worker"
	if head {
		role = "Head"
	}
	c.Env = []corev1.EnvVar{
		fieldEnv("POD_IP", "status.podIP"),
		{Name: "RAY_CLUSTER_NAME", Value: rc.Name},
		{Name: "RAY_CLUSTER_NAMESPACE", Value: rc.Namespace},
		{Name: "RAY_ROLE", Value: role},
		{Name: "EVENTS_PORT", Value: collectorEventsPort},
		{Name: envFQRayIP, Value: HeadServiceFQDN(rc, opts)},
	}
	if kind := rc.Labels[constants.LabelOriginatedFromCRD]; kind != "" {
		c.Env = append(c.Env, corev1.EnvVar{Name: "OWNER_KIND", Value: kind})
	}
	if name := rc.Labels[constants.LabelOriginatedFromCRName]; name != "" {
		c.Env = append(c.Env, corev1.EnvVar{Name: "OWNER_NAME", Value: name})
	}
	if head && !hasEnv(o.Env, "RAY_DASHBOARD_ADDRESS") {
		c.Env = append(c.Env, corev1.EnvVar{Name: "RAY_DASHBOARD_ADDRESS", Value: "http://localhost:8265"})
	}
	for _, e := range o.Env {
		c.Env = append(c.Env, *e.DeepCopy())
	}
	return c
}
