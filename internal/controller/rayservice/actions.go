package rayservice

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/internal/controller/shared"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/dashboard"
)

// act makes the writes of actions in order and returns the events they earn (recorded whatever happens to
// the status write, since the writes happened) and their errors. An action that fails does not stop the
// others.
func (r *Reconciler) act(ctx context.Context, svc *rayv1.RayService, o Observed, actions []Action) ([]shared.Event, error) {
	var events []shared.Event
	var errs []error
	for _, a := range actions {
		ev, err := r.do(ctx, svc, o, a)
		if ev != nil {
			events = append(events, *ev)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s %s: %w", a.Kind, a.Name, err))
		}
	}
	return events, errors.Join(errs...)
}

// do makes one action's write and returns the event it earns, if any.
func (r *Reconciler) do(ctx context.Context, svc *rayv1.RayService, o Observed, a Action) (*shared.Event, error) {
	ref := fmt.Sprintf("%s/%s", svc.Namespace, a.Name)
	switch a.Kind {
	case CreateCluster:
		err := r.Writer.Create(ctx, a.Cluster)
		if apierrors.IsAlreadyExists(err) {
			return nil, r.checkOwned(ctx, svc, &rayv1.RayCluster{}, a.Name) // created before; the cache is behind
		}
		if err != nil {
			return warning(shared.EventFailedToCreateRayCluster, "Failed to create the RayCluster %s: %v", ref, err), err
		}
		return normal(shared.EventCreatedRayCluster, "Created the RayCluster %s", ref), nil
	case UpdateCluster:
		if err := r.Writer.Update(ctx, a.Cluster); err != nil {
			return warning(shared.EventFailedToUpdateRayCluster, "Failed to update the RayCluster %s: %v", ref, err), err
		}
		return normal(shared.EventUpdatedRayCluster, "Updated the RayCluster %s in place", ref), nil
	case DeleteCluster:
		uid := a.Cluster.UID
		err := r.Writer.Delete(ctx, a.Cluster, client.Preconditions{UID: &uid}, client.PropagationPolicy("Background"))
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return nil, nil
		}
		if err != nil {
			return warning(shared.EventFailedToDeleteRayCluster, "Failed to delete the RayCluster %s: %v", ref, err), err
		}
		if a.Why != "" {
			return normal(shared.EventDeletedRayCluster, "Deleted the RayCluster %s %s", ref, a.Why), nil
		}
		return normal(shared.EventDeletedRayCluster, "Deleted the RayCluster %s, which no longer serves", ref), nil
	case DeleteService:
		uid := a.Service.UID
		err := r.Writer.Delete(ctx, a.Service, client.Preconditions{UID: &uid})
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return nil, nil
		}
		if err != nil {
			return warning(EventFailedToDeleteService, "Failed to delete the Service %s %s: %v", ref, a.Why, err), err
		}
		return normal(EventDeletedService, "Deleted the Service %s %s", ref, a.Why), nil
	case MarkCluster:
		return nil, shared.PatchMeta(ctx, r.Writer, a.Cluster, shared.Meta{Annotations: map[string]*string{constants.AnnotationDeletionDeadline: deadlineValue(a.Deadline)}})
	case MarkSwitch:
		return nil, shared.PatchMeta(ctx, r.Writer, a.Cluster, shared.Meta{Annotations: map[string]*string{constants.AnnotationSwitchDeadline: deadlineValue(a.Deadline)}})
	case ApplyServe:
		return r.applyServe(ctx, svc, o.Clusters[a.Name], Served{Config: a.Config, Capacity: a.Capacity})
	case CreateService:
		err := r.Writer.Create(ctx, a.Service)
		switch {
		case apierrors.IsAlreadyExists(err):
			return nil, nil // the cache lags its create
		case err != nil:
			return warning(shared.EventFailedToCreateService, "Failed to create Service %s/%s: %v", a.Service.Namespace, a.Service.Name, err), err
		}
		return normal(shared.EventCreatedService, "Created Service %s/%s for RayCluster %s", a.Service.Namespace, a.Service.Name, a.Service.Labels[constants.LabelCluster]), nil
	case SyncGateway:
		return r.syncRouting(ctx, svc, a.Object, a.Live)
	case DeleteGateway:
		uid := a.Object.GetUID()
		err := r.Writer.Delete(ctx, a.Object, client.Preconditions{UID: &uid})
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return nil, nil
		}
		ev := routingEventsOf(a.Object)
		if err != nil {
			return warning(ev.failedToDelete, "Failed to delete the %s %s %s: %v", ev.kind, ref, a.Why, err), err
		}
		return normal(ev.deleted, "Deleted the %s %s %s", ev.kind, ref, a.Why), nil
	case LabelHead:
		if err := shared.PatchMeta(ctx, r.Writer, a.Pod, shared.Meta{Labels: map[string]*string{constants.LabelServe: &a.Value}}); err != nil {
			return warning(EventFailedToUpdateHeadPodServeLabel, "Failed to set %s=%s on head pod %s/%s: %v", constants.LabelServe, a.Value, a.Pod.Namespace, a.Pod.Name, err), err
		}
		if a.Why != "" {
			return normal(EventUpdatedHeadPodServeLabel, "Set %s=%s on head pod %s/%s: %s", constants.LabelServe, a.Value, a.Pod.Namespace, a.Pod.Name, a.Why), nil
		}
		return normal(EventUpdatedHeadPodServeLabel, "Set %s=%s on head pod %s/%s", constants.LabelServe, a.Value, a.Pod.Namespace, a.Pod.Name), nil
	case SyncService:
		return r.syncService(ctx, svc, o, a.Service)
	}
	return nil, fmt.Errorf("unknown action %q", a.Kind)
}

