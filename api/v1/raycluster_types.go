package v1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The Go identifiers and JSON names in this file follow KubeRay's ray.io/v1 API so that manifests, the Ray
// autoscaler and code written against KubeRay's types keep working; only doc comments and validation differ.

// Values accepted by RayClusterSpec.ManagedBy.
const (
	// KubeRayOperatorManagedBy marks a RayCluster reconciled by a KubeRay-compatible operator (kray included).
	KubeRayOperatorManagedBy = "ray.io/kuberay-operator"
	// MultiKueueManagedBy marks a RayCluster that Kueue's MultiKueue dispatches to another cluster; kray skips it.
	MultiKueueManagedBy = "kueue.x-k8s.io/multikueue"
)

// RayClusterSpec is the desired state of a RayCluster.
// +kubebuilder:validation:XValidation:rule="has(self.managedBy) == has(oldSelf.managedBy)",message="the managedBy field is immutable",fieldPath=".managedBy"
// +kubebuilder:validation:XValidation:rule="!has(self.workerGroupSpecs) || self.workerGroupSpecs.all(w, self.workerGroupSpecs.exists_one(o, o.groupName == w.groupName))",message="workerGroupSpecs[].groupName must be unique",fieldPath=".workerGroupSpecs"
type RayClusterSpec struct {
	// UpgradeStrategy selects what happens to running pods when the pod spec changes; unset means None.
	// +optional
	UpgradeStrategy *RayClusterUpgradeStrategy `json:"upgradeStrategy,omitempty"`
	// AuthOptions configures Ray token authentication.
	// +optional
	AuthOptions *AuthOptions `json:"authOptions,omitempty"`
	// Suspend, when true, deletes every pod of the cluster and keeps it without pods until set to false.
	// +optional
	Suspend *bool `json:"suspend,omitempty"`
	// ManagedBy names the controller that reconciles this RayCluster; unset means the KubeRay-compatible
	// operator. It is immutable.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="the managedBy field is immutable"
	// +kubebuilder:validation:XValidation:rule="self in ['ray.io/kuberay-operator', 'kueue.x-k8s.io/multikueue']",message="the managedBy field value must be either 'ray.io/kuberay-operator' or 'kueue.x-k8s.io/multikueue'"
	// +optional
	ManagedBy *string `json:"managedBy,omitempty"`
	// AutoscalerOptions configures the Ray autoscaler sidecar and is also read by the autoscaler itself.
	// +optional
	AutoscalerOptions *AutoscalerOptions `json:"autoscalerOptions,omitempty"`
	// HeadServiceAnnotations are added to the head Service and win over HeadGroupSpec.HeadService annotations.
	// +optional
	HeadServiceAnnotations map[string]string `json:"headServiceAnnotations,omitempty"`
	// EnableInTreeAutoscaling, when true, adds the Ray autoscaler sidecar to the head pod and its RBAC objects.
	// +optional
	EnableInTreeAutoscaling *bool `json:"enableInTreeAutoscaling,omitempty"`
	// GcsFaultToleranceOptions enables GCS fault tolerance with an external Redis or an embedded RocksDB store.
	// +optional
	GcsFaultToleranceOptions *GcsFaultToleranceOptions `json:"gcsFaultToleranceOptions,omitempty"`
	// HistoryServerOptions configures the Ray history server collector sidecar.
	// +optional
	HistoryServerOptions *HistoryServerOptions `json:"historyServerOptions,omitempty"`
	// NetworkPolicy, when set, isolates the cluster's pods with NetworkPolicies.
	// +optional
	NetworkPolicy *NetworkPolicyConfig `json:"networkPolicy,omitempty"`
	// TLSOptions enables mutual TLS between Ray pods.
	// +optional
	TLSOptions *TLSOptions `json:"tlsOptions,omitempty"`
	// HeadGroupSpec describes the head pod.
	HeadGroupSpec HeadGroupSpec `json:"headGroupSpec"`
	// RayVersion is the Ray version of the images; it selects version-dependent behaviour such as probes.
	// +optional
	RayVersion string `json:"rayVersion,omitempty"`
	// WorkerDrain, when set, drains a worker's Ray node before its pod is deleted (a kray extension).
	// +optional
	WorkerDrain *WorkerDrainOptions `json:"workerDrain,omitempty"`
	// WorkerGroupSpecs describes the worker groups; group names are unique.
	// At most 200 groups keep the uniqueness rule (quadratic) within the apiserver's CEL cost limits.
	// +kubebuilder:validation:MaxItems=200
	// +optional
	WorkerGroupSpecs []WorkerGroupSpec `json:"workerGroupSpecs,omitempty"`
}

