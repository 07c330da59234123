package v1

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// RayClusterUpgradeType selects how pod spec changes reach running pods.
// RollingUpdate is a kray extension that KubeRay does not accept.
// +kubebuilder:validation:Enum=Recreate;None;RollingUpdate
type RayClusterUpgradeType string

// Values of RayClusterUpgradeType.
const (
	// RayClusterRecreate deletes every pod when the pod spec changes; the pods are then recreated from the new spec.
	RayClusterRecreate RayClusterUpgradeType = "Recreate"
	// RayClusterUpgradeNone leaves running pods untouched; only pods created later use the new spec.
	RayClusterUpgradeNone RayClusterUpgradeType = "None"
	// RayClusterRollingUpdate replaces pods gradually when the pod spec changes (kray only).
	RayClusterRollingUpdate RayClusterUpgradeType = "RollingUpdate"
)

// RayClusterUpgradeStrategy selects what happens to running pods when the pod spec changes.
type RayClusterUpgradeStrategy struct {
	// Type is the upgrade strategy; unset means None.
	// +optional
	Type *RayClusterUpgradeType `json:"type,omitempty"`
}

// AuthMode is the Ray authentication mode.
type AuthMode string

// Values of AuthMode.
const (
	// AuthModeDisabled turns authentication off.
	AuthModeDisabled AuthMode = "disabled"
	// AuthModeToken requires a shared token on every Ray request.
	AuthModeToken AuthMode = "token"
)

// AuthOptions configures Ray authentication.
type AuthOptions struct {
	// EnableK8sTokenAuth, when true, makes Ray delegate token checks to the Kubernetes API server.
	// +optional
	EnableK8sTokenAuth *bool `json:"enableK8sTokenAuth,omitempty"`
	// SecretName names an existing Secret whose `auth_token` key holds the token; unset means one is generated.
	// +optional
	SecretName *string `json:"secretName,omitempty"`
	// Mode is the authentication mode; unset means token.
	// +kubebuilder:validation:Enum=disabled;token
	// +optional
	Mode AuthMode `json:"mode,omitempty"`
}

// UpscalingMode is how fast the Ray autoscaler adds workers.
// +kubebuilder:validation:Enum=Default;Aggressive;Conservative
type UpscalingMode string

// AutoscalerVersion is the major version of the Ray autoscaler.
// +kubebuilder:validation:Enum=v1;v2
type AutoscalerVersion string

// Values of AutoscalerVersion.
const (
	// AutoscalerVersionV1 selects the Ray autoscaler v1.
	AutoscalerVersionV1 AutoscalerVersion = "v1"
	// AutoscalerVersionV2 selects the Ray autoscaler v2.
	AutoscalerVersionV2 AutoscalerVersion = "v2"
)

