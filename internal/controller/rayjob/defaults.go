package rayjob

// Names and defaults of the submitter, KubeRay's.
const (
	// SubmitterContainerName is the container that runs `ray job submit`.
	SubmitterContainerName = "ray-job-submitter"
	// EnvRayDashboardAddress and EnvRayJobSubmissionID tell the submitter where and what to submit.
	EnvRayDashboardAddress = "RAY_DASHBOARD_ADDRESS"
	EnvRayJobSubmissionID  = "RAY_JOB_SUBMISSION_ID"
	// DefaultSubmitterBackoffLimit is the submitter Job's backoffLimit when submitterConfig sets none.
	DefaultSubmitterBackoffLimit = 2
)
