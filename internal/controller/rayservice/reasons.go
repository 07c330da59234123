package rayservice

// The RayService controller's event reasons, KubeRay's.
const (
	EventInvalidRayServiceMetadata       = "InvalidRayServiceMetadata"
	EventInvalidRayServiceSpec           = "InvalidRayServiceSpec"
	EventUpdatedServeApplications        = "UpdatedServeApplications"
	EventFailedToUpdateServeApplications = "FailedToUpdateServeApplications"
	EventUpdatedHeadPodServeLabel        = "UpdatedHeadPodServeLabel"
	EventFailedToUpdateHeadPodServeLabel = "FailedToUpdateHeadPodServeLabel"
	EventRayServiceInitializingTimeout   = "RayServiceInitializingTimeout"
)
