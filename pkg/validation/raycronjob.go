package validation

import (
	"errors"
	"fmt"
	"strings"
	"time"
	_ "time/tzdata" // time zones load the same whatever the operator's image holds

	"github.com/robfig/cron/v3"

	rayv1 "github.com/kray-project/kray/api/v1"
)

// MaxRayCronJobNameLength leaves room for the "-<minutes since the epoch>" suffix of the RayJobs a RayCronJob
// starts.
const MaxRayCronJobNameLength = MaxRayJobNameLength - 11

// RayCronJobSpec checks a RayCronJob in KubeRay's order and wording and returns its schedule, read in its
// time zone; its error is reported with the InvalidRayCronJobSpec reason.
func RayCronJobSpec(cj *rayv1.RayCronJob, opts RayJobOptions) (cron.Schedule, error) {
	if len(cj.Name) > MaxRayCronJobNameLength {
		return nil, fmt.Errorf("RayCronJob name should be no more than %d characters", MaxRayCronJobNameLength)
	}
	if strings.Contains(cj.Spec.Schedule, "TZ") {
		return nil, errors.New("cannot use TZ or CRON_TZ in schedule, use timeZone field instead")
	}
	if _, err := cron.ParseStandard(cj.Spec.Schedule); err != nil {
		return nil, fmt.Errorf("invalid cron schedule: %w", err)
	}
	spec := cj.Spec.Schedule
	if tz := cj.Spec.TimeZone; tz != nil {
		if *tz == "" {
			return nil, errors.New("timeZone must not be empty string, omit the field to use the local time zone of the KubeRay operator")
		}
		if _, err := time.LoadLocation(*tz); err != nil {
			return nil, fmt.Errorf("invalid time zone: %w", err)
		}
		spec = "TZ=" + *tz + " " + spec
	}
	schedule, err := cron.ParseStandard(spec)
	if err != nil {
		return nil, fmt.Errorf("invalid cron schedule: %w", err)
	}
	job := &rayv1.RayJob{Spec: cj.Spec.JobTemplate}
	if err := RayJobSpec(job, opts); err != nil {
		return nil, fmt.Errorf("invalid RayJob template: %w", err)
	}
	return schedule, nil
}
