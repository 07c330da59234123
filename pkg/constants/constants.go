// Package constants names the keys that more than one part of kray reads or writes: labels, annotations,
// finalizers, condition types and reasons, and the Ray defaults the builders and validation share. Event
// reasons live beside the controller that records them (internal/controller/...; shared ones in
// internal/controller/shared).
//
// Keys shared with KubeRay keep KubeRay's spelling, because the Ray autoscaler and Ray's tooling read them.
package constants

// Pod and object labels. The first group is KubeRay's contract with the Ray autoscaler and Ray tooling.
const (
	// LabelCluster carries the RayCluster name on every object and pod kray manages.
	LabelCluster = "ray.io/cluster"
	// LabelNodeType is "head" or "worker".
	LabelNodeType = "ray.io/node-type"
	// LabelGroup is the worker group name, or HeadGroupName on the head.
	LabelGroup = "ray.io/group"
	// LabelIdentifier is "<cluster>-head" or "<cluster>-worker".
	LabelIdentifier = "ray.io/identifier"
	// LabelIsRayNode is "yes" on every Ray pod.
	LabelIsRayNode = "ray.io/is-ray-node"
	// LabelAppName is the Kubernetes recommended app name label ("kuberay" unless the head template overrides it).
	LabelAppName = "app.kubernetes.io/name"
	// LabelCreatedBy is the Kubernetes recommended creator label.
	LabelCreatedBy = "app.kubernetes.io/created-by"
	// LabelComponent is the Kubernetes recommended component label; kray sets it on the cert-manager objects
	// of a tlsOptions cluster (KubeRay's values).
	LabelComponent = "app.kubernetes.io/component"
	// LabelReplicaIndex numbers a group's replicas 0..n-1, the smallest unused index first (KubeRay's
	// RayMultiHostIndexing); all hosts of a multi-host replica share it.
	LabelReplicaIndex = "ray.io/worker-group-replica-index"
	// LabelReplicaName names a multi-host replica; all its hosts share it.
	LabelReplicaName = "ray.io/worker-group-replica-name"
	// LabelHostIndex numbers the hosts of a multi-host replica 0..numOfHosts-1.
	LabelHostIndex = "ray.io/replica-host-index"
	// LabelHeadlessWorkerService marks the headless Service of multi-host workers.
	LabelHeadlessWorkerService = "ray.io/headless-worker-svc"
	// LabelOriginatedFromCRD says which KubeRay CRD a cluster came from (RayCluster, RayJob, RayService).
	LabelOriginatedFromCRD = "ray.io/originated-from-crd"
)

// Label values.
const (
	NodeTypeHead   = "head"
	NodeTypeWorker = "worker"
	// HeadGroupName is the ray.io/group value of the head pod.
	HeadGroupName = "headgroup"
	// AppNameDefault is the default app.kubernetes.io/name value, kept from KubeRay so selectors and dashboards match.
	AppNameDefault = "kuberay"
	// CreatedByValue is the app.kubernetes.io/created-by value; KubeRay's, so tools that filter on it keep working.
	CreatedByValue = "kuberay-operator"
	IsRayNodeValue = "yes"
)

