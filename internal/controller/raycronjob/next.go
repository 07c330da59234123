// Package raycronjob is the RayCronJob controller: at each time of a RayCronJob's cron schedule it starts a
// RayJob from the job template, exactly once per time. Its decision (Next) is a pure function; the
// Reconciler reads, creates and writes the status once.
package raycronjob

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/internal/controller/shared"
	"github.com/kray-project/kray/pkg/validation"
)

// SuspendedMessage is KubeRay's word for a suspended RayCronJob, in its event and condition.
const SuspendedMessage = "RayCronJob suspended, no new RayJobs will be created"

// scheduledMessage is the Scheduling condition's message while RayJobs are started.
const scheduledMessage = "a RayJob is started at each time of the schedule"

// Observed is what Next decides from.
type Observed struct {
	CronJob *rayv1.RayCronJob
	Now     time.Time
	// Validation are the operator settings the job template is checked with.
	Validation validation.RayJobOptions
}

// Decision is what a reconcile does.
type Decision struct {
	// Status is the status to store.
	Status rayv1.RayCronJobStatus
	// Create is the RayJob of the schedule time that is due, nil when none is.
	Create *rayv1.RayJob
	// Events are recorded once Status is stored.
	Events []shared.Event
	// RequeueAfter is how long until the next schedule time; zero when nothing is scheduled.
	RequeueAfter time.Duration
}

// Next decides what a RayCronJob needs now: nothing while its spec is invalid or it is suspended, else the
// RayJob of the latest schedule time since it last ran (earlier times it missed are counted, not run), and
// a wake-up at its next schedule time.
func Next(o Observed) Decision {
	cj := o.CronJob
	d := Decision{Status: *cj.Status.DeepCopy()}
	schedule, err := validation.RayCronJobSpec(cj, o.Validation)
	if err != nil {
		d.setCondition(cj, o.Now, metav1.ConditionFalse, EventInvalidRayCronJobSpec, err.Error())
		d.Events = append(d.Events, shared.Warning(EventInvalidRayCronJobSpec, fmt.Sprintf("%s/%s: %v", cj.Namespace, cj.Name, err)))
		return d
	}
	if cj.Spec.Suspend != nil && *cj.Spec.Suspend {
		d.setCondition(cj, o.Now, metav1.ConditionFalse, EventSuspendedRayCronJob, SuspendedMessage)
		d.Events = append(d.Events, shared.Normal(EventSuspendedRayCronJob, SuspendedMessage))
		return d
	}
	since := cj.CreationTimestamp.Time
	if t := cj.Status.LastScheduleTime; t != nil {
		since = t.Time
	}
	due := due(schedule, since, o.Now)
	if due.Time.IsZero() && due.Next.IsZero() {
		msg := fmt.Sprintf("invalid cron schedule: %q has no time in the five years after %s", cj.Spec.Schedule, since.UTC().Format(time.RFC3339))
		d.setCondition(cj, o.Now, metav1.ConditionFalse, EventInvalidRayCronJobSpec, msg)
		d.Events = append(d.Events, shared.Warning(EventInvalidRayCronJobSpec, fmt.Sprintf("%s/%s: %s", cj.Namespace, cj.Name, msg)))
		return d
	}
	d.setCondition(cj, o.Now, metav1.ConditionTrue, ReasonScheduled, scheduledMessage)
	if !due.Time.IsZero() {
		d.Create = RayJob(cj, due.Time)
		d.Status.LastScheduleTime = &metav1.Time{Time: due.Time}
		if due.Missed > 0 {
			d.Events = append(d.Events, shared.Warning(EventMissedSchedules, missedMessage(due)))
		}
	}
	if !due.Next.IsZero() {
		d.RequeueAfter = due.Next.Sub(o.Now)
	}
	return d
}

// missedMessage says which schedule time started and how many before it were missed.
func missedMessage(d Due) string {
	count := fmt.Sprint(d.Missed)
	if d.Capped {
		count = "more than " + count
	}
	return fmt.Sprintf("%s earlier schedule times passed with no RayJob started (the operator was not running or the RayCronJob was suspended): only the latest, %s, is started",
		count, d.Time.UTC().Format(time.RFC3339))
}

// setCondition sets the Scheduling condition of d's status.
func (d *Decision) setCondition(cj *rayv1.RayCronJob, now time.Time, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(&d.Status.Conditions, metav1.Condition{
		Type: rayv1.RayCronJobScheduling, Status: status, Reason: reason, Message: message,
		ObservedGeneration: cj.Generation, LastTransitionTime: metav1.NewTime(now),
	})
}
