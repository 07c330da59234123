package raycronjob

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/internal/controller/shared"
	"github.com/kray-project/kray/internal/fixture"
)

var t0 = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// cronJob is a valid RayCronJob created at t0 that runs every five minutes.
func cronJob() *rayv1.RayCronJob {
	return &rayv1.RayCronJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "nightly", UID: "cj-uid", Generation: 1, CreationTimestamp: metav1.NewTime(t0)},
		Spec: rayv1.RayCronJobSpec{
			Schedule: "*/5 * * * *",
			JobTemplate: rayv1.RayJobSpec{
				Entrypoint:               "python test.py",
				ShutdownAfterJobFinishes: true,
				RayClusterSpec:           &fixture.Cluster("ns", "c").Spec,
			},
		},
	}
}

func TestNextRefusesInvalidSpecs(t *testing.T) {
	tests := []struct {
		name   string
		change func(*rayv1.RayCronJob)
		want   string
	}{
		{"not a schedule", func(cj *rayv1.RayCronJob) { cj.Spec.Schedule = "invalid cron string" }, "invalid cron schedule: expected exactly 5 fields, found 3: [invalid cron string]"},
		{"empty schedule", func(cj *rayv1.RayCronJob) { cj.Spec.Schedule = "" }, "invalid cron schedule: empty spec string"},
		{"a time zone in the schedule", func(cj *rayv1.RayCronJob) { cj.Spec.Schedule = "CRON_TZ=UTC */5 * * * *" }, "cannot use TZ or CRON_TZ in schedule, use timeZone field instead"},
		{"unknown time zone", func(cj *rayv1.RayCronJob) { cj.Spec.TimeZone = ptr.To("Invalid/Zone") }, "invalid time zone: unknown time zone Invalid/Zone"},
		{"empty time zone", func(cj *rayv1.RayCronJob) { cj.Spec.TimeZone = ptr.To("") }, "timeZone must not be empty string"},
		{"name too long for the RayJob names", func(cj *rayv1.RayCronJob) { cj.Name = strings.Repeat("a", 37) }, "RayCronJob name should be no more than 36 characters"},
		{"no cluster", func(cj *rayv1.RayCronJob) { cj.Spec.JobTemplate.RayClusterSpec = nil }, "invalid RayJob template: The RayJob spec is invalid: one of RayClusterSpec or ClusterSelector must be set"},
		{"never fires", func(cj *rayv1.RayCronJob) { cj.Spec.Schedule = "0 0 30 2 *" }, `invalid cron schedule: "0 0 30 2 *" has no time in the five years after 2024-01-01T00:00:00Z`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cj := cronJob()
			tt.change(cj)
			d := Next(Observed{CronJob: cj, Now: t0.Add(time.Hour)})
			if d.Create != nil || d.RequeueAfter != 0 || d.Status.LastScheduleTime != nil {
				t.Errorf("an invalid RayCronJob started %v, requeued after %s, stored %v", d.Create, d.RequeueAfter, d.Status.LastScheduleTime)
			}
			c := meta.FindStatusCondition(d.Status.Conditions, rayv1.RayCronJobScheduling)
			if c == nil || c.Status != metav1.ConditionFalse || c.Reason != EventInvalidRayCronJobSpec || !strings.Contains(c.Message, tt.want) {
				t.Errorf("condition = %+v, want False %s saying %q", c, EventInvalidRayCronJobSpec, tt.want)
			}
			if len(d.Events) != 1 || d.Events[0].Type != "Warning" || d.Events[0].Reason != EventInvalidRayCronJobSpec ||
				!strings.HasPrefix(d.Events[0].Message, "ns/"+cj.Name+": ") || !strings.Contains(d.Events[0].Message, tt.want) {
				t.Errorf("events = %+v, want one Warning %s", d.Events, EventInvalidRayCronJobSpec)
			}
		})
	}
}

