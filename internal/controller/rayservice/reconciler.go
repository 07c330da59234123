// Package rayservice is the RayService controller: it runs Ray Serve applications on a RayCluster it
// creates, keeps the RayService's head and serve Services on the cluster that serves, and moves the
// applications to a new cluster when the cluster spec changes, switching the Services only once the new
// cluster serves. Its decision (Next) is a pure function; the Reconciler reads, acts and writes the status
// once.
package rayservice

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/internal/controller/shared"
	"github.com/kray-project/kray/pkg/apierror"
	"github.com/kray-project/kray/pkg/authtoken"
	"github.com/kray-project/kray/pkg/builder"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/dashboard"
	"github.com/kray-project/kray/pkg/names"
	"github.com/kray-project/kray/pkg/validation"
)

// Reconciler reconciles RayServices.
type Reconciler struct {
	// Cache reads RayServices, RayClusters, pods and the RayService's Services from the informer cache.
	Cache client.Reader
	// APIReader reads a cluster's auth token Secret, and a Service whose create found it existing.
	APIReader client.Reader
	Writer    shared.Writer
	// Events records events, each repetition once per window.
	Events shared.Events
	// Dashboards opens a cluster's dashboard Serve API.
	Dashboards dashboard.ServeDialer
	// ProbeHTTP is the HTTP client of the head pods' Serve proxy health checks.
	ProbeHTTP *http.Client
	// DashboardAddress, when set, replaces every cluster's dashboard address ({namespace} and {cluster}
	// replaced by the cluster's), for an operator outside the cluster network.
	DashboardAddress string
	// ServeProbeAddress, when set, replaces http://<pod IP>:<serve port> of a head's Serve proxy ({namespace},
	// {pod} and {port} replaced by the pod's and its serve port).
	ServeProbeAddress string
	Options           builder.Options
	// ZeroDowntime is KubeRay's ENABLE_ZERO_DOWNTIME (see Observed).
	ZeroDowntime bool
	// NoGatewayAPI says the API server did not serve the Gateway API when the operator started: Gateways and
	// HTTPRoutes are then never read (their cache is not scoped), and incremental upgrades report why they wait.
	NoGatewayAPI bool
	// Validation are the operator settings a RayService spec is checked with (the feature gates).
	Validation validation.RayServiceOptions
	// Clock is the reconciler's time; nil is the wall clock.
	Clock clock.PassiveClock
	// Suffix defaults to a 5-character random string.
	Suffix func() string

	// serveFailures counts, per RayService, the reconciles in a row whose Serve reads failed
	// (Observed.ServeFailures).
	serveFailures shared.FailureCounts
}

// Reconcile moves one RayService a step: its clusters, its Serve applications, its Services, its status.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	svc := &rayv1.RayService{}
	if err := r.Cache.Get(ctx, req.NamespacedName, svc); err != nil {
		r.serveFailures.Record(req.NamespacedName, false)
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if m := svc.Spec.ManagedBy; m != nil && *m != rayv1.KubeRayOperatorManagedBy {
		return reconcile.Result{}, nil // another controller's (MultiKueue dispatches it to a worker cluster)
	}
	if svc.DeletionTimestamp != nil {
		return r.release(ctx, svc) // its clusters and Services go with it (owner references)
	}
	if !slices.Contains(svc.Finalizers, constants.FinalizerRayService) {
		// Added before anything is made, as KubeRay v1.7 does: deleting the RayService then waits until its
		// clusters are gone. The write changes no generation, so no watch event brings the next step.
		if _, err := shared.AddFinalizer(ctx, r.Writer, svc, constants.FinalizerRayService); err != nil {
			return reconcile.Result{}, err
		}
		return reconcile.Result{RequeueAfter: shared.ConflictRetry}, nil
	}
	o, err := r.observe(ctx, svc)
	if err != nil {
		return reconcile.Result{}, err
	}
	d := Next(o)
	var events []shared.Event
	var actErr error
	if !d.Invalid {
		events, actErr = r.act(ctx, svc, o, d.Actions)
	}
	if apierror.NamespaceGoing(actErr) {
		return reconcile.Result{}, nil
	}
	res := reconcile.Result{RequeueAfter: d.RequeueAfter}
	stored := true
	if statusChanged(svc.Status, d.Status) {
		updated := svc.DeepCopy()
		updated.Status = d.Status
		updated.Status.LastUpdateTime = &metav1.Time{Time: o.Now.UTC().Truncate(time.Second)}
		switch err := r.Writer.UpdateStatus(ctx, updated); {
		case apierrors.IsConflict(err):
			stored = false
			res = reconcile.Result{RequeueAfter: shared.ConflictRetry}
		case err != nil:
			stored = false
			actErr = errors.Join(actErr, fmt.Errorf("write the RayService status: %w", err))
		}
	}
	if stored {
		events = append(d.Events, events...)
	}
	r.Events.Emit(svc, o.Now, events...)
	if actErr != nil {
		return reconcile.Result{}, actErr
	}
	return res, nil
}

