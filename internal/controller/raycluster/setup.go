package raycluster

import (
	"context"
	"fmt"
	"time"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	kruisev1beta1 "github.com/openkruise/kruise-api/apps/v1beta1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/batchscheduler"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/scale"
	"github.com/kray-project/kray/pkg/status"
)

// +kubebuilder:rbac:groups=ray.io,resources=rayclusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=ray.io,resources=rayclusters/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=ray.io,resources=rayclusters/finalizers,verbs=update
// +kubebuilder:rbac:groups=apps.kruise.io,resources=clonesets;statefulsets,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups="",resources=services;serviceaccounts,verbs=get;list;watch;create
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=roles;rolebindings,verbs=get;list;watch;create
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=create;get
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=get;list;watch;create
// +kubebuilder:rbac:groups=networking.k8s.io,resources=ingresses,verbs=get;list;watch;create;update
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups=cert-manager.io,resources=issuers,verbs=get;list;watch;create
// +kubebuilder:rbac:groups=cert-manager.io,resources=certificates,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=patch;delete
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups=apps.kruise.io,resources=imagepulljobs,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=apps.kruise.io,resources=nodeimages,verbs=get
// +kubebuilder:rbac:groups=apps.kruise.io,resources=containerrecreaterequests,verbs=get;create;delete
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
//
// Why each verb: leases for leader election live in a namespaced Role (config/rbac/leader_election_role.yaml),
// not here. TokenReviews and SubjectAccessReviews let --metrics-secure authenticate and authorize scrapers.
// RayClusters are read and only their status is written (never the spec); rayclusters/finalizers update lets
// the objects kray creates carry a controller reference that blocks the cluster's deletion, which the
// OwnerReferencesPermissionEnforcement admission plugin (on in OpenShift) requires. Kruise workloads
// are created, updated (template, replicas, podsToDelete) and deleted when a group is removed. Pods are
// read for status and deleted only when they exited (CloneSet leaves them behind) or exited under a
// restartPolicy-Never template, patched to put or release the drain hook label. Services and the
// autoscaler's RBAC are created once, never updated. Secrets are created (a generated Ray auth token) and
// read one by one by name (get: never listed, watched or cached) only while a worker of a cluster with token
// auth waits for its drain, whose GCS call must carry the token; get is cluster-wide because the Secret's
// name comes from the RayCluster's spec. PVCs (the embedded GCS store) are created; Ingresses created and
// kept to the spec; Jobs (the Redis cleanup of a deleted cluster) created and read; the head's
// PodDisruptionBudget created, kept to the spec and deleted (only the one the RayCluster controls) while and
// once kray.io/head-disruption-budget asks for it; Kruise ImagePullJobs created and deleted (only those the
// RayCluster controls) while and once kray.io/image-prepull asks for them. cert-manager's Issuers and
// Certificates (a tlsOptions cluster's) are created, and the head's and workers' Certificates updated when
// their pods' IPs change; their Secrets are read (the head's, whose certificate kray presents to the GCS)
// and patched once to carry an owner reference to their Certificate (Secrets delete: the API server's
// OwnerReferencesPermissionEnforcement lets only who may delete an object set its owner references; kray
// never deletes a Secret). Kruise ContainerRecreateRequests
// are created to restart a worker that lost its Ray node in place, read one by one by name (never listed
// or watched) to follow that restart, and deleted, by UID, the moment Kruise's webhook stamps one with a
// container run other than the one judged. RayCluster patch also
// writes the Redis cleanup finalizer. The operator grants the autoscaler's Role, so it must hold those pod
// and raycluster verbs itself (it does: get/list/watch on pods; patch on pods and pods/resize and
// rayclusters below).
// +kubebuilder:rbac:groups="",resources=pods;pods/resize,verbs=patch
// +kubebuilder:rbac:groups=ray.io,resources=rayclusters,verbs=patch

