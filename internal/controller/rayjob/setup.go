package rayjob

import (
	"context"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/constants"
)

// +kubebuilder:rbac:groups=ray.io,resources=rayjobs,verbs=get;list;watch;patch;delete
// +kubebuilder:rbac:groups=ray.io,resources=rayjobs/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=ray.io,resources=rayjobs/finalizers,verbs=update
// +kubebuilder:rbac:groups=ray.io,resources=rayclusters,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;create;update
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
//
// Why each verb: RayJobs are read, patched only to add and remove the ray.io/rayjob-finalizer (never the
// spec), deleted only by a DeleteSelf deletion rule, and their status written; rayjobs/finalizers lets the
// objects created for a RayJob carry a blocking owner reference to it. RayClusters are created for a RayJob
// and deleted when it retries, is suspended or shuts down (only those it owns, by UID precondition), and
// updated only by a DeleteWorkers deletion policy, which suspends the worker groups of a cluster it owns. Submitter Jobs are created and deleted
// likewise (a running one also when its RayJob has ended, and one of an earlier submission where this
// attempt's is to be created). Before a teardown forgets an attempt, its cluster and submitter are read by
// name from the API server, to confirm what the cache does not show is gone. A cluster's token auth Secret is read by name,
// only for the dashboard calls of a cluster with token auth. The RayJob's head Service is read from the
// cache, created, and updated (its selector and ray.io/cluster label only, never one the RayJob does not
// control) while the job runs; a Service or Job whose create finds it existing is read once by name. A
// K8sJobMode job's head pod is read from the cache, to tell when the head its submitter was made for has been
// replaced.

// SetupWithManager registers the RayJob controller: every RayJob change, its own status writes included (the
// watch event of a status write is what brings the next step, with the object that holds the new status),
// the RayClusters and submitter Jobs it owns (a cluster's status moves the job from Initializing on), and
// a new incarnation of the head pod of a cluster it owns (a K8sJobMode attempt whose submitter still runs
// fails when its head is replaced or restarted, before the submitter's next pod could submit again).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, concurrency int) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("rayjob").
		For(&rayv1.RayJob{}).
		Owns(&rayv1.RayCluster{}).
		Owns(&batchv1.Job{}).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(r.jobOfHeadPod), builder.WithPredicates(HeadIncarnationChanged())).
		WithOptions(controller.Options{MaxConcurrentReconciles: concurrency}).
		Complete(r)
}

// HeadIncarnationChanged passes the events of Ray head pods that start or end an incarnation
// (HeadIncarnation): a head pod created or deleted, or a container of it restarted.
func HeadIncarnationChanged() predicate.Predicate {
	isHead := func(obj ctrlclient.Object) bool {
		return obj.GetLabels()[constants.LabelNodeType] == constants.NodeTypeHead && obj.GetLabels()[constants.LabelCluster] != ""
	}
	return predicate.Funcs{
		CreateFunc: func(e event.CreateEvent) bool { return isHead(e.Object) },
		DeleteFunc: func(e event.DeleteEvent) bool { return isHead(e.Object) },
		UpdateFunc: func(e event.UpdateEvent) bool {
			oldPod, ok1 := e.ObjectOld.(*corev1.Pod)
			newPod, ok2 := e.ObjectNew.(*corev1.Pod)
			return ok1 && ok2 && isHead(newPod) && restarts(oldPod) != restarts(newPod)
		},
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

// restarts is the sum of p's containers' restart counts.
func restarts(p *corev1.Pod) int32 {
	var n int32
	for _, c := range p.Status.ContainerStatuses {
		n += c.RestartCount
	}
	return n
}

// jobOfHeadPod maps a head pod to the RayJob that controls its cluster, if any.
func (r *Reconciler) jobOfHeadPod(ctx context.Context, pod ctrlclient.Object) []reconcile.Request {
	rc := &rayv1.RayCluster{}
	if err := r.Cache.Get(ctx, ctrlclient.ObjectKey{Namespace: pod.GetNamespace(), Name: pod.GetLabels()[constants.LabelCluster]}, rc); err != nil {
		return nil
	}
	ref := metav1.GetControllerOf(rc)
	if ref == nil || ref.Kind != "RayJob" || ref.APIVersion != rayv1.GroupVersion.String() {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: rc.Namespace, Name: ref.Name}}}
}
