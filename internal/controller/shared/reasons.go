package shared

// Event reasons more than one controller records, KubeRay's.
const (
	EventCreatedService           = "CreatedService"
	EventFailedToCreateService    = "FailedToCreateService"
	EventCreatedRayCluster        = "CreatedRayCluster"
	EventFailedToCreateRayCluster = "FailedToCreateRayCluster"
	EventDeletedRayCluster        = "DeletedRayCluster"
	EventUpdatedRayCluster        = "UpdatedRayCluster"
	EventUpdatedService           = "UpdatedService"
	EventFailedToUpdateService    = "FailedToUpdateService"
	EventFailedToUpdateRayCluster = "FailedToUpdateRayCluster"
	EventFailedToDeleteRayCluster = "FailedToDeleteRayCluster"
)