// Annotations read from the RayCluster or written on pods.
const (
	// AnnotationWorkerDrain, AnnotationRollingUpdate and AnnotationUpgradeStrategy keep kray's extension
	// settings (spec.workerDrain, each group's rollingUpdate as a JSON object keyed by group name, and
	// spec.upgradeStrategy) where clients that hold KubeRay's types do not drop them; see
	// pkg/spec/extensions.go.
	AnnotationWorkerDrain     = "kray.io/worker-drain"
	AnnotationRollingUpdate   = "kray.io/rolling-update"
	AnnotationUpgradeStrategy = "kray.io/upgrade-strategy"
	// AnnotationOverwriteContainerCmd "true" leaves the Ray container command as the user wrote it.
	AnnotationOverwriteContainerCmd = "ray.io/overwrite-container-cmd"
	// AnnotationFTEnabled is the legacy GCS fault tolerance switch; kray writes "true" or "false" on head pods.
	AnnotationFTEnabled = "ray.io/ft-enabled"
	// AnnotationRecreateHash on the head pod (and, under upgradeStrategy Recreate, every pod) is the hash of
	// the spec the pod was built from, as KubeRay writes it.
	AnnotationRecreateHash = "ray.io/upgrade-strategy-recreate-hash"
	// AnnotationExternalStorageNS is the legacy Redis key namespace of a cluster; kray writes it on the head pod.
	AnnotationExternalStorageNS = "ray.io/external-storage-namespace"
	// AnnotationGCSFTDeletionTimeout is how many seconds the Redis cleanup may hold a deleted cluster (default 300).
	AnnotationGCSFTDeletionTimeout = "ray.io/gcs-ft-deletion-timeout"
	// AnnotationEnableServeService "true" creates the serve Service.
	AnnotationEnableServeService = "ray.io/enable-serve-service"
	// AnnotationIngressClass on the RayCluster becomes the Ingress class; every other annotation is copied.
	AnnotationIngressClass = "kubernetes.io/ingress.class"
	// AnnotationSpecHash on a workload holds the hash of the spec kray last wrote, so unchanged specs are not rewritten.
	AnnotationSpecHash = "kray.io/spec-hash"
	// AnnotationBatchScheduler on a workload is how its pods are scheduled (batchscheduler.Scheduling), fixed
	// when the cluster's first workloads were created.
	AnnotationBatchScheduler = "kray.io/batch-scheduler"
	// AnnotationSpecGeneration on a workload is the generation of the write that set its kray.io/spec-hash
	// (absent: the one it was created with), so a replicas change is not taken for a new template.
	AnnotationSpecGeneration = "kray.io/spec-generation"
	// AnnotationRestartPolicy records the restartPolicy the user asked for when kray had to render Always for Kruise.
	AnnotationRestartPolicy = "kray.io/requested-restart-policy"
	// AnnotationDrainStarted on a worker pod is when kray first asked Ray to drain its node (RFC 3339); the
	// drain timeout counts from it, across operator restarts.
	AnnotationDrainStarted = "kray.io/drain-started"
	// AnnotationDrainHold on a worker pod names the hold of Kruise that its drain start belongs to (the
	// pod's lifecycle state and the time Kruise entered it): a start recorded for an earlier hold is stale.
	AnnotationDrainHold = "kray.io/drain-hold"
	// AnnotationDrainNode on a worker pod is the ID (hex) of the Ray node kray asked to drain: the drain is
	// over when that node is drained or gone, whatever node registers from the pod after it.
	AnnotationDrainNode = "kray.io/drain-node"
	// AnnotationHeadDisruptionBudget "true" on a RayCluster asks for a PodDisruptionBudget that keeps its
	// ready head from being evicted; any other value makes the spec invalid.
	AnnotationHeadDisruptionBudget = "kray.io/head-disruption-budget"
	// AnnotationImagePrepull "true" on a RayCluster asks for Kruise ImagePullJobs that keep its Ray images
	// pulled on the nodes its groups can run on; "false" turns off the pull of a RollingUpdate's new image
	// before its pods are updated; any other value makes the spec invalid.
	AnnotationImagePrepull = "kray.io/image-prepull"
	// AnnotationWorkerHealing "false" on a RayCluster leaves workers that lost their Ray node to Ray's own
	// timing (the raylet exits after gcs_rpc_server_reconnect_timeout_s); "true" or absent restarts them as soon
	// as the cluster's GCS shows them lost. Any other value makes the spec invalid.
	AnnotationWorkerHealing = "kray.io/worker-healing"
	// AnnotationIPPR on a RayCluster is the JSON in which Ray's autoscaler v2 reads, per group, how far it may
	// resize pods in place (max-cpu, max-memory, resize-timeout); kray only checks it.
	AnnotationIPPR = "ray.io/ippr"
	// AnnotationIPPRStatus on a pod is what Ray's autoscaler records of its in-place resizes; kray never writes it.
	AnnotationIPPRStatus = "ray.io/ippr-status"
	// AnnotationRestartReason and AnnotationRestartedRun on a ContainerRecreateRequest kray made say why it
	// restarts the worker's Ray container and which run (container ID) it restarts.
	AnnotationRestartReason = "kray.io/restart-reason"
	AnnotationRestartedRun  = "kray.io/restarted-run"
	// AnnotationMultusNetworkStatus on a pod is the Multus CNI's report of its networks and their IPs; kray
	// reads it to know a Ray node registered at the IP of a secondary network.
	AnnotationMultusNetworkStatus = "k8s.v1.cni.cncf.io/network-status"
)

