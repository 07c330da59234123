package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The Go identifiers, JSON names, enums and defaults in this file follow KubeRay's ray.io/v1 RayJob API, so
// that RayJob manifests and code written against KubeRay's types keep working; only doc comments differ.

// JobStatus is a Ray job's status as the Ray dashboard reports it; empty until the job is known.
type JobStatus string

// The Ray job statuses; AllJobStatuses lists them all.
const (
	JobStatusNew       JobStatus = ""
	JobStatusPending   JobStatus = "PENDING"
	JobStatusRunning   JobStatus = "RUNNING"
	JobStatusStopped   JobStatus = "STOPPED"
	JobStatusSucceeded JobStatus = "SUCCEEDED"
	JobStatusFailed    JobStatus = "FAILED"
)

// AllJobStatuses lists every JobStatus, the empty one included.
var AllJobStatuses = []JobStatus{
	JobStatusNew,
	JobStatusPending,
	JobStatusRunning,
	JobStatusStopped,
	JobStatusSucceeded,
	JobStatusFailed,
}

// IsJobTerminal reports whether a Ray job in status can no longer change (Ray's JobStatus.is_terminal).
func IsJobTerminal(status JobStatus) bool {
	return status == JobStatusStopped || status == JobStatusSucceeded || status == JobStatusFailed
}

// JobDeploymentStatus is where a RayJob is in its lifecycle: its cluster, its submission and its end.
type JobDeploymentStatus string

// The RayJob lifecycle states.
const (
	JobDeploymentStatusNew              JobDeploymentStatus = ""
	JobDeploymentStatusInitializing     JobDeploymentStatus = "Initializing"
	JobDeploymentStatusRunning          JobDeploymentStatus = "Running"
	JobDeploymentStatusComplete         JobDeploymentStatus = "Complete"
	JobDeploymentStatusFailed           JobDeploymentStatus = "Failed"
	JobDeploymentStatusValidationFailed JobDeploymentStatus = "ValidationFailed"
	JobDeploymentStatusSuspending       JobDeploymentStatus = "Suspending"
	JobDeploymentStatusSuspended        JobDeploymentStatus = "Suspended"
	JobDeploymentStatusRetrying         JobDeploymentStatus = "Retrying"
	JobDeploymentStatusWaiting          JobDeploymentStatus = "Waiting"
)

// IsJobDeploymentTerminal reports whether a RayJob in status has ended (Complete or Failed).
func IsJobDeploymentTerminal(status JobDeploymentStatus) bool {
	return status == JobDeploymentStatusComplete || status == JobDeploymentStatusFailed
}

// JobFailedReason says why a RayJob's deployment status became Failed.
type JobFailedReason string

// The reasons a RayJob fails.
const (
	SubmissionFailed                                 JobFailedReason = "SubmissionFailed"
	DeadlineExceeded                                 JobFailedReason = "DeadlineExceeded"
	PreRunningDeadlineExceeded                       JobFailedReason = "PreRunningDeadlineExceeded"
	JobStatusCheckTimeoutExceeded                    JobFailedReason = "JobStatusCheckTimeoutExceeded"
	AppFailed                                        JobFailedReason = "AppFailed"
	JobDeploymentStatusTransitionGracePeriodExceeded JobFailedReason = "JobDeploymentStatusTransitionGracePeriodExceeded"
	ValidationFailed                                 JobFailedReason = "ValidationFailed"
)

// JobSubmissionMode is how the operator hands a RayJob's entrypoint to its Ray cluster.
type JobSubmissionMode string

// The submission modes.
const (
	// K8sJobMode runs `ray job submit` in a batch/v1 Job.
	K8sJobMode JobSubmissionMode = "K8sJobMode"
	// HTTPMode has the operator submit through the Ray dashboard's Job REST API.
	HTTPMode JobSubmissionMode = "HTTPMode"
	// InteractiveMode submits nothing: the user submits and sets spec.jobId.
	InteractiveMode JobSubmissionMode = "InteractiveMode"
	// SidecarMode runs `ray job submit` in a container added to the head pod.
	SidecarMode JobSubmissionMode = "SidecarMode"
)

