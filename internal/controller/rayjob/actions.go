package rayjob

import (
	"context"
	"errors"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/internal/controller/shared"
)

// The writes an action reports, to pick its events.
const (
	wroteNothing = ""
	wroteCreate  = "create"
	wroteUpdate  = "update"
	wroteDelete  = "delete"
)

// eventText is an event's reason and its message format; the format takes the action's subject and, for a
// failure, the error.
type eventText struct{ reason, format string }

// actionRow is how the reconciler carries out one kind of Action.
type actionRow struct {
	// write makes the action's write and says which (wroteNothing when none was needed).
	write func(ctx context.Context, r *Reconciler, job *rayv1.RayJob, a Action) (string, error)
	// done reports an error meaning the action's effect is already there: no event and no error.
	done func(error) bool
	// subject is what the action's events and errors name.
	subject func(job *rayv1.RayJob, a Action) string
	// ok and failed are the events of a write that succeeded and of one that failed, by the write made.
	ok, failed map[string]eventText
	// wrap is the context of the returned error; it takes the subject.
	wrap string
	// submits marks the action that puts the job on the dashboard.
	submits bool
	// starts marks the action without whose write the attempt cannot run (the submitter's create).
	starts bool
}

// actionRows are the rows of every ActionKind, with KubeRay's event reasons and messages.
var actionRows = map[ActionKind]actionRow{
	CreateCluster: {
		write: func(ctx context.Context, r *Reconciler, _ *rayv1.RayJob, a Action) (string, error) {
			return wroteCreate, r.Writer.Create(ctx, a.Cluster)
		},
		done:    apierrors.IsAlreadyExists,
		subject: func(_ *rayv1.RayJob, a Action) string { return a.Cluster.Namespace + "/" + a.Cluster.Name },
		ok:      map[string]eventText{wroteCreate: {shared.EventCreatedRayCluster, "Created RayCluster %s"}},
		failed:  map[string]eventText{wroteCreate: {shared.EventFailedToCreateRayCluster, "Failed to create RayCluster %s: %v"}},
		wrap:    "create RayCluster %s",
	},
	CreateSubmitter: {
		write: func(ctx context.Context, r *Reconciler, job *rayv1.RayJob, a Action) (string, error) {
			return r.createSubmitter(ctx, job, a.Submitter)
		},
		subject: func(_ *rayv1.RayJob, a Action) string { return a.Submitter.Namespace + "/" + a.Submitter.Name },
		ok: map[string]eventText{
			wroteCreate: {EventCreatedRayJobSubmitter, "Created Kubernetes Job %s"},
			wroteDelete: {EventDeletedRayJobSubmitter, "Deleted submitter K8s Job %s of an earlier submission; this attempt's follows once it is gone"},
		},
		failed: map[string]eventText{
			wroteCreate: {EventFailedToCreateRayJobSubmitter, "Failed to create new Kubernetes Job %s: %v"},
			wroteDelete: {EventFailedToDeleteRayJobSubmitter, "Failed to delete submitter K8s Job %s of an earlier submission: %v"},
		},
		wrap:   "create the submitter Job %s",
		starts: true,
	},
	DeleteCluster: {
		write: func(ctx context.Context, r *Reconciler, _ *rayv1.RayJob, a Action) (string, error) {
			return wroteDelete, r.Writer.Delete(ctx, a.Cluster, ctrl.Preconditions{UID: &a.Cluster.UID})
		},
		done:    apierrors.IsNotFound,
		subject: func(_ *rayv1.RayJob, a Action) string { return a.Cluster.Namespace + "/" + a.Cluster.Name },
		ok:      map[string]eventText{wroteDelete: {shared.EventDeletedRayCluster, "Deleted cluster %s"}},
		failed:  map[string]eventText{wroteDelete: {shared.EventFailedToDeleteRayCluster, "Failed to delete cluster %s: %v"}},
		wrap:    "delete RayCluster %s",
	},
	DeleteSubmitter: {
		write: func(ctx context.Context, r *Reconciler, _ *rayv1.RayJob, a Action) (string, error) {
			return wroteDelete, r.Writer.Delete(ctx, a.Submitter, ctrl.Preconditions{UID: &a.Submitter.UID},
				ctrl.PropagationPolicy(metav1.DeletePropagationBackground))
		},
		done:    apierrors.IsNotFound,
		subject: func(_ *rayv1.RayJob, a Action) string { return a.Submitter.Namespace + "/" + a.Submitter.Name },
		ok:      map[string]eventText{wroteDelete: {EventDeletedRayJobSubmitter, "Deleted submitter K8s Job %s"}},
		failed:  map[string]eventText{wroteDelete: {EventFailedToDeleteRayJobSubmitter, "Failed to delete submitter K8s Job %s: %v"}},
		wrap:    "delete the submitter Job %s",
	},
	SuspendWorkers: {
		write: func(ctx context.Context, r *Reconciler, _ *rayv1.RayJob, a Action) (string, error) {
			return wroteUpdate, r.Writer.Update(ctx, a.Cluster)
		},
		done:    apierrors.IsNotFound,
		subject: func(_ *rayv1.RayJob, a Action) string { return a.Cluster.Namespace + "/" + a.Cluster.Name },
		ok:      map[string]eventText{wroteUpdate: {shared.EventUpdatedRayCluster, "Set the `suspend` field to true for all worker groups in cluster %s"}},
		failed:  map[string]eventText{wroteUpdate: {shared.EventFailedToUpdateRayCluster, "Failed to suspend worker groups in cluster %s: %v"}},
		wrap:    "suspend the workers of RayCluster %s",
	},
	DeleteRayJob: {
		write: func(ctx context.Context, r *Reconciler, job *rayv1.RayJob, _ Action) (string, error) {
			return wroteDelete, r.Writer.Delete(ctx, job, ctrl.Preconditions{UID: &job.UID})
		},
		done:    apierrors.IsNotFound,
		subject: func(job *rayv1.RayJob, _ Action) string { return job.Namespace + "/" + job.Name },
		wrap:    "delete the RayJob %s",
	},
	SyncHeadService: {
		write: func(ctx context.Context, r *Reconciler, job *rayv1.RayJob, a Action) (string, error) {
			return r.syncHeadService(ctx, job, a.Service)
		},
		subject: func(_ *rayv1.RayJob, a Action) string { return a.Service.Namespace + "/" + a.Service.Name },
		ok: map[string]eventText{
			wroteCreate: {shared.EventCreatedService, "Created the service %s"},
			wroteUpdate: {shared.EventUpdatedService, "Updated the service %s"},
		},
		failed: map[string]eventText{
			wroteCreate: {shared.EventFailedToCreateService, "Failed to create the service %s, %v"},
			wroteUpdate: {shared.EventFailedToUpdateService, "Failed to update the service %s, %v"},
		},
		wrap: "keep the head Service %s",
	},
	SubmitJob: {
		write: func(ctx context.Context, r *Reconciler, job *rayv1.RayJob, a Action) (string, error) {
			return wroteCreate, r.submit(ctx, job, a.Request)
		},
		subject: func(job *rayv1.RayJob, a Action) string {
			return fmt.Sprintf("Ray job %s to RayCluster %s/%s", a.Request.SubmissionID, job.Namespace, job.Status.RayClusterName)
		},
		ok:      map[string]eventText{wroteCreate: {EventSubmittedRayJob, "Submitted %s"}},
		failed:  map[string]eventText{wroteCreate: {EventFailedToSubmitRayJob, "Failed to submit %s: %v"}},
		wrap:    "submit %s",
		submits: true,
	},
}