// AutoscalerOptions configures the autoscaler sidecar; some fields are read only by the Ray autoscaler.
type AutoscalerOptions struct {
	// Resources of the autoscaler container; unset means 500m CPU and 512Mi memory, requests equal to limits.
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`
	// Image of the autoscaler container; unset means the image of the head's Ray container.
	// +optional
	Image *string `json:"image,omitempty"`
	// ImagePullPolicy of the autoscaler container; unset means IfNotPresent.
	// +optional
	ImagePullPolicy *corev1.PullPolicy `json:"imagePullPolicy,omitempty"`
	// SecurityContext of the autoscaler container.
	// +optional
	SecurityContext *corev1.SecurityContext `json:"securityContext,omitempty"`
	// IdleTimeoutSeconds is how long the autoscaler keeps an idle worker; the Ray autoscaler defaults it to 60.
	// +optional
	IdleTimeoutSeconds *int32 `json:"idleTimeoutSeconds,omitempty"`
	// UpscalingMode is read by the Ray autoscaler; Conservative limits pending workers, the others do not.
	// +optional
	UpscalingMode *UpscalingMode `json:"upscalingMode,omitempty"`
	// Version selects the autoscaler version; unset lets Ray choose (v2 from Ray 2.47).
	// +optional
	Version *AutoscalerVersion `json:"version,omitempty"`
	// Env is appended to the autoscaler container's environment.
	// +optional
	Env []corev1.EnvVar `json:"env,omitempty"`
	// EnvFrom is appended to the autoscaler container's environment sources.
	// +optional
	EnvFrom []corev1.EnvFromSource `json:"envFrom,omitempty"`
	// VolumeMounts are appended to the autoscaler container's volume mounts.
	// +optional
	VolumeMounts []corev1.VolumeMount `json:"volumeMounts,omitempty"`
	// Command replaces the autoscaler container's default command.
	// +optional
	Command []string `json:"command,omitempty"`
	// Args replace the autoscaler container's default arguments.
	// +optional
	Args []string `json:"args,omitempty"`
}

// GcsFaultToleranceBackend is where GCS fault tolerance persists its metadata.
// +kubebuilder:validation:Enum=redis;rocksdb
type GcsFaultToleranceBackend string

// Values of GcsFaultToleranceBackend.
const (
	// GcsFTBackendRedis stores GCS metadata in an external Redis.
	GcsFTBackendRedis GcsFaultToleranceBackend = "redis"
	// GcsFTBackendRocksDB stores GCS metadata in RocksDB on a volume of the head pod.
	GcsFTBackendRocksDB GcsFaultToleranceBackend = "rocksdb"
)

// GcsFaultToleranceOptions configures GCS fault tolerance.
// An unset backend means redis; the rule here stops a switch between unset and rocksdb, which the rule on
// the field (evaluated only when both the old and the new object set it) cannot see.
// +kubebuilder:validation:XValidation:rule="(has(self.backend) && has(oldSelf.backend)) || (has(self.backend) ? self.backend : 'redis') == (has(oldSelf.backend) ? oldSelf.backend : 'redis')",message="gcsFaultToleranceOptions.backend is immutable",fieldPath=".backend"
type GcsFaultToleranceOptions struct {
	// Backend is the persistence backend; unset means redis. It is immutable.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="gcsFaultToleranceOptions.backend is immutable"
	// +optional
	Backend GcsFaultToleranceBackend `json:"backend,omitempty"`
	// RedisUsername is the Redis user (redis backend).
	// +optional
	RedisUsername *RedisCredential `json:"redisUsername,omitempty"`
	// RedisPassword is the Redis password (redis backend).
	// +optional
	RedisPassword *RedisCredential `json:"redisPassword,omitempty"`
	// ExternalStorageNamespace isolates this cluster's data in Redis; unset means the RayCluster UID.
	// +optional
	ExternalStorageNamespace string `json:"externalStorageNamespace,omitempty"`
	// RedisAddress is the host:port of the Redis server (redis backend).
	// +optional
	RedisAddress string `json:"redisAddress,omitempty"`
	// Storage is the volume holding the RocksDB store (rocksdb backend).
	// +optional
	Storage *GcsEmbeddedStorage `json:"storage,omitempty"`
}

// RedisCredential is a literal value or a reference to where the value is stored.
type RedisCredential struct {
	// ValueFrom references the value, as in a container environment variable.
	// +optional
	ValueFrom *corev1.EnvVarSource `json:"valueFrom,omitempty"`
	// Value is the literal value.
	// +optional
	Value string `json:"value,omitempty"`
}

// GcsEmbeddedStorage is the PersistentVolumeClaim backing the embedded RocksDB store.
type GcsEmbeddedStorage struct {
	// ClaimName names an existing user-owned PVC; when set, the fields for an operator-managed PVC are ignored.
	// +optional
	ClaimName string `json:"claimName,omitempty"`
	// Size of the operator-managed PVC; unset means 1Gi.
	// +optional
	Size *resource.Quantity `json:"size,omitempty"`
	// StorageClassName of the operator-managed PVC; unset means the cluster default.
	// +optional
	StorageClassName *string `json:"storageClassName,omitempty"`
	// AccessModes of the operator-managed PVC; unset means [ReadWriteOnce].
	// +optional
	AccessModes []corev1.PersistentVolumeAccessMode `json:"accessModes,omitempty"`
	// SubPath mounts this subdirectory of the volume instead of its root.
	// +optional
	SubPath string `json:"subPath,omitempty"`
	// DeletionPolicy says whether the operator-managed PVC is deleted with the cluster; unset means DeleteWithCluster.
	// +optional
	DeletionPolicy *GCSStorageDeletionPolicy `json:"deletionPolicy,omitempty"`
}

// GCSStorageDeletionPolicy says what happens to the operator-managed GCS PVC when the RayCluster is deleted.
// +kubebuilder:validation:Enum=DeleteWithCluster;Retain
type GCSStorageDeletionPolicy string

// Values of GCSStorageDeletionPolicy.
const (
	// DeleteWithClusterGCSStorageDeletionPolicy deletes the PVC with the cluster (it is owned by the cluster).
	DeleteWithClusterGCSStorageDeletionPolicy GCSStorageDeletionPolicy = "DeleteWithCluster"
	// RetainGCSStorageDeletionPolicy keeps the PVC after the cluster is deleted.
	RetainGCSStorageDeletionPolicy GCSStorageDeletionPolicy = "Retain"
)

// IngressPathType is how an Ingress path is matched.
// +kubebuilder:validation:Enum=Exact;Prefix;ImplementationSpecific
type IngressPathType string

// Values of IngressPathType.
const (
	// IngressPathTypeExact matches the path exactly.
	IngressPathTypeExact IngressPathType = "Exact"
	// IngressPathTypePrefix matches path prefixes element by element.
	IngressPathTypePrefix IngressPathType = "Prefix"
	// IngressPathTypeImplementationSpecific leaves matching to the Ingress controller.
	IngressPathTypeImplementationSpecific IngressPathType = "ImplementationSpecific"
)

// IngressOptions configures the Ingress of the head Service.
type IngressOptions struct {
	// Host is the host the Ingress rule matches; unset matches any host.
	// +optional
	Host *string `json:"host,omitempty"`
	// Path routed to the Ray dashboard; unset means "/".
	// +optional
	Path *string `json:"path,omitempty"`
	// PathType is how Path is matched; unset means Prefix.
	// +optional
	PathType *IngressPathType `json:"pathType,omitempty"`
	// TLS configures TLS termination on the Ingress.
	// +optional
	TLS []networkingv1.IngressTLS `json:"tls,omitempty"`
}

// HistoryServerOptions configures the Ray history server integration.
type HistoryServerOptions struct {
	// CollectorOptions configures the collector sidecar.
	// +optional
	CollectorOptions *CollectorOptions `json:"collectorOptions,omitempty"`
}

// CollectorOptions configures the history server collector sidecar.
type CollectorOptions struct {
	// Image of the collector container.
	// +optional
	Image *string `json:"image,omitempty"`
	// ImagePullPolicy of the collector container.
	// +optional
	ImagePullPolicy *corev1.PullPolicy `json:"imagePullPolicy,omitempty"`
	// Resources of the collector container.
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`
	// Env is added to the collector container's environment.
	// +optional
	Env []corev1.EnvVar `json:"env,omitempty"`
}

