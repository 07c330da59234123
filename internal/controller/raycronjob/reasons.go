package raycronjob

// The RayCronJob controller's event reasons: KubeRay's two, and kray's for what it says beyond them. The
// Scheduling condition's reasons are RayCronJobScheduled and the first two.
const (
	EventInvalidRayCronJobSpec = "InvalidRayCronJobSpec"
	EventSuspendedRayCronJob   = "SuspendedRayCronJob"
	// EventCreatedRayJob says which RayJob a schedule time started.
	EventCreatedRayJob = "CreatedRayJob"
	// EventFailedToCreateRayJob says a schedule time's RayJob could not be created because another object
	// holds its name.
	EventFailedToCreateRayJob = "FailedToCreateRayJob"
	// EventMissedSchedules says how many schedule times passed with no RayJob (the operator down or the
	// RayCronJob suspended) before the one that started.
	EventMissedSchedules = "MissedSchedules"

	// ReasonScheduled is the Scheduling condition's reason while RayJobs are started.
	ReasonScheduled = "Scheduled"
)