// createSubmitter creates the attempt's submitter Job. One that exists already (the cache was behind) is
// this attempt's when it carries its submission id: nothing to write; an earlier submission's is deleted
// (wroteDelete), and this attempt's is created by a later reconcile once it is gone; someone else's is a
// notOwnedError.
func (r *Reconciler) createSubmitter(ctx context.Context, job *rayv1.RayJob, sub *batchv1.Job) (string, error) {
	err := r.Writer.Create(ctx, sub)
	if !apierrors.IsAlreadyExists(err) {
		return wroteCreate, err
	}
	live := &batchv1.Job{}
	if err := r.ownedLive(ctx, job, live, sub.Name); err != nil {
		return wroteCreate, err
	}
	if SubmissionID(live) == SubmissionID(sub) {
		return wroteNothing, nil
	}
	err = r.Writer.Delete(ctx, live, ctrl.Preconditions{UID: &live.UID}, ctrl.PropagationPolicy(metav1.DeletePropagationBackground))
	if apierrors.IsNotFound(err) {
		err = nil
	}
	return wroteDelete, err
}

// outcome is what act's writes came to.
type outcome struct {
	// events are those the writes earned, recorded whatever happens to the status write.
	events []Event
	// submitted is set when the dashboard holds a submission that was asked for.
	submitted bool
	// notStarted is set when an action the attempt needs to run (starts) made no write of its own: it
	// failed, met someone else's object, or had to delete an earlier attempt's first.
	notStarted bool
	// conflict is a Warning event about an object of a name the job needs that the RayJob does not control;
	// nothing was written to it.
	conflict *Event
	err      error
}

// act performs the decision's actions by their rows; it goes on after a failed action and returns every
// error.
func (r *Reconciler) act(ctx context.Context, job *rayv1.RayJob, d Decision) outcome {
	var out outcome
	var errs []error
	for _, a := range d.Actions {
		row, ok := actionRows[a.Kind]
		if !ok {
			errs = append(errs, fmt.Errorf("no way to carry out action %q", a.Kind))
			continue
		}
		subject := row.subject(job, a)
		wrote, err := row.write(ctx, r, job, a)
		var foreign *notOwnedError
		if row.starts && (err != nil || wrote == wroteDelete) {
			out.notStarted = true
		}
		switch {
		case err == nil:
			out.submitted = out.submitted || row.submits
			if e, ok := row.ok[wrote]; ok {
				out.events = append(out.events, shared.Normal(e.reason, fmt.Sprintf(e.format, subject)))
			}
		case errors.As(err, &foreign):
			out.conflict = ptr.To(shared.Warning(row.failed[wroteCreate].reason, foreign.Error()))
		case row.done != nil && row.done(err):
		default:
			if e, ok := row.failed[wrote]; ok {
				out.events = append(out.events, shared.Warning(e.reason, fmt.Sprintf(e.format, subject, err)))
			}
			errs = append(errs, fmt.Errorf(row.wrap+": %w", subject, err))
		}
	}
	out.err = errors.Join(errs...)
	return out
}