// FinalizerRedisCleanup holds a Redis GCS fault tolerant cluster until its Redis data is deleted.
const FinalizerRedisCleanup = "ray.io/gcs-ft-redis-cleanup-finalizer"

// Drain hook: a worker pod carrying LabelDrainHook=DrainHookValue is held in Kruise's PreparingDelete state
// until kray removes the label, after its Ray node drained or the drain timed out.
const (
	LabelDrainHook = "kray.io/drain-hook"
	DrainHookValue = "true"
	// DefaultDrainTimeoutSeconds is workerDrain.timeoutSeconds when unset.
	DefaultDrainTimeoutSeconds = 600
	// MaxDrainTimeoutSeconds is the largest workerDrain.timeoutSeconds (the CRD's bound, checked again for the
	// annotation copy).
	MaxDrainTimeoutSeconds = 86400
)

// Kruise's pod lifecycle contract (kruise-api apps/pub), read by kray.
const (
	LabelKruiseLifecycleState = "lifecycle.apps.kruise.io/state"
	// AnnotationKruiseLifecycleTimestamp is when Kruise set the pod's lifecycle state (RFC 3339).
	AnnotationKruiseLifecycleTimestamp = "lifecycle.apps.kruise.io/timestamp"
	KruiseStatePreparingNormal         = "PreparingNormal"
	KruiseStatePreparingDelete         = "PreparingDelete"
	KruiseStatePreparingUpdate         = "PreparingUpdate"
	KruiseStateUpdated                 = "Updated"
	KruiseStateNormal                  = "Normal"
	ReadinessGateInPlaceUpdate         = "InPlaceUpdateReady"
)

// Ray start parameters and ports kray defaults.
const (
	DefaultDashboardPort = 8265
	DefaultServePort     = 8000
	DefaultClusterDomain = "cluster.local"
	RayContainerIndex    = 0
)

// Condition types kray adds beside KubeRay's (which live in api/v1).
const (
	// ConditionSpecValid is False while the spec fails validation that the CRD cannot express.
	ConditionSpecValid = "RayClusterSpecValid"
	// ConditionWorkloadsSynced is False while kray cannot write its Kruise workloads (for example, Kruise's webhooks are down).
	ConditionWorkloadsSynced = "WorkloadsSynced"
	// ConditionPodsUpToDate is True when every pod that the upgrade strategy updates runs the current spec.
	ConditionPodsUpToDate = "PodsUpToDate"
	// ConditionPodsScheduled, on a cluster whose pods go to a batch scheduler, is False while some of them wait
	// for it (a gang without room, a queue that does not exist) with what the scheduler said, True once all
	// are bound.
	ConditionPodsScheduled = "PodsScheduled"
	// ConditionRayGCSPaused is True while kray does not call the cluster's GCS, which failed to answer in a
	// row (its worker drains then wait for their timeout); absent otherwise.
	ConditionRayGCSPaused = "RayGCSCallsPaused"
	// ConditionWorkersRestarting is True while kray restarts worker pods that lost their Ray node (their
	// cluster's GCS does not list them); absent otherwise.
	ConditionWorkersRestarting = "RayWorkersRestarting"
	// ConditionWorkersNotJoining is True while worker pods that kray restarted did not join their cluster's GCS
	// again, and their next restart waits for a back-off; absent otherwise.
	ConditionWorkersNotJoining = "RayWorkersNotJoining"
)