// release lets a deleted RayService go that carries KubeRay v1.7's ray.io/rayservice-finalizer (kray adds it too): its
// clusters are deleted (by UID precondition) and, once none is left, the finalizer is removed, as KubeRay
// does. A RayService without it goes with no write; the garbage collector deletes its clusters.
func (r *Reconciler) release(ctx context.Context, svc *rayv1.RayService) (reconcile.Result, error) {
	if !slices.Contains(svc.Finalizers, constants.FinalizerRayService) {
		return reconcile.Result{}, nil
	}
	clusters, err := r.ownClusters(ctx, svc)
	if err != nil {
		return reconcile.Result{}, err
	}
	for _, rc := range clusters {
		if rc.DeletionTimestamp != nil {
			continue
		}
		uid := rc.UID
		if err := r.Writer.Delete(ctx, rc, client.Preconditions{UID: &uid}, client.PropagationPolicy("Background")); client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
			return reconcile.Result{}, fmt.Errorf("delete RayCluster %s of the deleted RayService: %w", rc.Name, err)
		}
	}
	if len(clusters) > 0 {
		return reconcile.Result{RequeueAfter: PollInterval}, nil // the clusters' deletion events come first
	}
	return reconcile.Result{}, shared.RemoveFinalizer(ctx, r.Writer, svc, constants.FinalizerRayService)
}

// statusChanged reports whether next differs from stored in more than the clusters' status copies and
// lastUpdateTime, which change with every pod of the clusters and are written only along with something
// else (as KubeRay does).
func statusChanged(stored, next rayv1.RayServiceStatuses) bool {
	a, b := stored.DeepCopy(), next.DeepCopy()
	for _, st := range []*rayv1.RayServiceStatuses{a, b} {
		st.LastUpdateTime = nil
		st.ActiveServiceStatus.RayClusterStatus = rayv1.RayClusterStatus{}
		st.PendingServiceStatus.RayClusterStatus = rayv1.RayClusterStatus{}
	}
	return !equality.Semantic.DeepEqual(a, b)
}