// TLSOptions configures mutual TLS between Ray pods.
type TLSOptions struct {
	// Enabled, when true, provisions certificates with cert-manager and turns on mTLS; unset means false.
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
}

// NetworkPolicyMode is which traffic the generated NetworkPolicies deny by default.
// +kubebuilder:validation:Enum=DenyAll;DenyAllIngress;DenyAllEgress
type NetworkPolicyMode string

// Values of NetworkPolicyMode.
const (
	// NetworkPolicyDenyAll denies ingress and egress.
	NetworkPolicyDenyAll NetworkPolicyMode = "DenyAll"
	// NetworkPolicyDenyAllIngress denies ingress.
	NetworkPolicyDenyAllIngress NetworkPolicyMode = "DenyAllIngress"
	// NetworkPolicyDenyAllEgress denies egress.
	NetworkPolicyDenyAllEgress NetworkPolicyMode = "DenyAllEgress"
)

// NetworkPolicyConfig isolates the cluster's pods; traffic between its own pods is always allowed, DNS is not.
type NetworkPolicyConfig struct {
	// Mode is the traffic denied by default.
	// +kubebuilder:default=DenyAll
	// +optional
	Mode *NetworkPolicyMode `json:"mode,omitempty"`
	// Head rules are appended to the head pod's policy.
	// +optional
	Head *NetworkPolicyRules `json:"head,omitempty"`
	// Worker rules are appended to the policy of every worker group without its own entry in WorkerGroups.
	// +optional
	Worker *NetworkPolicyRules `json:"worker,omitempty"`
	// WorkerGroups rules replace Worker for the named groups.
	// +listType=map
	// +listMapKey=groupName
	// +optional
	WorkerGroups []WorkerGroupNetworkPolicyRules `json:"workerGroups,omitempty"`
}

// WorkerGroupNetworkPolicyRules are NetworkPolicyRules for one worker group.
type WorkerGroupNetworkPolicyRules struct {
	// GroupName is the WorkerGroupSpec.GroupName the rules apply to.
	// +kubebuilder:validation:Required
	GroupName string `json:"groupName"`

	NetworkPolicyRules `json:",inline"`
}

// NetworkPolicyRules are extra rules appended to a generated NetworkPolicy.
type NetworkPolicyRules struct {
	// IngressRules are allowed in addition to the base policy when ingress is denied.
	// +optional
	IngressRules []networkingv1.NetworkPolicyIngressRule `json:"ingressRules,omitempty"`
	// EgressRules are allowed in addition to the base policy when egress is denied; add DNS here.
	// +optional
	EgressRules []networkingv1.NetworkPolicyEgressRule `json:"egressRules,omitempty"`
}