// DeletionStrategy cleans up after a RayJob ends, in one of two styles: the deprecated onSuccess and
// onFailure pair, or a non-empty deletionRules list, which excludes shutdownAfterJobFinishes and
// ttlSecondsAfterFinished.
// +kubebuilder:validation:XValidation:rule="!((has(self.onSuccess) || has(self.onFailure)) && has(self.deletionRules))",message="legacy policies (onSuccess/onFailure) and deletionRules cannot be used together within the same deletionStrategy"
// +kubebuilder:validation:XValidation:rule="((has(self.onSuccess) && has(self.onFailure)) || has(self.deletionRules))",message="deletionStrategy requires either BOTH onSuccess and onFailure, OR the deletionRules field (cannot be empty)"
type DeletionStrategy struct {
	// OnSuccess is applied when the Ray job succeeds. Deprecated: use deletionRules.
	// +optional
	OnSuccess *DeletionPolicy `json:"onSuccess,omitempty"`

	// OnFailure is applied when the Ray job or the RayJob fails. Deprecated: use deletionRules.
	// +optional
	OnFailure *DeletionPolicy `json:"onFailure,omitempty"`

	// DeletionRules are applied once their condition holds; when several are due at once, the one that
	// deletes the most runs first.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	DeletionRules []DeletionRule `json:"deletionRules,omitempty"`
}

// DeletionRule deletes what Policy names once Condition holds.
type DeletionRule struct {
	// Policy is what to delete.
	// +kubebuilder:validation:Enum=DeleteCluster;DeleteWorkers;DeleteSelf;DeleteNone
	Policy DeletionPolicyType `json:"policy"`

	// Condition is when to delete it.
	Condition DeletionCondition `json:"condition"`
}

// DeletionCondition holds TTLSeconds after the Ray job reached JobStatus.
// +kubebuilder:validation:XValidation:rule="!(has(self.jobStatus) && has(self.jobDeploymentStatus))",message="JobStatus and JobDeploymentStatus cannot be used together within the same deletion condition."
// +kubebuilder:validation:XValidation:rule="has(self.jobStatus) || has(self.jobDeploymentStatus)",message="the deletion condition requires either the JobStatus or the JobDeploymentStatus field."
type DeletionCondition struct {
	// JobStatus is the terminal Ray job status the rule waits for; exactly one of it and
	// JobDeploymentStatus is set.
	// +kubebuilder:validation:Enum=SUCCEEDED;FAILED
	// +optional
	JobStatus *JobStatus `json:"jobStatus,omitempty"`

	// JobDeploymentStatus is the terminal RayJob deployment status the rule waits for (KubeRay v1.7); only
	// Failed is supported.
	// +kubebuilder:validation:Enum=Failed
	// +optional
	JobDeploymentStatus *JobDeploymentStatus `json:"jobDeploymentStatus,omitempty"`

	// TTLSeconds is how long after the RayJob ended the rule waits.
	// +kubebuilder:default=0
	// +kubebuilder:validation:Minimum=0
	// +optional
	TTLSeconds int32 `json:"ttlSeconds,omitempty"`
}

// DeletionPolicy is one policy of the deprecated onSuccess/onFailure style.
type DeletionPolicy struct {
	// Policy is what to delete; required in the onSuccess/onFailure style.
	// +kubebuilder:validation:Enum=DeleteCluster;DeleteWorkers;DeleteSelf;DeleteNone
	// +optional
	Policy *DeletionPolicyType `json:"policy,omitempty"`
}

// DeletionPolicyType names what a deletion policy deletes.
type DeletionPolicyType string

// The deletion policies.
const (
	// DeleteCluster deletes the RayJob's RayCluster.
	DeleteCluster DeletionPolicyType = "DeleteCluster"
	// DeleteWorkers suspends the RayJob's RayCluster's worker groups, keeping the head.
	DeleteWorkers DeletionPolicyType = "DeleteWorkers"
	// DeleteSelf deletes the RayJob and, through ownership, everything it created.
	DeleteSelf DeletionPolicyType = "DeleteSelf"
	// DeleteNone deletes nothing.
	DeleteNone DeletionPolicyType = "DeleteNone"
)

// SubmitterConfig configures the K8sJobMode submitter Job.
type SubmitterConfig struct {
	// BackoffLimit is the submitter Job's backoffLimit; unset means 2.
	// +optional
	BackoffLimit *int32 `json:"backoffLimit,omitempty"`
}