// Condition reasons.
const (
	// ReasonAllPodsScheduled and ReasonWaitingForScheduler are the PodsScheduled condition's reasons.
	ReasonAllPodsScheduled               = "AllPodsScheduled"
	ReasonWaitingForScheduler            = "WaitingForScheduler"
	ReasonHeadPodNotFound                = "HeadPodNotFound"
	ReasonHeadPodRunningAndReady         = "HeadPodRunningAndReady"
	ReasonUnknown                        = "Unknown"
	ReasonAllPodRunningAndReadyFirstTime = "AllPodRunningAndReadyFirstTime"
	ReasonPodsProvisioning               = "RayClusterPodsProvisioning"
	ReasonFailedCreateHeadPod            = "FailedCreateHeadPod"
	ReasonFailedCreateWorkerPod          = "FailedCreateWorkerPod"
	ReasonValid                          = "Valid"
	ReasonInvalidSpec                    = "InvalidRayClusterSpec"
	ReasonInvalidMetadata                = "InvalidRayClusterMetadata"
	ReasonRejectedByAdmission            = "RejectedByAdmission"
	ReasonSynced                         = "Synced"
	ReasonWorkloadWriteFailed            = "WorkloadWriteFailed"
	ReasonUpToDate                       = "UpToDate"
	ReasonRollingUpdate                  = "RollingUpdateInProgress"
	ReasonRecreating                     = "RecreateInProgress"
	ReasonUpgradeStrategyNone            = "UpgradeStrategyNone"
	ReasonGCSNotAnswering                = "GCSNotAnswering"
	ReasonRayNodeLost                    = "RayNodeLost"
	ReasonRestartedWorkersNotJoining     = "RestartedWorkersNotJoining"
)

// ControllerName is the field manager and event reporter of kray's reconciler.
const ControllerName = "kray-operator"

// RayJobControllerName is the event reporter of kray's RayJob controller.
const RayJobControllerName = "kray-rayjob"

// Ray settings that validation and the builders share.
const (
	// EnvAutoscalerV2 selects the Ray autoscaler version when set on the head's Ray container.
	EnvAutoscalerV2 = "RAY_enable_autoscaler_v2"
	// GCSStorageVolume and GCSStorageMountPath are the embedded GCS store's volume and mount on the head.
	GCSStorageVolume    = "gcs-storage"
	GCSStorageMountPath = "/data/gcs"
)

