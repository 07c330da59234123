package rayjob

// The RayJob controller's event reasons, KubeRay's.
const (
	EventInvalidRayJobMetadata         = "InvalidRayJobMetadata"
	EventInvalidRayJobSpec             = "InvalidRayJobSpec"
	EventInvalidRayJobStatus           = "InvalidRayJobStatus"
	EventRayClusterNotFound            = "RayClusterNotFound"
	EventCreatedRayJobSubmitter        = "CreatedRayJobSubmitter"
	EventFailedToCreateRayJobSubmitter = "FailedToCreateRayJobSubmitter"
	EventDeletedRayJobSubmitter        = "DeletedRayJobSubmitter"
	EventFailedToDeleteRayJobSubmitter = "FailedToDeleteRayJobSubmitter"
	EventSubmittedRayJob               = "SubmittedRayJob"
	EventFailedToSubmitRayJob          = "FailedToSubmitRayJob"
	EventStoppedRayJob                 = "StoppedRayJob"
	EventFailedToStopRayJob            = "FailedToStopRayJob"
)
