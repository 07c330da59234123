package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The Go identifiers, JSON names, enums and defaults in this file follow KubeRay's ray.io/v1 RayService API,
// so that RayService manifests and code written against KubeRay's types keep working; only doc comments
// differ.

// ServiceStatus is the deprecated summary of a RayService's Ready condition.
type ServiceStatus string

// The ServiceStatus values: Running while the Ready condition is True, empty otherwise.
const (
	Running    ServiceStatus = "Running"
	NotRunning ServiceStatus = ""
)

// RayServiceUpgradeType is how a RayService takes a change of its cluster spec.
type RayServiceUpgradeType string

// The RayService upgrade strategies.
const (
	// RayServiceNewClusterWithIncrementalUpgrade moves traffic to a new cluster step by step through the
	// Gateway API (behind the RayServiceIncrementalUpgrade feature gate).
	RayServiceNewClusterWithIncrementalUpgrade RayServiceUpgradeType = "NewClusterWithIncrementalUpgrade"
	// RayServiceNewCluster prepares a new cluster and moves all traffic to it once it serves.
	RayServiceNewCluster RayServiceUpgradeType = "NewCluster"
	// RayServiceUpgradeNone never creates a new cluster for a spec change.
	RayServiceUpgradeNone RayServiceUpgradeType = "None"
)

// ApplicationStatusEnum names Ray Serve's application statuses, as Serve's REST API reports them.
var ApplicationStatusEnum = struct {
	NOT_STARTED   string
	DEPLOYING     string
	RUNNING       string
	DEPLOY_FAILED string
	DELETING      string
	UNHEALTHY     string
}{
	NOT_STARTED:   "NOT_STARTED",
	DEPLOYING:     "DEPLOYING",
	RUNNING:       "RUNNING",
	DEPLOY_FAILED: "DEPLOY_FAILED",
	DELETING:      "DELETING",
	UNHEALTHY:     "UNHEALTHY",
}

// DeploymentStatusEnum names the Serve deployment statuses KubeRay's API lists; Serve reports others too,
// which are copied as they come.
var DeploymentStatusEnum = struct {
	UPDATING  string
	HEALTHY   string
	UNHEALTHY string
}{
	UPDATING:  "UPDATING",
	HEALTHY:   "HEALTHY",
	UNHEALTHY: "UNHEALTHY",
}

// ClusterUpgradeOptions tune a NewClusterWithIncrementalUpgrade upgrade.
type ClusterUpgradeOptions struct {
	// MaxSurgePercent is the share of the target capacity the new cluster grows by per step.
	// +kubebuilder:default:=100
	MaxSurgePercent *int32 `json:"maxSurgePercent,omitempty"`
	// StepSizePercent is the share of traffic moved to the new cluster per step.
	StepSizePercent *int32 `json:"stepSizePercent"`
	// IntervalSeconds is the time between two traffic steps.
	IntervalSeconds *int32 `json:"intervalSeconds"`
	// GatewayClassName is the Gateway API class the traffic split is made with.
	GatewayClassName string `json:"gatewayClassName"`
}

// RayServiceUpgradeStrategy is how a RayService takes a change of its cluster spec.
type RayServiceUpgradeStrategy struct {
	// Type is the strategy; unset is NewCluster unless the operator turns zero-downtime upgrades off.
	// +optional
	Type *RayServiceUpgradeType `json:"type,omitempty"`
	// ClusterUpgradeOptions apply to NewClusterWithIncrementalUpgrade only.
	ClusterUpgradeOptions *ClusterUpgradeOptions `json:"clusterUpgradeOptions,omitempty"`
}