// RayJobStatusInfo is what the Ray dashboard reported of the job's own start and end.
type RayJobStatusInfo struct {
	StartTime *metav1.Time `json:"startTime,omitempty"`
	EndTime   *metav1.Time `json:"endTime,omitempty"`
}

// RayJobSpec is the desired state of a RayJob.
type RayJobSpec struct {
	// ActiveDeadlineSeconds bounds, from the RayJob's start, how long it may run before it fails with
	// DeadlineExceeded.
	// +optional
	ActiveDeadlineSeconds *int32 `json:"activeDeadlineSeconds,omitempty"`
	// PreRunningDeadlineSeconds bounds, from the attempt's start, how long it may take to reach Running
	// (stay Initializing or Waiting) before it fails with PreRunningDeadlineExceeded (KubeRay v1.7);
	// backoffLimit decides on a new attempt.
	// +kubebuilder:validation:Minimum=1
	// +optional
	PreRunningDeadlineSeconds *int32 `json:"preRunningDeadlineSeconds,omitempty"`
	// BackoffLimit is how many times a failed RayJob is retried, each retry on a new RayCluster.
	// +kubebuilder:default:=0
	// +optional
	BackoffLimit *int32 `json:"backoffLimit,omitempty"`
	// RayClusterSpec is the RayCluster created for the job; unused when clusterSelector is set.
	RayClusterSpec *RayClusterSpec `json:"rayClusterSpec,omitempty"`
	// SubmitterPodTemplate replaces the default K8sJobMode submitter pod.
	// +optional
	SubmitterPodTemplate *corev1.PodTemplateSpec `json:"submitterPodTemplate,omitempty"`
	// Metadata is stored with the Ray job.
	// +optional
	Metadata map[string]string `json:"metadata,omitempty"`
	// ClusterSelector selects an existing RayCluster by its labels instead of creating one.
	// +optional
	ClusterSelector map[string]string `json:"clusterSelector,omitempty"`
	// SubmitterConfig configures the K8sJobMode submitter Job.
	// +optional
	SubmitterConfig *SubmitterConfig `json:"submitterConfig,omitempty"`
	// ManagedBy names the controller that reconciles this RayJob; unset means the KubeRay-compatible operator.
	// It is immutable.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="the managedBy field is immutable"
	// +kubebuilder:validation:XValidation:rule="self in ['ray.io/kuberay-operator', 'kueue.x-k8s.io/multikueue']",message="the managedBy field value must be either 'ray.io/kuberay-operator' or 'kueue.x-k8s.io/multikueue'"
	// +optional
	ManagedBy *string `json:"managedBy,omitempty"`
	// DeletionStrategy cleans up after the RayJob ends.
	// +optional
	DeletionStrategy *DeletionStrategy `json:"deletionStrategy,omitempty"`
	// Entrypoint is the command the Ray job runs.
	// +optional
	Entrypoint string `json:"entrypoint,omitempty"`
	// RuntimeEnvYAML is the Ray job's runtime environment, as YAML.
	// +optional
	RuntimeEnvYAML string `json:"runtimeEnvYAML,omitempty"`
	// JobId is the Ray job's submission id; generated when unset, and required in InteractiveMode.
	// +optional
	JobId string `json:"jobId,omitempty"`
	// SubmissionMode is how the entrypoint reaches the cluster.
	// +kubebuilder:default:=K8sJobMode
	// +optional
	SubmissionMode JobSubmissionMode `json:"submissionMode,omitempty"`
	// EntrypointResources is a JSON object of custom resources reserved for the entrypoint.
	// +optional
	EntrypointResources string `json:"entrypointResources,omitempty"`
	// EntrypointNumCpus is the number of CPUs reserved for the entrypoint.
	// +optional
	EntrypointNumCpus float32 `json:"entrypointNumCpus,omitempty"`
	// EntrypointNumGpus is the number of GPUs reserved for the entrypoint.
	// +optional
	EntrypointNumGpus float32 `json:"entrypointNumGpus,omitempty"`
	// TTLSecondsAfterFinished delays the cleanup that shutdownAfterJobFinishes asks for.
	// +kubebuilder:default:=0
	// +optional
	TTLSecondsAfterFinished int32 `json:"ttlSecondsAfterFinished,omitempty"`
	// ShutdownAfterJobFinishes deletes the RayCluster (and the submitter) once the RayJob ends.
	// +optional
	ShutdownAfterJobFinishes bool `json:"shutdownAfterJobFinishes,omitempty"`
	// Suspend keeps the RayJob without a cluster or a submitter; setting it on a running RayJob tears both
	// down, and clearing it starts the RayJob again.
	// +optional
	Suspend bool `json:"suspend,omitempty"`
}