// CacheOptions scopes the informer caches to what kray owns: objects labelled with ray.io/cluster, with
// managed fields stripped. namespaces limits the watch; empty means all namespaces.
func CacheOptions(namespaces []string) cache.Options {
	sel := cache.ByObject{Label: ownedSelector()}
	opts := cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}:                   {Label: sel.Label},
			&corev1.Service{}:               {Label: sel.Label},
			&corev1.PersistentVolumeClaim{}: {Label: sel.Label},
			&networkingv1.Ingress{}:         {Label: sel.Label},
			&policyv1.PodDisruptionBudget{}: {Label: sel.Label},
			&kruisev1alpha1.ImagePullJob{}:  {Label: sel.Label},
			&batchv1.Job{}:                  {Label: sel.Label},
			&corev1.ServiceAccount{}:        {Label: sel.Label},
			&rbacv1.Role{}:                  {Label: sel.Label},
			&rbacv1.RoleBinding{}:           {Label: sel.Label},
			&kruisev1alpha1.CloneSet{}:      {Label: sel.Label},
			&kruisev1beta1.StatefulSet{}:    {Label: sel.Label},
		},
	}
	if len(namespaces) > 0 {
		opts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range namespaces {
			opts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	return opts
}

// CachePodGroups scopes the cache of the batch scheduler's PodGroups likewise, for an operator with a
// scheduler that uses them.
func CachePodGroups(opts *cache.Options, scheduler string) {
	if obj := batchscheduler.EmptyPodGroup(scheduler); obj != nil {
		opts.ByObject[obj] = cache.ByObject{Label: ownedSelector()}
	}
}

// ownedSelector selects the objects labelled with ray.io/cluster.
func ownedSelector() labels.Selector {
	owned, err := labels.NewRequirement(constants.LabelCluster, selection.Exists, nil)
	if err != nil {
		panic(err) // a constant key and operator never fail
	}
	return labels.NewSelector().Add(*owned)
}

// indexCluster is the informer cache index of pods and CloneSets by the value of their ray.io/cluster label:
// a reconcile lists its cluster's children by it in time independent of the namespace's other clusters,
// where a label selector would test every pod of the namespace.
const indexCluster = "kray.ray.io/cluster"

// clusterOf is indexCluster's function: the object's ray.io/cluster label, if any.
func clusterOf(obj client.Object) []string {
	if name, ok := obj.GetLabels()[constants.LabelCluster]; ok {
		return []string{name}
	}
	return nil
}

// indexedChildren are the kinds readChildren lists by indexCluster.
func indexedChildren() []client.Object {
	return []client.Object{&corev1.Pod{}, &kruisev1alpha1.CloneSet{}}
}

// SetupOptions are the controller's operator-level settings.
type SetupOptions struct {
	// Concurrency is the number of RayClusters reconciled in parallel.
	Concurrency int
	// WorkerPodBatch delays the reconcile that a worker pod event or a Kruise workload event triggers,
	// batching bursts; 0 disables it.
	WorkerPodBatch time.Duration
}

// PodGroupsServed checks that the API server serves the PodGroups of the batch scheduler (scheduler-plugins'
// or Volcano's CRD), so that an operator started with --batch-scheduler on a cluster without them says so at
// start instead of failing each gang's reconcile. A scheduler that needs no PodGroup passes.
func PodGroupsServed(mapper meta.RESTMapper, scheduler string) error {
	if !batchscheduler.UsesPodGroups(scheduler) {
		return nil
	}
	gv := batchscheduler.PodGroupVersion(scheduler)
	if _, err := mapper.RESTMapping(schema.GroupKind{Group: gv.Group, Kind: "PodGroup"}, gv.Version); err != nil {
		return fmt.Errorf("--batch-scheduler=%s: the API server does not serve %s PodGroup (CRD podgroups.%s); install %s's CRDs: %w",
			scheduler, gv, gv.Group, scheduler, err)
	}
	return nil
}

// DefaultWorkerPodBatch is the batching window of the WorkerPodEventBatching feature gate.
const DefaultWorkerPodBatch = 500 * time.Millisecond

// SetupWithManager registers the reconciler: RayCluster spec, label and annotation changes (not its own
// status writes), the Ingresses and Jobs it owns, and, by the ray.io/cluster label and batched, the cluster's
// Services, Kruise workloads and pods (a new cluster's Service, StatefulSet and CloneSets, created at once,
// then bring one reconcile, not one for the Service and one for the rest).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, opts SetupOptions) error {
	for _, obj := range indexedChildren() {
		if err := mgr.GetFieldIndexer().IndexField(context.Background(), obj, indexCluster, clusterOf); err != nil {
			return fmt.Errorf("index %T by cluster: %w", obj, err)
		}
	}
	b := ctrl.NewControllerManagedBy(mgr)
	if obj := batchscheduler.EmptyPodGroup(r.BatchScheduler); obj != nil {
		// A PodGroup someone changed or deleted is put back.
		b = b.Owns(obj)
	}
	if r.NetworkPolicies {
		// A NetworkPolicy someone changed or deleted is put back.
		b = b.Owns(&networkingv1.NetworkPolicy{})
	}
	if r.MTLS {
		// A Certificate's status says when the pods may start; an Issuer or Certificate someone deleted is
		// put back.
		for _, obj := range tlsObjectKinds() {
			b = b.Owns(obj)
		}
	}
	return b.
		Named("raycluster").
		For(&rayv1.RayCluster{}, builder.WithPredicates(predicate.Or(
			predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Watches(&kruisev1alpha1.CloneSet{}, clusterHandler{batch: opts.WorkerPodBatch}).
		Watches(&kruisev1beta1.StatefulSet{}, clusterHandler{batch: opts.WorkerPodBatch}).
		Watches(&corev1.Service{}, clusterHandler{batch: opts.WorkerPodBatch}).
		Owns(&networkingv1.Ingress{}).
		Owns(&policyv1.PodDisruptionBudget{}).
		Owns(&kruisev1alpha1.ImagePullJob{}).
		Owns(&batchv1.Job{}).
		Watches(&corev1.Pod{}, clusterHandler{batch: opts.WorkerPodBatch, headLossAtOnce: true}).
		WithOptions(controller.Options{MaxConcurrentReconciles: opts.Concurrency}).
		Complete(r)
}

// clusterHandler enqueues the RayCluster named by an object's ray.io/cluster label, after up to batch: a
// burst of events (a 500-pod scale-up, and Kruise's status writes for each of those pods) becomes a few
// reconciles and status writes instead of one per event. With headLossAtOnce, an event that shows the head
// going down (no longer Ready, ended, deleted or being deleted) is never delayed: HeadPodReady must see a
// head that is down for less than the window. A head coming up (created, Running, Ready) is batched like the
// workers, so a new cluster's head and workers becoming ready cost one status write, not one each. A pod
// update that changes nothing kray reads (podChangeMatters) enqueues nothing: about half of a new pod's
// updates are its binding and the conditions Kruise keeps.
type clusterHandler struct {
	batch          time.Duration
	headLossAtOnce bool
}

func (h clusterHandler) Create(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.enqueue(e.Object, q, false)
}

func (h clusterHandler) Update(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	oldPod, isPod := e.ObjectOld.(*corev1.Pod)
	if newPod, ok := e.ObjectNew.(*corev1.Pod); isPod && ok && !podChangeMatters(oldPod, newPod) {
		return
	}
	h.enqueue(e.ObjectNew, q, h.headLossAtOnce && isHead(e.ObjectNew) && headLost(e.ObjectOld, e.ObjectNew))
}

func (h clusterHandler) Delete(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.enqueue(e.Object, q, h.headLossAtOnce && isHead(e.Object))
}

func (h clusterHandler) Generic(_ context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.enqueue(e.Object, q, false)
}

// enqueue adds obj's cluster to the queue, at once when urgent or when batching is off, else after batch.
func (h clusterHandler) enqueue(obj client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request], urgent bool) {
	name, ok := obj.GetLabels()[constants.LabelCluster]
	if !ok {
		return
	}
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: name}}
	if h.batch <= 0 || urgent {
		q.Add(req)
		return
	}
	q.AddAfter(req, h.batch)
}

// isHead reports whether obj is a head pod.
func isHead(obj client.Object) bool {
	return obj.GetLabels()[constants.LabelNodeType] == constants.NodeTypeHead
}

// headLost reports whether a head pod's update takes it down: it stops being Ready, ends, or is being
// deleted.
func headLost(oldObj, newObj client.Object) bool {
	newPod, ok := newObj.(*corev1.Pod)
	if !ok {
		return true
	}
	if newPod.DeletionTimestamp != nil || scale.IsDead(newPod) {
		return true
	}
	oldPod, ok := oldObj.(*corev1.Pod)
	return ok && status.PodReady(oldPod) && !status.PodReady(newPod)
}