// RayService annotations and values, as KubeRay's RayService controller reads and writes them.
const (
	// AnnotationInitializingTimeout on a RayService bounds how long it may stay Initializing with no serve
	// endpoint (a Go duration or a number of seconds) before it fails for good.
	AnnotationInitializingTimeout = "ray.io/initializing-timeout"
	// OriginatedFromRayService is the ray.io/originated-from-crd value of objects created for a RayService.
	OriginatedFromRayService = "RayService"
	// AnnotationClusterHash on a RayService's cluster is the hash of the rayClusterConfig it was built from,
	// replica fields left out; AnnotationNumWorkerGroups the number of its worker groups then, so that
	// appended groups are told from other changes; AnnotationKubeRayVersion how the hash was computed.
	AnnotationClusterHash     = "ray.io/hash-without-replicas-and-workers-to-delete"
	AnnotationNumWorkerGroups = "ray.io/num-worker-groups"
	AnnotationKubeRayVersion  = "ray.io/kuberay-version"
	// AnnotationDeletionDeadline on a cluster a RayService no longer serves from is when it is deleted
	// (RFC 3339), kept on the cluster so that an operator restart does not reset it.
	AnnotationDeletionDeadline = "kray.io/deletion-deadline"
	// AnnotationSwitchDeadline on a RayService's pending cluster is when it takes the traffic with the ready
	// serve endpoints it has, even if a pod Serve runs a proxy on is not one yet (RFC 3339): set when its
	// applications first run short of endpoints, and kept on the cluster so that an operator restart does not
	// reset it.
	AnnotationSwitchDeadline = "kray.io/switch-deadline"
	// AnnotationServeApplied on a RayService's cluster is what its Serve last accepted from kray (JSON: the
	// serveConfigV2's hash, the config itself when it fits, and the target_capacity), kept on the cluster so
	// that a restarted or second operator never puts another config on it by mistake.
	AnnotationServeApplied = "kray.io/serve-applied"
	// AnnotationInPlaceWorkerUpgrade "true" on a RayService has a change of its worker groups alone (images,
	// env, resources; the head and the cluster-level fields as they were) rolled through the serving cluster
	// in place, group by group, instead of preparing a new cluster; any other value makes the spec invalid.
	AnnotationInPlaceWorkerUpgrade = "kray.io/in-place-worker-upgrade"
	// AnnotationSubmitterResources on a K8sJobMode RayJob's cluster under Volcano is the submitter pod's
	// resources (JSON), which the cluster's PodGroup reserves beside the cluster's own.
	AnnotationSubmitterResources = "kray.io/submitter-resources"
	// AnnotationHeadHash on a cluster built for such a RayService is the hash of its rayClusterConfig without
	// the worker groups: equal, a change touched only worker groups.
	AnnotationHeadHash = "kray.io/head-hash"
	// LabelServe on a pod of a RayService's cluster says whether the serve Service sends it traffic: "true"
	// on workers (their readiness probe checks the Serve proxy), on the head as its proxy's health check says.
	LabelServe = "ray.io/serve"
	// ServePortName is the Ray container port of the Serve proxy; DefaultServePort when the container has
	// none.
	ServePortName = "serve"
)

// RayJob labels, values, finalizer and submitter names, as KubeRay's RayJob controller writes them.
const (
	// LabelOriginatedFromCRName names the RayJob a RayCluster or submitter Job was created for.
	LabelOriginatedFromCRName = "ray.io/originated-from-cr-name"
	// OriginatedFromRayJob is the ray.io/originated-from-crd value of objects created for a RayJob.
	OriginatedFromRayJob = "RayJob"
	// LabelJobSubmissionMode is the submissionMode of the RayJob a RayCluster was created for.
	LabelJobSubmissionMode = "ray.io/job-submission-mode"
	// FinalizerRayJob holds a deleted RayJob until its Ray job was asked to stop.
	FinalizerRayJob = "ray.io/rayjob-finalizer"
	// FinalizerRayService is KubeRay v1.7's: it holds a deleted RayService until its RayClusters are gone.
	// kray does not add it; it releases a RayService that carries it (one made by KubeRay v1.7).
	FinalizerRayService = "ray.io/rayservice-finalizer"
)

// RayServiceControllerName is the RayService controller's name in events and metrics.
const RayServiceControllerName = "kray-rayservice"

// EnvEnableZeroDowntime is KubeRay's operator setting that, when "false", makes a RayService without an
// upgradeStrategy never prepare a new cluster (as upgradeStrategy None).
const EnvEnableZeroDowntime = "ENABLE_ZERO_DOWNTIME"

// RayCronJob's label and annotation on the RayJobs it starts, and its controller's name, as KubeRay's.
const (
	// LabelCronJobName names the RayCronJob that started a RayJob.
	LabelCronJobName = "ray.io/cronjob-name"
	// AnnotationCronJobScheduledTimestamp is the schedule time a RayJob was started for, RFC 3339 in UTC.
	AnnotationCronJobScheduledTimestamp = "ray.io/cronjob-scheduled-timestamp"
	// RayCronJobControllerName is the RayCronJob controller's name in events.
	RayCronJobControllerName = "kray-raycronjob"
)