// applyServe puts served's config, at its target capacity if any, on rc's Serve API and remembers it on
// success.
func (r *Reconciler) applyServe(ctx context.Context, svc *rayv1.RayService, rc *rayv1.RayCluster, served Served) (*shared.Event, error) {
	ref := fmt.Sprintf("RayCluster %s/%s", rc.Namespace, rc.Name)
	body, err := dashboard.ServeConfigJSON(served.Config)
	if err == nil && served.Capacity != nil {
		body, err = dashboard.WithTargetCapacity(body, *served.Capacity)
	}
	if err == nil {
		var api dashboard.ServeAPI
		if api, err = r.serveAPI(ctx, rc); err == nil {
			err = api.Apply(ctx, body)
		}
	}
	switch {
	case err != nil && served.Capacity != nil:
		// Reported and tried again at the next poll, not retried with backoff: the config or Serve must
		// change first.
		return warning(EventFailedToUpdateTargetCapacity, "Failed to update target_capacity of serve applications to the %s: %v", ref, err), nil
	case err != nil:
		return warning(EventFailedToUpdateServeApplications, "Failed to apply serveConfigV2 on %s: %v", ref, err), nil
	}
	record := shared.Meta{Annotations: map[string]*string{constants.AnnotationServeApplied: ptr.To(appliedAnnotation(served))}}
	if err := shared.PatchMeta(ctx, r.Writer, rc.DeepCopy(), record); err != nil {
		// Serve took it; the next poll finds it unrecorded and puts the same config again.
		return warning(EventFailedToUpdateServeApplications, "Applied serveConfigV2 on %s but failed to record it there: %v", ref, err), err
	}
	if served.Capacity != nil {
		return normal(EventUpdatedServeApplications, "Applied serveConfigV2 on %s at target_capacity %d%%", ref, *served.Capacity), nil
	}
	return normal(EventUpdatedServeApplications, "Applied serveConfigV2 on %s", ref), nil
}

// syncRouting creates desired (the RayService's Gateway or HTTPRoute), or updates live (else the one of
// that name found existing, when the RayService controls it) to desired's spec, labels added. One the
// RayService does not control is never changed.
func (r *Reconciler) syncRouting(ctx context.Context, svc *rayv1.RayService, desired, live client.Object) (*shared.Event, error) {
	ev := routingEventsOf(desired)
	ref := fmt.Sprintf("%s/%s", desired.GetNamespace(), desired.GetName())
	if live == nil {
		err := r.Writer.Create(ctx, desired)
		switch {
		case err == nil:
			return normal(ev.created, "Created %s for RayService %s/%s", ev.kind, svc.Namespace, svc.Name), nil
		case !apierrors.IsAlreadyExists(err):
			return warning(ev.failedToCreate, "Failed to create %s for RayService %s/%s: %v", ev.kind, svc.Namespace, svc.Name, err), err
		}
		// The cache does not hold it: it lags a create, or the object lacks the labels the cache selects by
		// (one KubeRay made). Read it from the API server and update it, which also labels it.
		found := desired.DeepCopyObject().(client.Object)
		if err := r.checkOwned(ctx, svc, found, desired.GetName()); err != nil {
			return warning(ev.failedToCreate, "Failed to create %s for RayService %s/%s: %v", ev.kind, svc.Namespace, svc.Name, err), retried(err)
		}
		live = found
	}
	updated := live.DeepCopyObject().(client.Object)
	labels := updated.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	for k, v := range desired.GetLabels() {
		labels[k] = v
	}
	updated.SetLabels(labels)
	switch u := updated.(type) {
	case *gwv1.Gateway:
		u.Spec = desired.(*gwv1.Gateway).Spec
	case *gwv1.HTTPRoute:
		u.Spec = desired.(*gwv1.HTTPRoute).Spec
	}
	if err := r.Writer.Update(ctx, updated); err != nil {
		return warning(ev.failedToUpdate, "Failed to update the %s %s: %v", ev.kind, ref, err), err
	}
	return normal(ev.updated, "Updated the %s %s", ev.kind, ref), nil
}

// routingEvents are the kind and event reasons of the RayService's Gateway or HTTPRoute.
type routingEvents struct {
	kind, created, updated, deleted, failedToCreate, failedToUpdate, failedToDelete string
}