// RayServiceSpec is the Serve applications a RayService runs and the RayCluster it runs them on.
type RayServiceSpec struct {
	// RayClusterDeletionDelaySeconds is how long a cluster that no longer serves is kept before it is
	// deleted; 60 when unset.
	// +kubebuilder:validation:Minimum=0
	// +optional
	RayClusterDeletionDelaySeconds *int32 `json:"rayClusterDeletionDelaySeconds,omitempty"`
	// Deprecated: ServiceUnhealthySecondThreshold is accepted and never read.
	// +optional
	ServiceUnhealthySecondThreshold *int32 `json:"serviceUnhealthySecondThreshold,omitempty"`
	// Deprecated: DeploymentUnhealthySecondThreshold is accepted and never read.
	// +optional
	DeploymentUnhealthySecondThreshold *int32 `json:"deploymentUnhealthySecondThreshold,omitempty"`
	// ServeService is the template of the Service that sends traffic to the pods whose Serve proxy is
	// healthy; its selector, namespace and ports are set by the operator.
	// +optional
	ServeService *corev1.Service `json:"serveService,omitempty"`
	// UpgradeStrategy is how a change of rayClusterConfig reaches the running applications.
	// +optional
	UpgradeStrategy *RayServiceUpgradeStrategy `json:"upgradeStrategy,omitempty"`
	// ServeConfigV2 is the Serve multi-application config, as YAML, that every cluster of the RayService
	// runs.
	// +optional
	ServeConfigV2 string `json:"serveConfigV2,omitempty"`
	// RayClusterSpec is the spec of each RayCluster the RayService creates.
	RayClusterSpec RayClusterSpec `json:"rayClusterConfig"`
	// ExcludeHeadPodFromServeSvc keeps the head pod out of the serve Service: its ray.io/serve label stays
	// "false".
	// +optional
	ExcludeHeadPodFromServeSvc bool `json:"excludeHeadPodFromServeSvc,omitempty"`
	// ManagedBy names the controller that reconciles this RayService (KubeRay v1.7); unset means the
	// KubeRay-compatible operator, and kray leaves any other (MultiKueue) alone. It is immutable.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="the managedBy field is immutable"
	// +kubebuilder:validation:XValidation:rule="self in ['ray.io/kuberay-operator', 'kueue.x-k8s.io/multikueue']",message="the managedBy field value must be either 'ray.io/kuberay-operator' or 'kueue.x-k8s.io/multikueue'"
	// +optional
	ManagedBy *string `json:"managedBy,omitempty"`
	// Suspend deletes the RayService's clusters and Services and stops serving (KubeRay v1.7); false again
	// serves from a new cluster. A suspend once begun completes before a change of this field is acted on.
	// +optional
	Suspend bool `json:"suspend,omitempty"`
}

// RayServiceStatuses is the observed state of a RayService: its serving and upcoming clusters, its
// conditions and its endpoints.
type RayServiceStatuses struct {
	// Conditions are Ready, UpgradeInProgress and, once suspended, Suspending, Suspended and RollbackInProgress.
	// +patchMergeKey=type
	// +patchStrategy=merge
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`
	// LastUpdateTime is when the status was last written.
	// +optional
	LastUpdateTime *metav1.Time `json:"lastUpdateTime,omitempty"`
	// Deprecated: ServiceStatus is Running while the Ready condition is True, else empty.
	// +optional
	ServiceStatus ServiceStatus `json:"serviceStatus,omitempty"`
	// ActiveServiceStatus is the cluster the Services send traffic to.
	// +optional
	ActiveServiceStatus RayServiceStatus `json:"activeServiceStatus,omitempty"`
	// PendingServiceStatus is the cluster being prepared to take over the traffic.
	// +optional
	PendingServiceStatus RayServiceStatus `json:"pendingServiceStatus,omitempty"`
	// NumServeEndpoints is the number of ready pods the serve Service selects.
	// +optional
	NumServeEndpoints int32 `json:"numServeEndpoints,omitempty"`
	// ObservedGeneration is the generation this status was computed from.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// RayServiceStatus is one cluster of a RayService and its Serve applications.
type RayServiceStatus struct {
	// Applications are the Serve applications of the cluster by name, as Serve last reported them.
	// +optional
	Applications map[string]AppStatus `json:"applicationStatuses,omitempty"`
	// TargetCapacity is the Serve target_capacity percentage of an incremental upgrade.
	// +optional
	TargetCapacity *int32 `json:"targetCapacity,omitempty"`
	// TrafficRoutedPercent is the share of traffic routed to the cluster during an incremental upgrade.
	// +optional
	TrafficRoutedPercent *int32 `json:"trafficRoutedPercent,omitempty"`
	// LastTrafficMigratedTime is when TrafficRoutedPercent last changed.
	// +optional
	LastTrafficMigratedTime *metav1.Time `json:"lastTrafficMigratedTime,omitempty"`
	// RayClusterName is the cluster's name.
	// +optional
	RayClusterName string `json:"rayClusterName,omitempty"`
	// RayClusterStatus is a copy of the cluster's status.
	// +optional
	RayClusterStatus RayClusterStatus `json:"rayClusterStatus,omitempty"`
}

// AppStatus is a Serve application's status and its deployments'.
type AppStatus struct {
	// Deployments are the application's deployments by name.
	// +optional
	Deployments map[string]ServeDeploymentStatus `json:"serveDeploymentStatuses,omitempty"`
	// +optional
	Status string `json:"status,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
}