// RayJobStatus is the observed state of a RayJob.
type RayJobStatus struct {
	// RayJobStatusInfo is what the Ray dashboard reported of the job's start and end.
	// +optional
	RayJobStatusInfo RayJobStatusInfo `json:"rayJobInfo,omitempty"`
	// JobId is the Ray job's submission id, set before anything is submitted.
	// +optional
	JobId string `json:"jobId,omitempty"`
	// RayClusterName names the RayCluster the job runs on.
	// +optional
	RayClusterName string `json:"rayClusterName,omitempty"`
	// DashboardURL is the address of that cluster's Ray dashboard.
	// +optional
	DashboardURL string `json:"dashboardURL,omitempty"`
	// JobStatus is the Ray job's status as the dashboard reported it.
	// +optional
	JobStatus JobStatus `json:"jobStatus,omitempty"`
	// JobDeploymentStatus is where the RayJob is in its lifecycle.
	// +optional
	JobDeploymentStatus JobDeploymentStatus `json:"jobDeploymentStatus,omitempty"`
	// Reason says why the RayJob failed.
	// +optional
	Reason JobFailedReason `json:"reason,omitempty"`
	// Message explains Reason, or the current state.
	// +optional
	Message string `json:"message,omitempty"`
	// StartTime is when the current attempt began (the move to Initializing).
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// EndTime is when the RayJob ended (Complete or Failed).
	// +optional
	EndTime *metav1.Time `json:"endTime,omitempty"`
	// Succeeded counts the attempts that succeeded.
	// +kubebuilder:default:=0
	// +optional
	Succeeded *int32 `json:"succeeded,omitempty"`
	// Failed counts the attempts that failed.
	// +kubebuilder:default:=0
	// +optional
	Failed *int32 `json:"failed,omitempty"`
	// RayClusterStatus is a copy of the RayCluster's status.
	// +optional
	RayClusterStatus RayClusterStatus `json:"rayClusterStatus,omitempty"`
	// ObservedGeneration is the generation this status was computed from.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// JobStatusCheckFailureStartTime is when the reads of the job's status from the Ray dashboard began to
	// fail, unset once one succeeds (KubeRay v1.7): the attempt fails with JobStatusCheckTimeoutExceeded when
	// they keep failing for the operator's job status check timeout.
	// +optional
	JobStatusCheckFailureStartTime *metav1.Time `json:"jobStatusCheckFailureStartTime,omitempty"`
}

// RayJob runs one Ray job on a RayCluster that it creates or selects.
// +kubebuilder:object:root=true
// +kubebuilder:resource:categories=all
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:printcolumn:name="job status",type=string,JSONPath=".status.jobStatus",priority=0
// +kubebuilder:printcolumn:name="deployment status",type=string,JSONPath=".status.jobDeploymentStatus",priority=0
// +kubebuilder:printcolumn:name="ray cluster name",type="string",JSONPath=".status.rayClusterName",priority=0
// +kubebuilder:printcolumn:name="start time",type=string,JSONPath=".status.startTime",priority=0
// +kubebuilder:printcolumn:name="end time",type=string,JSONPath=".status.endTime",priority=0
// +kubebuilder:printcolumn:name="age",type="date",JSONPath=".metadata.creationTimestamp",priority=0
type RayJob struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec RayJobSpec `json:"spec,omitempty"`
	// +optional
	Status RayJobStatus `json:"status,omitempty"`
}

// RayJobList is a list of RayJobs.
// +kubebuilder:object:root=true
type RayJobList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []RayJob `json:"items"`
}

func init() {
	SchemeBuilder.Register(&RayJob{}, &RayJobList{})
}