func TestNextSuspended(t *testing.T) {
	cj := cronJob()
	cj.Spec.Suspend = ptr.To(true)
	cj.Status.LastScheduleTime = &metav1.Time{Time: t0}
	d := Next(Observed{CronJob: cj, Now: t0.Add(time.Hour)})
	if d.Create != nil || d.RequeueAfter != 0 || !d.Status.LastScheduleTime.Equal(&metav1.Time{Time: t0}) {
		t.Errorf("suspended: started %v, requeued after %s, stored %v", d.Create, d.RequeueAfter, d.Status.LastScheduleTime)
	}
	c := meta.FindStatusCondition(d.Status.Conditions, rayv1.RayCronJobScheduling)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != EventSuspendedRayCronJob {
		t.Errorf("condition = %+v", c)
	}
	if want := []shared.Event{shared.Normal(EventSuspendedRayCronJob, SuspendedMessage)}; len(d.Events) != 1 || d.Events[0] != want[0] {
		t.Errorf("events = %+v, want %+v", d.Events, want)
	}
}

func TestNextStartsTheLatestTime(t *testing.T) {
	tests := []struct {
		name        string
		last        *time.Time
		suspended   bool
		now         time.Time
		wantTime    time.Time // zero: nothing started
		wantRequeue time.Duration
		wantMissed  string // "": no MissedSchedules event
	}{
		{name: "first time since creation", now: t0.Add(5*time.Minute + 30*time.Second), wantTime: t0.Add(5 * time.Minute), wantRequeue: 4*time.Minute + 30*time.Second},
		{name: "nothing due yet", now: t0.Add(3 * time.Minute), wantRequeue: 2 * time.Minute},
		{name: "after the last run", last: ptr.To(t0.Add(5 * time.Minute)), now: t0.Add(10*time.Minute + time.Second), wantTime: t0.Add(10 * time.Minute), wantRequeue: 5*time.Minute - time.Second},
		{name: "missed times: only the latest starts", last: ptr.To(t0), now: t0.Add(17 * time.Minute), wantTime: t0.Add(15 * time.Minute), wantRequeue: 3 * time.Minute,
			wantMissed: "2 earlier schedule times passed with no RayJob started (the operator was not running or the RayCronJob was suspended): only the latest, 2024-01-01T00:15:00Z, is started"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cj := cronJob()
			if tt.last != nil {
				cj.Status.LastScheduleTime = &metav1.Time{Time: *tt.last}
			}
			d := Next(Observed{CronJob: cj, Now: tt.now})
			if d.RequeueAfter != tt.wantRequeue {
				t.Errorf("RequeueAfter = %s, want %s", d.RequeueAfter, tt.wantRequeue)
			}
			c := meta.FindStatusCondition(d.Status.Conditions, rayv1.RayCronJobScheduling)
			if c == nil || c.Status != metav1.ConditionTrue || c.Reason != ReasonScheduled || c.ObservedGeneration != 1 {
				t.Errorf("condition = %+v, want True %s", c, ReasonScheduled)
			}
			if tt.wantTime.IsZero() {
				if d.Create != nil || len(d.Events) != 0 {
					t.Errorf("started %v with events %v, want nothing", d.Create, d.Events)
				}
				return
			}
			if d.Create == nil || d.Create.Name != JobName(cj, tt.wantTime) {
				t.Fatalf("started %v, want the RayJob of %s", d.Create, tt.wantTime)
			}
			if got := d.Status.LastScheduleTime; got == nil || !got.Time.Equal(tt.wantTime) {
				t.Errorf("lastScheduleTime = %v, want the schedule time %s, not now", got, tt.wantTime)
			}
			var missed []string
			for _, e := range d.Events {
				if e.Reason == EventMissedSchedules {
					missed = append(missed, e.Message)
				}
			}
			if (tt.wantMissed == "") != (len(missed) == 0) || (tt.wantMissed != "" && missed[0] != tt.wantMissed) {
				t.Errorf("missed-schedule events = %q, want %q", missed, tt.wantMissed)
			}
		})
	}
}

func TestNextAfterResumeStartsOnlyTheLatestMissedTime(t *testing.T) {
	cj := cronJob()
	cj.Status.LastScheduleTime = &metav1.Time{Time: t0}
	cj.Spec.Suspend = ptr.To(false)
	d := Next(Observed{CronJob: cj, Now: t0.Add(2*time.Hour + time.Minute)})
	if d.Create == nil || d.Create.Annotations["ray.io/cronjob-scheduled-timestamp"] != "2024-01-01T02:00:00Z" {
		t.Fatalf("started %v, want the RayJob of 02:00", d.Create)
	}
	if len(d.Events) != 1 || !strings.HasPrefix(d.Events[0].Message, "23 earlier schedule times") {
		t.Errorf("events = %+v, want 23 missed", d.Events)
	}
}
