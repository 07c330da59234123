package builder

// Names and defaults of the objects the builders make: ports, containers, volumes, update strategy.
const (
	// DefaultMaxUnavailable is a worker group's rollingUpdate.maxUnavailable when unset.
	DefaultMaxUnavailable         = "25%"
	DefaultHeadPort               = "6379"
	DefaultDashboardAgentPort     = 52365
	DefaultMetricsPort            = 8080
	DefaultClientPort             = 10001
	AutoscalerContainerName       = "autoscaler"
	WaitGCSReadyInitContainerName = "wait-gcs-ready"
	SharedMemoryVolumeName        = "shared-mem"
	SharedMemoryMountPath         = "/dev/shm"
	RayLogsVolumeName             = "ray-logs"
	RayLogsMountPath              = "/tmp/ray"
)