// HeadGroupSpec describes the head pod and its Service.
type HeadGroupSpec struct {
	// Template is the head pod template; its first container is the Ray container.
	Template corev1.PodTemplateSpec `json:"template"`
	// HeadService is the base of the generated head Service.
	// +optional
	HeadService *corev1.Service `json:"headService,omitempty"`
	// EnableIngress, when true, exposes the head Service through an Ingress.
	// +optional
	EnableIngress *bool `json:"enableIngress,omitempty"`
	// IngressOptions configures the Ingress created when EnableIngress is true.
	// +optional
	IngressOptions *IngressOptions `json:"ingressOptions,omitempty"`
	// Resources are Ray logical resources of the head node; they override the resource flags in RayStartParams.
	// +optional
	Resources map[string]string `json:"resources,omitempty"`
	// Labels are Ray node labels of the head node; they are also added to the head pod's labels.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// RayStartParams become `ray start` flags of the head node.
	// +optional
	RayStartParams map[string]string `json:"rayStartParams"`
	// ServiceType is the type of the head Service; empty means ClusterIP.
	// +optional
	ServiceType corev1.ServiceType `json:"serviceType,omitempty"`
}

// WorkerGroupSpec describes one group of identical worker pods.
// +kubebuilder:validation:XValidation:rule="!has(self.minReplicas) || !has(self.maxReplicas) || self.minReplicas <= self.maxReplicas",message="workerGroupSpecs[].minReplicas must be less than or equal to maxReplicas",fieldPath=".minReplicas"
type WorkerGroupSpec struct {
	// Suspend, when true, deletes the group's pods; it is set by RayJob and is not meant for users.
	// +optional
	Suspend *bool `json:"suspend,omitempty"`
	// GroupName identifies the group within the cluster and is the value of the ray.io/group pod label,
	// hence at most 63 characters.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	GroupName string `json:"groupName"`
	// Replicas is the desired number of replicas, clamped to [MinReplicas, MaxReplicas]; the autoscaler writes it.
	// +kubebuilder:default:=0
	// +kubebuilder:validation:Minimum=0
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`
	// MinReplicas is the lower bound of Replicas.
	// +kubebuilder:default:=0
	// +kubebuilder:validation:Minimum=0
	MinReplicas *int32 `json:"minReplicas"`
	// MaxReplicas is the upper bound of Replicas.
	// +kubebuilder:default:=2147483647
	// +kubebuilder:validation:Minimum=0
	MaxReplicas *int32 `json:"maxReplicas"`
	// IdleTimeoutSeconds overrides, for this group, how long autoscaler v2 keeps an idle worker.
	// +optional
	IdleTimeoutSeconds *int32 `json:"idleTimeoutSeconds,omitempty"`
	// Priority ranks groups for autoscaler v2 scale-up; higher is preferred.
	// +kubebuilder:default:=0
	// +optional
	Priority *int32 `json:"priority,omitempty"`
	// Resources are Ray logical resources of the group's nodes; they override the resource flags in RayStartParams.
	// +optional
	Resources map[string]string `json:"resources,omitempty"`
	// Labels are Ray node labels of the group's nodes; they are also added to the group's pod labels.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// RayStartParams become `ray start` flags of the group's nodes.
	// +optional
	RayStartParams map[string]string `json:"rayStartParams"`
	// Template is the worker pod template; its first container is the Ray container.
	Template corev1.PodTemplateSpec `json:"template"`
	// ScaleStrategy names the pods to remove when scaling down.
	// +optional
	ScaleStrategy ScaleStrategy `json:"scaleStrategy,omitempty"`
	// NumOfHosts is the number of pods per replica; 0 is treated as 1.
	// +kubebuilder:default:=1
	// +kubebuilder:validation:Minimum=0
	// +optional
	NumOfHosts int32 `json:"numOfHosts,omitempty"`
	// RollingUpdate paces the group's rolling update when upgradeStrategy is RollingUpdate (a kray extension).
	// +optional
	RollingUpdate *WorkerGroupRollingUpdate `json:"rollingUpdate,omitempty"`
}

// WorkerGroupRollingUpdate paces one worker group's rolling update.
type WorkerGroupRollingUpdate struct {
	// MaxUnavailable is how many of the group's pods (a number or a percentage) may be unavailable while it
	// is updated; default 25%. It also bounds how many ready pods a named scale-down deletes at once beyond
	// the replicas decrease.
	// +kubebuilder:validation:XIntOrString
	// +optional
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`
	// Partition is how many of the group's pods (a number or a percentage) stay at the old spec; default 0.
	// +kubebuilder:validation:XIntOrString
	// +optional
	Partition *intstr.IntOrString `json:"partition,omitempty"`
	// MaxSurge is how many pods (a number or a percentage) the group may run above its replicas while it is
	// updated: new pods are started first, so with maxUnavailable 0 the group never has fewer available pods
	// than its replicas; default 0. The extra pods go once the update is done.
	// +kubebuilder:validation:XIntOrString
	// +optional
	MaxSurge *intstr.IntOrString `json:"maxSurge,omitempty"`
}