// observe reads what Next decides from: the RayService's clusters and their pods, its Services, the serving
// cluster's Serve applications and the heads' Serve proxies.
func (r *Reconciler) observe(ctx context.Context, svc *rayv1.RayService) (Observed, error) {
	o := Observed{Service: svc, Now: r.now(), Suffix: r.suffix(), Options: r.Options, ZeroDowntime: r.ZeroDowntime, Validation: r.Validation,
		Clusters: map[string]*rayv1.RayCluster{}, Serve: map[string]ServeRead{}, ProxyHealthy: map[string]bool{}, ProxyErr: map[string]error{}}
	clusters, err := r.ownClusters(ctx, svc)
	if err != nil {
		return o, err
	}
	for _, rc := range clusters {
		o.Clusters[rc.Name] = rc
	}
	o.Applied = appliedConfigs(o.Clusters)
	if name := svc.Status.PendingServiceStatus.RayClusterName; name != "" && o.Clusters[name] == nil {
		rc := &rayv1.RayCluster{}
		switch err := r.Cache.Get(ctx, client.ObjectKey{Namespace: svc.Namespace, Name: name}, rc); {
		case err == nil:
			o.PendingTaken = !shared.OwnedBy(rc, svc)
		case !apierrors.IsNotFound(err):
			return o, fmt.Errorf("read RayCluster %s: %w", name, err)
		}
	}
	for _, name := range []string{svc.Status.ActiveServiceStatus.RayClusterName, svc.Status.PendingServiceStatus.RayClusterName} {
		if name == "" {
			continue
		}
		pods := &corev1.PodList{}
		if err := r.Cache.List(ctx, pods, client.InNamespace(svc.Namespace), client.MatchingLabels{constants.LabelCluster: name}); err != nil {
			return o, fmt.Errorf("list the pods of RayCluster %s: %w", name, err)
		}
		o.Pods = append(o.Pods, pods.Items...)
	}
	if o.HeadService, err = r.ownService(ctx, svc, HeadServiceName(svc)); err != nil {
		return o, err
	}
	if o.ServeService, err = r.ownService(ctx, svc, ServeServiceName(svc)); err != nil {
		return o, err
	}
	if incremental(svc, r.Validation.IncrementalUpgrade) {
		if err := r.observeRouting(ctx, svc, &o); err != nil {
			return o, err
		}
	}
	failed := false
	for _, name := range ServeReads(svc, o.Clusters, r.ZeroDowntime, r.Validation.IncrementalUpgrade) {
		if !podServes(headPod(o.Pods, name)) {
			continue
		}
		read := ServeRead{}
		if api, err := r.serveAPI(ctx, o.Clusters[name]); err != nil {
			read.Err = err
		} else {
			read.Details, read.Err = api.Applications(ctx)
		}
		o.Serve[name] = read
		failed = failed || read.Err != nil
	}
	o.ServeFailures = r.serveFailures.Record(client.ObjectKeyFromObject(svc), failed)
	for _, head := range ProbedHeads(svc, o.Pods) {
		var err error
		if o.ProxyHealthy[head.Name], err = dashboard.ProbeServeProxy(ctx, r.probeHTTP(), r.probeAddress(head)); err != nil {
			o.ProxyErr[head.Name] = err
		}
	}
	return o, nil
}

// errNoGatewayAPIAtStart is why an incremental upgrade waits on an operator started without the Gateway API.
var errNoGatewayAPIAtStart = errors.New("the API server did not serve the Gateway API when the operator started " +
	"(install its CRDs, gateway.networking.k8s.io/v1, then restart the operator)")

