package builder

import (
	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/names"
)

// How long a worker restart may take before kray replaces the pod instead (a node without kruise-daemon never
// runs it), and how long a finished one stays, so that a second operator instance, or a cache that has not
// seen the new run yet, finds it instead of asking again.
const (
	WorkerRestartDeadlineSeconds = 60
	WorkerRestartTTLSeconds      = 600
)

// WorkerRestartHoldSeconds is how long kruise-daemon holds a restart between taking it and killing the
// container (the strategy's unreadyGracePeriodSeconds, counted from when kruise-manager marks the pod not
// ready): the time kray has to withdraw a request whose webhook stamped a run other than the one judged.
const WorkerRestartHoldSeconds = 1

// WorkerRestartQuickStopSeconds is the stop grace of a restart that need not wait for the pod's: a Ray run of a
// cluster that is gone holds no work that could still finish, and KubeRay's command (bash, PID 1, running ray
// start) ignores the SIGTERM that would end it sooner, so the pod's grace (30 s by default) is only a wait.
const WorkerRestartQuickStopSeconds = 1

// WorkerRestart is the Kruise ContainerRecreateRequest that restarts the Ray container of worker pod p in
// place (same pod, node, IP, volumes and devices), for the container's run run (its container ID) and for
// reason. Its name is derived from the pod and the run, so the restart of one run is asked once. With quick,
// the container gets WorkerRestartQuickStopSeconds to stop, unless it has a preStop hook, which keeps the pod's
// grace; else Kruise gives it the pod's.
func WorkerRestart(rc *rayv1.RayCluster, p *corev1.Pod, run, reason string, quick bool) *kruisev1alpha1.ContainerRecreateRequest {
	meta := objectMeta(rc, names.WorkerRestart(p.Name, run), map[string]string{
		constants.LabelCluster:  rc.Name,
		constants.LabelNodeType: string(rayv1.WorkerNode),
		constants.LabelGroup:    p.Labels[constants.LabelGroup],
	})
	meta.Annotations = map[string]string{constants.AnnotationRestartReason: reason, constants.AnnotationRestartedRun: run}
	strategy := &kruisev1alpha1.ContainerRecreateRequestStrategy{
		FailurePolicy:             kruisev1alpha1.ContainerRecreateRequestFailurePolicyFail,
		UnreadyGracePeriodSeconds: ptr.To[int64](WorkerRestartHoldSeconds),
	}
	ray := &p.Spec.Containers[constants.RayContainerIndex]
	if quick && (ray.Lifecycle == nil || ray.Lifecycle.PreStop == nil) {
		strategy.TerminationGracePeriodSeconds = ptr.To[int64](WorkerRestartQuickStopSeconds)
	}
	return &kruisev1alpha1.ContainerRecreateRequest{
		TypeMeta:   metav1.TypeMeta{APIVersion: kruisev1alpha1.GroupVersion.String(), Kind: "ContainerRecreateRequest"},
		ObjectMeta: meta,
		Spec: kruisev1alpha1.ContainerRecreateRequestSpec{
			PodName:                 p.Name,
			Containers:              []kruisev1alpha1.ContainerRecreateRequestContainer{{Name: ray.Name}},
			Strategy:                strategy,
			ActiveDeadlineSeconds:   ptr.To[int64](WorkerRestartDeadlineSeconds),
			TTLSecondsAfterFinished: ptr.To[int32](WorkerRestartTTLSeconds),
		},
	}
}