// WorkerDrainOptions configures draining Ray worker nodes before their pods are deleted.
type WorkerDrainOptions struct {
	// TimeoutSeconds bounds how long a worker pod waits for its Ray node to drain before it is deleted
	// anyway; default 600.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=86400
	// +optional
	TimeoutSeconds *int32 `json:"timeoutSeconds,omitempty"`
}

// ScaleStrategy names the pods that a scale-down removes.
type ScaleStrategy struct {
	// WorkersToDelete lists worker pod names to delete; the autoscaler writes it.
	WorkersToDelete []string `json:"workersToDelete,omitempty"`
}

// ClusterState is the coarse state of a RayCluster; KubeRay deprecates it in favour of conditions.
type ClusterState string

// Values of RayClusterStatus.State.
const (
	// Ready means every pod was running and ready at the same time; it is not reset later.
	Ready ClusterState = "ready"
	// Failed is never set; it is kept so that code written against KubeRay compiles.
	//
	// Deprecated: use conditions.
	Failed ClusterState = "failed"
	// Suspended means Spec.Suspend is true and no pods remain.
	Suspended ClusterState = "suspended"
)

// RayClusterStatus is the observed state of a RayCluster.
type RayClusterStatus struct {
	// State is the coarse state of the cluster, kept for compatibility; readers should prefer Conditions.
	// +optional
	State ClusterState `json:"state,omitempty"`
	// DesiredCPU is the total CPU requested by the desired pods.
	// +optional
	DesiredCPU resource.Quantity `json:"desiredCPU,omitempty"`
	// DesiredMemory is the total memory requested by the desired pods.
	// +optional
	DesiredMemory resource.Quantity `json:"desiredMemory,omitempty"`
	// DesiredGPU is the total number of GPUs requested by the desired pods.
	// +optional
	DesiredGPU resource.Quantity `json:"desiredGPU,omitempty"`
	// DesiredTPU is the total number of TPUs requested by the desired pods.
	// +optional
	DesiredTPU resource.Quantity `json:"desiredTPU,omitempty"`
	// LastUpdateTime is when the status was last computed.
	// +nullable
	LastUpdateTime *metav1.Time `json:"lastUpdateTime,omitempty"`
	// StateTransitionTimes records, for each state, when the cluster last entered it.
	// +optional
	StateTransitionTimes map[ClusterState]*metav1.Time `json:"stateTransitionTimes,omitempty"`
	// Endpoints maps each named head Service port to its node port or target port.
	// +optional
	Endpoints map[string]string `json:"endpoints,omitempty"`
	// Head describes the head pod and Service.
	// +optional
	Head HeadInfo `json:"head,omitempty"`
	// Reason explains State.
	// +optional
	Reason string `json:"reason,omitempty"`
	// Conditions are the detailed observations of the cluster, one per type.
	// +patchMergeKey=type
	// +patchStrategy=merge
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`
	// ReadyWorkerReplicas is the number of worker pods that are running and ready.
	// +optional
	ReadyWorkerReplicas int32 `json:"readyWorkerReplicas,omitempty"`
	// AvailableWorkerReplicas is the number of worker pods that are running.
	// +optional
	AvailableWorkerReplicas int32 `json:"availableWorkerReplicas,omitempty"`
	// DesiredWorkerReplicas is the sum over groups of the clamped replicas times numOfHosts.
	// +optional
	DesiredWorkerReplicas int32 `json:"desiredWorkerReplicas,omitempty"`
	// MinWorkerReplicas is the sum over groups of minReplicas times numOfHosts.
	// +optional
	MinWorkerReplicas int32 `json:"minWorkerReplicas,omitempty"`
	// MaxWorkerReplicas is the sum over groups of maxReplicas times numOfHosts, saturating at the int32 maximum.
	// +optional
	MaxWorkerReplicas int32 `json:"maxWorkerReplicas,omitempty"`
	// ObservedGeneration is the metadata.generation that this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// UpdateProgress reports, for each group (the head as "headgroup") whose pods do not all run the current
	// spec yet, how many do (a kray extension); an up-to-date group is not listed.
	// +listType=map
	// +listMapKey=groupName
	// +optional
	UpdateProgress []GroupUpdateProgress `json:"updateProgress,omitempty"`
}

// GroupUpdateProgress is how far one group's pods are from the current spec.
type GroupUpdateProgress struct {
	// GroupName is the worker group's name, or "headgroup" for the head.
	GroupName string `json:"groupName"`
	// Replicas is the number of the group's pods.
	Replicas int32 `json:"replicas"`
	// UpdatedReplicas is the number of the group's pods that run the current spec.
	UpdatedReplicas int32 `json:"updatedReplicas"`
	// UpdatedReadyReplicas is the number of the group's pods that run the current spec and are ready.
	UpdatedReadyReplicas int32 `json:"updatedReadyReplicas"`
	// TargetReplicas is the number of pods the group updates before it is done (replicas minus partition).
	TargetReplicas int32 `json:"targetReplicas"`
}

// RayClusterConditionType is the type of a RayCluster condition.
type RayClusterConditionType string

// Reasons of RayCluster conditions.
const (
	// AllPodRunningAndReadyFirstTime is the RayClusterProvisioned reason once every pod has been ready.
	AllPodRunningAndReadyFirstTime = "AllPodRunningAndReadyFirstTime"
	// RayClusterPodsProvisioning is the RayClusterProvisioned reason until every pod has been ready.
	RayClusterPodsProvisioning = "RayClusterPodsProvisioning"
	// HeadPodNotFound is the HeadPodReady reason when no head pod exists.
	HeadPodNotFound = "HeadPodNotFound"
	// HeadPodRunningAndReady is the HeadPodReady reason when the head pod is ready and reports no reason itself.
	HeadPodRunningAndReady = "HeadPodRunningAndReady"
	// UnknownReason is the reason when the cause is not known.
	UnknownReason = "Unknown"
)

// RayCluster condition types.
const (
	// RayClusterProvisioned is True once every pod has been running and ready; it stays True until a suspend.
	RayClusterProvisioned RayClusterConditionType = "RayClusterProvisioned"
	// HeadPodReady mirrors the Ready condition of the head pod.
	HeadPodReady RayClusterConditionType = "HeadPodReady"
	// RayClusterReplicaFailure is True while creating or deleting a pod fails.
	RayClusterReplicaFailure RayClusterConditionType = "ReplicaFailure"
	// RayClusterSuspending is True from Spec.Suspend becoming true until all pods are gone.
	RayClusterSuspending RayClusterConditionType = "RayClusterSuspending"
	// RayClusterSuspended is True while the cluster is suspended and has no pods; never True with RayClusterSuspending.
	RayClusterSuspended RayClusterConditionType = "RayClusterSuspended"
)

// HeadInfo describes the head pod and the head Service.
type HeadInfo struct {
	// PodIP is the IP of the head pod.
	// +optional
	PodIP string `json:"podIP,omitempty"`
	// ServiceIP is the cluster IP of the head Service, or the head pod IP when the Service is headless.
	// +optional
	ServiceIP string `json:"serviceIP,omitempty"`
	// PodName is the name of the head pod.
	// +optional
	PodName string `json:"podName,omitempty"`
	// ServiceName is the name of the head Service.
	// +optional
	ServiceName string `json:"serviceName,omitempty"`
}

// RayNodeType is the role of a Ray pod, the value of the ray.io/node-type label.
type RayNodeType string

// Values of RayNodeType.
const (
	// HeadNode is the head pod.
	HeadNode RayNodeType = "head"
	// WorkerNode is a worker pod.
	WorkerNode RayNodeType = "worker"
	// RedisCleanupNode is the pod of the Job that removes a deleted cluster's data from Redis.
	RedisCleanupNode RayNodeType = "redis-cleanup"
)

// EventReason is the reason of an event about a RayCluster.
type EventReason string

// Generic event reasons kept from KubeRay's API.
const (
	// RayConfigError reports an invalid Ray configuration.
	RayConfigError EventReason = "RayConfigError"
	// PodReconciliationError reports a failure to reconcile pods.
	PodReconciliationError EventReason = "PodReconciliationError"
)

// RayCluster is a Ray cluster: one head pod and groups of worker pods.
// +kubebuilder:object:root=true
// +kubebuilder:resource:categories=all
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:printcolumn:name="desired workers",type=integer,JSONPath=".status.desiredWorkerReplicas",priority=0
// +kubebuilder:printcolumn:name="available workers",type=integer,JSONPath=".status.availableWorkerReplicas",priority=0
// +kubebuilder:printcolumn:name="cpus",type=string,JSONPath=".status.desiredCPU",priority=0
// +kubebuilder:printcolumn:name="memory",type=string,JSONPath=".status.desiredMemory",priority=0
// +kubebuilder:printcolumn:name="gpus",type=string,JSONPath=".status.desiredGPU",priority=0
// +kubebuilder:printcolumn:name="tpus",type=string,JSONPath=".status.desiredTPU",priority=1
// +kubebuilder:printcolumn:name="status",type=string,JSONPath=".status.state",priority=0
// +kubebuilder:printcolumn:name="age",type=date,JSONPath=".metadata.creationTimestamp",priority=0
// +kubebuilder:printcolumn:name="head pod IP",type=string,JSONPath=".status.head.podIP",priority=1
// +kubebuilder:printcolumn:name="head service IP",type=string,JSONPath=".status.head.serviceIP",priority=1
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 53",message="metadata.name must be no more than 53 characters"
// +kubebuilder:validation:XValidation:rule="self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name must be a valid DNS-1035 label: lowercase letters, digits and '-', starting with a letter and ending with a letter or digit"
type RayCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired state of the cluster.
	Spec RayClusterSpec `json:"spec,omitempty"`
	// Status is the observed state of the cluster.
	// +optional
	Status RayClusterStatus `json:"status,omitempty"`
}

// RayClusterList is a list of RayClusters.
// +kubebuilder:object:root=true
type RayClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the RayClusters.
	Items []RayCluster `json:"items"`
}

func init() {
	SchemeBuilder.Register(&RayCluster{}, &RayClusterList{})
}
