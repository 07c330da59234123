package raycronjob

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/internal/controller/shared"
	"github.com/kray-project/kray/pkg/apierror"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/validation"
)

// Reconciler reconciles RayCronJobs.
type Reconciler struct {
	// Cache reads RayCronJobs from the informer cache.
	Cache ctrl.Reader
	// APIReader reads the RayJob whose create found its name taken, to tell whether it is this RayCronJob's.
	APIReader ctrl.Reader
	Writer    shared.Writer
	// Events records events, each repetition once per window.
	Events shared.Events
	// Validation are the operator settings a job template is checked with.
	Validation validation.RayJobOptions
	// Clock is the reconciler's time; nil is the wall clock.
	Clock clock.PassiveClock
}

// Reconcile starts the RayJob of the schedule time that is due, if any, and stores the time it ran.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	cj := &rayv1.RayCronJob{}
	if err := r.Cache.Get(ctx, req.NamespacedName, cj); err != nil {
		return reconcile.Result{}, ctrl.IgnoreNotFound(err)
	}
	if cj.DeletionTimestamp != nil {
		return reconcile.Result{}, nil
	}
	now := shared.Clock(r.Clock).Now()
	d := Next(Observed{CronJob: cj, Now: now, Validation: r.Validation})
	var events []shared.Event
	if d.Create != nil {
		ev, err := r.create(ctx, cj, d.Create)
		if apierror.NamespaceGoing(err) {
			return reconcile.Result{}, nil
		}
		if err != nil {
			// The time stays due: the next reconcile creates it (or finds it created).
			return reconcile.Result{}, err
		}
		if ev != nil {
			events = append(events, *ev)
		}
	}
	res := reconcile.Result{RequeueAfter: d.RequeueAfter}
	if !equality.Semantic.DeepEqual(cj.Status, d.Status) {
		updated := cj.DeepCopy()
		updated.Status = d.Status
		switch err := r.Writer.UpdateStatus(ctx, updated); {
		case apierrors.IsConflict(err):
			// A newer RayCronJob is on its way to the cache; the RayJob's fixed name keeps the retry a no-op.
			r.Events.Emit(cj, now, events...)
			return reconcile.Result{RequeueAfter: shared.ConflictRetry}, nil
		case err != nil:
			r.Events.Emit(cj, now, events...)
			return reconcile.Result{}, fmt.Errorf("write the RayCronJob status: %w", err)
		}
	}
	r.Events.Emit(cj, now, append(d.Events, events...)...)
	return res, nil
}

// create creates job, the RayJob of a schedule time of cj, and returns the event that says what came of it:
// created, or found created already by cj (an earlier reconcile or another operator instance: said by no
// event), or its name held by an object cj does not control (the time is skipped, with a Warning).
func (r *Reconciler) create(ctx context.Context, cj *rayv1.RayCronJob, job *rayv1.RayJob) (*shared.Event, error) {
	at := job.Annotations[constants.AnnotationCronJobScheduledTimestamp]
	err := r.Writer.Create(ctx, job)
	if err == nil {
		ev := shared.Normal(EventCreatedRayJob, fmt.Sprintf("Created RayJob %s/%s for the schedule time %s", job.Namespace, job.Name, at))
		return &ev, nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("create RayJob %s: %w", job.Name, err)
	}
	existing := &rayv1.RayJob{}
	if err := r.APIReader.Get(ctx, ctrl.ObjectKeyFromObject(job), existing); err != nil {
		return nil, fmt.Errorf("read RayJob %s, whose create found it existing: %w", job.Name, err)
	}
	if shared.OwnedBy(existing, cj) {
		return nil, nil
	}
	ev := shared.Warning(EventFailedToCreateRayJob, fmt.Sprintf("RayJob %s/%s exists and is not controlled by this RayCronJob: the schedule time %s is skipped", job.Namespace, job.Name, at))
	return &ev, nil
}
