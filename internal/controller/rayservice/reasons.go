package rayservice

// The RayService controller's event reasons, KubeRay's except FailedToGetServeApplications.
const (
	// EventFailedToGetServeApplications says the serving cluster's Serve applications could not be read (the
	// dashboard is unreachable, or Serve's controller is not up); kray tries again at the next poll.
	EventFailedToGetServeApplications    = "FailedToGetServeApplications"
	EventInvalidRayServiceMetadata       = "InvalidRayServiceMetadata"
	EventInvalidRayServiceSpec           = "InvalidRayServiceSpec"
	EventUpdatedServeApplications        = "UpdatedServeApplications"
	EventFailedToUpdateServeApplications = "FailedToUpdateServeApplications"
	EventUpdatedHeadPodServeLabel        = "UpdatedHeadPodServeLabel"
	EventFailedToUpdateHeadPodServeLabel = "FailedToUpdateHeadPodServeLabel"
	EventRayServiceInitializingTimeout   = "RayServiceInitializingTimeout"
	EventDeletedService                  = "DeletedService"
	EventFailedToDeleteService           = "FailedToDeleteService"
	// The events of an incremental upgrade's Gateway, HTTPRoute and Serve target capacities.
	EventCreatedGateway               = "CreatedGateway"
	EventUpdatedGateway               = "UpdatedGateway"
	EventFailedToCreateGateway        = "FailedToCreateGateway"
	EventFailedToUpdateGateway        = "FailedToUpdateGateway"
	EventDeletedGateway               = "DeletedGateway"
	EventFailedToDeleteGateway        = "FailedToDeleteGateway"
	EventCreatedHTTPRoute             = "CreatedHTTPRoute"
	EventUpdatedHTTPRoute             = "UpdatedHTTPRoute"
	EventFailedToCreateHTTPRoute      = "FailedToCreateHTTPRoute"
	EventFailedToUpdateHTTPRoute      = "FailedToUpdateHTTPRoute"
	EventDeletedHTTPRoute             = "DeletedHTTPRoute"
	EventFailedToDeleteHTTPRoute      = "FailedToDeleteHTTPRoute"
	EventUpdatedServeTargetCapacity   = "UpdatedServeTargetCapacity"
	EventFailedToUpdateTargetCapacity = "FailedToUpdateTargetCapacity"
)
