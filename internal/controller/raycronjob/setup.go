package raycronjob

import (
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	rayv1 "github.com/kray-project/kray/api/v1"
)

// +kubebuilder:rbac:groups=ray.io,resources=raycronjobs,verbs=get;list;watch
// +kubebuilder:rbac:groups=ray.io,resources=raycronjobs/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=ray.io,resources=raycronjobs/finalizers,verbs=update
// +kubebuilder:rbac:groups=ray.io,resources=rayjobs,verbs=get;create
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
//
// Why each verb: RayCronJobs are read and their status written, never their spec; raycronjobs/finalizers
// lets the RayJobs they start carry a blocking owner reference to them. RayJobs are created, one per
// schedule time, and one is read by name only when its create finds the name taken.

// SetupWithManager registers the RayCronJob controller. It wakes on a RayCronJob's creation and on every
// change of its spec (its generation), and otherwise at its next schedule time (RequeueAfter): its own
// status writes and the RayJobs it starts need no reconcile.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, concurrency int) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("raycronjob").
		For(&rayv1.RayCronJob{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: concurrency}).
		Complete(r)
}