// routingEventsOf is obj's (a Gateway or an HTTPRoute) routingEvents.
func routingEventsOf(obj client.Object) routingEvents {
	if _, ok := obj.(*gwv1.Gateway); ok {
		return routingEvents{"Gateway", EventCreatedGateway, EventUpdatedGateway, EventDeletedGateway,
			EventFailedToCreateGateway, EventFailedToUpdateGateway, EventFailedToDeleteGateway}
	}
	return routingEvents{"HTTPRoute", EventCreatedHTTPRoute, EventUpdatedHTTPRoute, EventDeletedHTTPRoute,
		EventFailedToCreateHTTPRoute, EventFailedToUpdateHTTPRoute, EventFailedToDeleteHTTPRoute}
}

// syncService creates desired, or points the RayService's live Service (from the cache, else from the API
// server once the create found it existing) at desired's cluster: the selector, the ports and the type as
// desired, the cluster IPs and node ports as they are, the ray.io/cluster label set and any other metadata
// left alone. A Service of that name the RayService does not control is never changed.
func (r *Reconciler) syncService(ctx context.Context, svc *rayv1.RayService, o Observed, desired *corev1.Service) (*shared.Event, error) {
	ref := fmt.Sprintf("%s/%s", desired.Namespace, desired.Name)
	live := o.HeadService
	if desired.Name != HeadServiceName(svc) {
		live = o.ServeService
	}
	cluster := desired.Labels[constants.LabelCluster]
	if live == nil {
		err := r.Writer.Create(ctx, desired)
		switch {
		case err == nil:
			return normal(shared.EventCreatedService, "Created Service %s for RayCluster %s", ref, cluster), nil
		case !apierrors.IsAlreadyExists(err):
			return warning(shared.EventFailedToCreateService, "Failed to create Service %s: %v", ref, err), err
		}
		// The cache does not hold it: it lags a create, or the Service lacks the ray.io/cluster label the
		// cache selects by (one made by KubeRay). Read it from the API server and go on to update it, which
		// also labels it.
		found := &corev1.Service{}
		if err := r.checkOwned(ctx, svc, found, desired.Name); err != nil {
			return warning(shared.EventFailedToCreateService, "Failed to create Service %s: %v", ref, err), retried(err)
		}
		if selects(found, cluster) && found.Labels[constants.LabelCluster] == cluster {
			return nil, nil
		}
		live = found
	}
	updated := live.DeepCopy()
	if updated.Labels == nil {
		updated.Labels = map[string]string{}
	}
	updated.Labels[constants.LabelCluster] = cluster
	spec := desired.Spec.DeepCopy()
	spec.ClusterIP, spec.ClusterIPs = live.Spec.ClusterIP, live.Spec.ClusterIPs
	spec.IPFamilies, spec.IPFamilyPolicy = live.Spec.IPFamilies, live.Spec.IPFamilyPolicy
	spec.HealthCheckNodePort = live.Spec.HealthCheckNodePort
	for i := range spec.Ports {
		for _, lp := range live.Spec.Ports {
			if lp.Name == spec.Ports[i].Name {
				spec.Ports[i].NodePort = lp.NodePort
			}
		}
	}
	updated.Spec = *spec
	if err := r.Writer.Update(ctx, updated); err != nil {
		return warning(shared.EventFailedToUpdateService, "Failed to point Service %s at RayCluster %s: %v", ref, cluster, err), err
	}
	return normal(shared.EventUpdatedService, "Pointed Service %s at RayCluster %s", ref, cluster), nil
}

// checkOwned reads obj (named name) from the API server after a create found it existing: nil when the
// RayService controls it (the cache had not caught up), else an error saying whose it is not.
func (r *Reconciler) checkOwned(ctx context.Context, svc *rayv1.RayService, obj client.Object, name string) error {
	key := client.ObjectKey{Namespace: svc.Namespace, Name: name}
	if err := r.APIReader.Get(ctx, key, obj); err != nil {
		return fmt.Errorf("read %s after its create found it existing: %w", key, err)
	}
	if !shared.OwnedBy(obj, svc) {
		return notControlledError(fmt.Sprintf("%s exists and is not controlled by RayService %s/%s: kray does not use or change it; delete it, or rename the RayService", key, svc.Namespace, svc.Name))
	}
	return nil
}

// notControlledError says that an object of a name the RayService writes exists and is not the RayService's.
type notControlledError string

func (e notControlledError) Error() string { return string(e) }

// retried is err, or nil for a notControlledError: that one is reported in a Warning and tried again at the
// next poll, not with the growing backoff of an error, since the RayService goes on as soon as the user deletes
// the object, whose deletion the cache (which holds only the RayService's own) does not see.
func retried(err error) error {
	var taken notControlledError
	if errors.As(err, &taken) {
		return nil
	}
	return err
}

func normal(reason, format string, args ...any) *shared.Event {
	e := shared.Normal(reason, fmt.Sprintf(format, args...))
	return &e
}

func warning(reason, format string, args ...any) *shared.Event {
	e := shared.Warning(reason, fmt.Sprintf(format, args...))
	return &e
}

// deadlineValue is a deadline annotation's value for t (RFC 3339, UTC), nil to remove it when t is zero.
func deadlineValue(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	v := t.UTC().Format(time.RFC3339)
	return &v
}