// observeRouting reads, for an incremental RayService, its Gateway and HTTPRoute (only its own) and the serve
// Services of its active and pending clusters (only those the clusters own). A Gateway API the API server
// does not serve is recorded in o.GatewayErr, not returned: the RayService says so and waits.
func (r *Reconciler) observeRouting(ctx context.Context, svc *rayv1.RayService, o *Observed) error {
	if r.NoGatewayAPI {
		o.GatewayErr = errNoGatewayAPIAtStart
		return nil
	}
	gw, route := &gwv1.Gateway{}, &gwv1.HTTPRoute{}
	for _, obj := range []client.Object{gw, route} {
		name := GatewayName(svc)
		if obj == route {
			name = HTTPRouteName(svc)
		}
		switch err := r.Cache.Get(ctx, client.ObjectKey{Namespace: svc.Namespace, Name: name}, obj); {
		case meta.IsNoMatchError(err):
			o.GatewayErr = fmt.Errorf("the API server does not serve the Gateway API (install its CRDs, gateway.networking.k8s.io/v1): %w", err)
			return nil
		case apierrors.IsNotFound(err):
		case err != nil:
			return fmt.Errorf("read %s: %w", name, err)
		case shared.OwnedBy(obj, svc) && obj == gw:
			o.Gateway = gw
		case shared.OwnedBy(obj, svc):
			o.HTTPRoute = route
		}
	}
	o.ClusterServeServices = map[string]*corev1.Service{}
	for _, name := range []string{svc.Status.ActiveServiceStatus.RayClusterName, svc.Status.PendingServiceStatus.RayClusterName} {
		rc := o.Clusters[name]
		if rc == nil {
			continue
		}
		s := &corev1.Service{}
		switch err := r.Cache.Get(ctx, client.ObjectKey{Namespace: svc.Namespace, Name: names.ServeService(name)}, s); {
		case apierrors.IsNotFound(err):
		case err != nil:
			return fmt.Errorf("read the serve Service of RayCluster %s: %w", name, err)
		default:
			o.ClusterServeServices[name] = s // someone else's is never replaced: its create fails and says so
		}
	}
	return nil
}

// ownClusters lists, from the cache, the RayClusters svc controls.
func (r *Reconciler) ownClusters(ctx context.Context, svc *rayv1.RayService) ([]*rayv1.RayCluster, error) {
	list := &rayv1.RayClusterList{}
	if err := r.Cache.List(ctx, list, client.InNamespace(svc.Namespace), client.MatchingLabels{
		constants.LabelOriginatedFromCRD: constants.OriginatedFromRayService, constants.LabelOriginatedFromCRName: svc.Name,
	}); err != nil {
		return nil, fmt.Errorf("list the RayService's clusters: %w", err)
	}
	var out []*rayv1.RayCluster
	for i := range list.Items {
		if rc := &list.Items[i]; shared.OwnedBy(rc, svc) {
			out = append(out, rc)
		}
	}
	return out, nil
}

// ownService reads the RayService's Service name from the cache: nil when absent or controlled by another
// object (whose create then fails and is reported).
func (r *Reconciler) ownService(ctx context.Context, svc *rayv1.RayService, name string) (*corev1.Service, error) {
	s := &corev1.Service{}
	switch err := r.Cache.Get(ctx, client.ObjectKey{Namespace: svc.Namespace, Name: name}, s); {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("read Service %s: %w", name, err)
	case !shared.OwnedBy(s, svc):
		return nil, nil
	}
	return s, nil
}

// serveAPI opens the Serve API of rc's dashboard, with the token rc's auth asks for.
func (r *Reconciler) serveAPI(ctx context.Context, rc *rayv1.RayCluster) (dashboard.ServeAPI, error) {
	base, err := shared.DashboardBase(r.DashboardAddress, rc, r.Options)
	if err != nil {
		return nil, err
	}
	token, err := authtoken.Read(ctx, r.APIReader, rc)
	if err != nil {
		return nil, err
	}
	return r.Dashboards.Serve(base, token), nil
}

// probeAddress is the base URL of head's Serve proxy.
func (r *Reconciler) probeAddress(head *corev1.Pod) string {
	port := builder.ServePort(&head.Spec.Containers[constants.RayContainerIndex])
	if r.ServeProbeAddress != "" {
		return dashboard.Address(r.ServeProbeAddress, map[string]string{"namespace": head.Namespace, "pod": head.Name, "port": fmt.Sprint(port)})
	}
	return fmt.Sprintf("http://%s:%d", head.Status.PodIP, port)
}

func (r *Reconciler) probeHTTP() *http.Client {
	if r.ProbeHTTP != nil {
		return r.ProbeHTTP
	}
	return http.DefaultClient
}

func (r *Reconciler) now() time.Time { return shared.Clock(r.Clock).Now() }

func (r *Reconciler) suffix() string {
	if r.Suffix != nil {
		return r.Suffix()
	}
	return shared.NameSuffix()
}