// ServeDeploymentStatus is a Serve deployment's status.
type ServeDeploymentStatus struct {
	// +optional
	Status string `json:"status,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
}

// RayServiceConditionType and RayServiceConditionReason are the types and reasons of a RayService's
// conditions.
type (
	RayServiceConditionType   string
	RayServiceConditionReason string
)

// The RayService condition types.
const (
	// RayServiceReady is True while the serve Service has at least one ready endpoint.
	RayServiceReady RayServiceConditionType = "Ready"
	// UpgradeInProgress is True while a pending cluster is prepared beside the active one.
	UpgradeInProgress RayServiceConditionType = "UpgradeInProgress"
	// RollbackInProgress is True while an incremental upgrade is rolled back to the active cluster (KubeRay
	// v1.7); it is removed once the rollback completes, and False while a suspend stops any upgrade.
	RollbackInProgress RayServiceConditionType = "RollbackInProgress"
	// RayServiceSuspending is True while a suspended RayService's clusters and Services are deleted; once
	// begun it completes whatever spec.suspend becomes.
	RayServiceSuspending RayServiceConditionType = "Suspending"
	// RayServiceSuspended is True once they are all gone, until spec.suspend is false again.
	RayServiceSuspended RayServiceConditionType = "Suspended"
)

// The RayService condition reasons.
const (
	RayServiceInitializing         RayServiceConditionReason = "Initializing"
	RayServiceInitializingTimeout  RayServiceConditionReason = "InitializingTimeout"
	RayServiceValidationFailed     RayServiceConditionReason = "ValidationFailed"
	ZeroServeEndpoints             RayServiceConditionReason = "ZeroServeEndpoints"
	NonZeroServeEndpoints          RayServiceConditionReason = "NonZeroServeEndpoints"
	BothActivePendingClustersExist RayServiceConditionReason = "BothActivePendingClustersExist"
	NoPendingCluster               RayServiceConditionReason = "NoPendingCluster"
	NoActiveCluster                RayServiceConditionReason = "NoActiveCluster"
	// DesiredClusterSpecChanged is RollbackInProgress's reason: the spec changed away from the pending
	// cluster's mid-upgrade.
	DesiredClusterSpecChanged RayServiceConditionReason = "DesiredClusterSpecChanged"
	SuspendRequested          RayServiceConditionReason = "SuspendRequested"
	SuspendInProgress         RayServiceConditionReason = "SuspendInProgress"
	SuspendComplete           RayServiceConditionReason = "SuspendComplete"
	RayServiceResumed         RayServiceConditionReason = "RayServiceResumed"
	// TargetClusterChanged is KubeRay v1.6's, which v1.7 no longer sets; kept so that code written for v1.6
	// compiles.
	TargetClusterChanged RayServiceConditionReason = "TargetClusterChanged"
)

// RayService runs Ray Serve applications on a RayCluster it creates, and moves them to a new cluster when
// the cluster spec changes.
// +kubebuilder:object:root=true
// +kubebuilder:resource:categories=all
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:printcolumn:name="service status",type=string,JSONPath=".status.serviceStatus"
// +kubebuilder:printcolumn:name="num serve endpoints",type=string,JSONPath=".status.numServeEndpoints"
type RayService struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec RayServiceSpec `json:"spec,omitempty"`
	// +optional
	Status RayServiceStatuses `json:"status,omitempty"`
}

// RayServiceList is a list of RayServices.
// +kubebuilder:object:root=true
type RayServiceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []RayService `json:"items"`
}

func init() {
	SchemeBuilder.Register(&RayService{}, &RayServiceList{})
}
