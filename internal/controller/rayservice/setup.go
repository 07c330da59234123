package rayservice

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/discovery"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/internal/controller/shared"
	"github.com/kray-project/kray/pkg/constants"
)

// +kubebuilder:rbac:groups=ray.io,resources=rayservices,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=ray.io,resources=rayservices/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=ray.io,resources=rayservices/finalizers,verbs=update
// +kubebuilder:rbac:groups=ray.io,resources=rayclusters,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=gateways;httproutes,verbs=get;list;watch;create;update;delete
//
// Why each verb: RayServices are read and their status written, never their spec; each is patched only to
// add KubeRay v1.7's ray.io/rayservice-finalizer, and to remove it once a deleted one's clusters are gone;
// rayservices/finalizers lets the clusters and Services made for a RayService carry a blocking owner
// reference to it. RayClusters are created for a RayService (each name stored in its status first), updated
// in place when only worker groups were appended, patched only to set or clear kray's deletion deadline
// annotation on a cluster that no longer serves and its switch deadline annotation on the pending cluster,
// and deleted once that deadline passed (only clusters it
// owns, by UID precondition). The RayService's head and serve Services are created, updated only to
// follow the serving cluster, and deleted only by a suspend (with every cluster of the RayService); a Service whose create finds it existing is read once by name. Pods are read
// from the cache, and a head pod is patched only in its ray.io/serve label. A cluster's token auth Secret is
// read by name, only for the Serve API calls of a cluster with token auth. For a RayService upgraded
// incrementally (the RayServiceIncrementalUpgrade gate on), its Gateway and HTTPRoute are read from the
// cache (those labelled as a RayService's), created, updated to its spec and weights (only those it
// controls; one whose create finds it existing is read once by name) and deleted only by a suspend, as
// KubeRay v1.7 does; each cluster's serve Service is created once, owned by the cluster.

// CacheRouting scopes the cache of Gateways and HTTPRoutes to those made for a RayService. Their informers
// start on a RayService's first incremental upgrade. The manager refuses to start with this scope when the
// API server does not serve the Gateway API: call it only when RoutingServed says it does.
func CacheRouting(opts *cache.Options) {
	sel := labels.SelectorFromSet(labels.Set{constants.LabelOriginatedFromCRD: constants.OriginatedFromRayService})
	opts.ByObject[&gwv1.Gateway{}] = cache.ByObject{Label: sel}
	opts.ByObject[&gwv1.HTTPRoute{}] = cache.ByObject{Label: sel}
}

// RoutingServed reports whether the API server serves the Gateway API's Gateway and HTTPRoute
// (gateway.networking.k8s.io/v1), which incremental upgrades write.
func RoutingServed(d discovery.DiscoveryInterface) (bool, error) {
	return shared.Served(d, gwv1.GroupVersion.String(), "gateways", "httproutes")
}

// SetupWithManager registers the RayService controller: RayService changes (not its own status writes, which
// the poll follows), and the RayClusters and Services it owns (a cluster's status says when its head is
// ready).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, concurrency int) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("rayservice").
		For(&rayv1.RayService{}, builder.WithPredicates(predicate.Or(
			predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{}, predicate.AnnotationChangedPredicate{}, deleting()))).
		Owns(&rayv1.RayCluster{}).
		Owns(&corev1.Service{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: concurrency}).
		Complete(r)
}

// deleting passes the update that marks a RayService deleted, which a finalizer it carries must see.
func deleting() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		return e.ObjectOld.GetDeletionTimestamp() == nil && e.ObjectNew.GetDeletionTimestamp() != nil
	}}
}
