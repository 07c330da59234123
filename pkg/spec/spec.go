// Package spec holds the rules that read a RayCluster's spec: what is suspended, how many pods a group wants,
// which upgrade strategy, autoscaler, fault tolerance and auth apply. Builders, status, validation, scaling
// and the controller all decide from these functions, so each rule has one home.
package spec

import (
	"math"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/constants"
)

// ClusterSuspended reports whether spec.suspend is true.
func ClusterSuspended(rc *rayv1.RayCluster) bool {
	return rc.Spec.Suspend != nil && *rc.Spec.Suspend
}

// GroupSuspended reports whether the group is suspended on its own or through the cluster.
func GroupSuspended(rc *rayv1.RayCluster, group *rayv1.WorkerGroupSpec) bool {
	return ClusterSuspended(rc) || (group.Suspend != nil && *group.Suspend)
}

// NumOfHosts is the group's pods per replica; 0 (from old CRDs) counts as 1.
func NumOfHosts(group *rayv1.WorkerGroupSpec) int32 {
	if group.NumOfHosts <= 0 {
		return 1
	}
	return group.NumOfHosts
}

// ClampedReplicas is the group's replicas (min when unset) clamped to [min, max], before numOfHosts.
func ClampedReplicas(group *rayv1.WorkerGroupSpec) int32 {
	lo := ptr.Deref(group.MinReplicas, 0)
	hi := ptr.Deref(group.MaxReplicas, math.MaxInt32)
	n := ptr.Deref(group.Replicas, lo)
	if n < lo {
		n = lo
	}
	if n > hi {
		n = hi
	}
	return n
}

// GroupReplicas is the group's desired pod count: clamp(replicas, min, max) × numOfHosts, 0 when suspended.
// It saturates at MaxInt32 instead of overflowing.
func GroupReplicas(rc *rayv1.RayCluster, group *rayv1.WorkerGroupSpec) int32 {
	if GroupSuspended(rc, group) {
		return 0
	}
	return saturate(int64(ClampedReplicas(group)) * int64(NumOfHosts(group)))
}

func saturate(n int64) int32 {
	if n > math.MaxInt32 {
		return math.MaxInt32
	}
	return int32(n)
}

// upgradeType is spec.upgradeStrategy.type, None when unset.
func upgradeType(rc *rayv1.RayCluster) rayv1.RayClusterUpgradeType {
	if u := rc.Spec.UpgradeStrategy; u != nil && u.Type != nil {
		return *u.Type
	}
	return rayv1.RayClusterUpgradeNone
}

// RecreateOnChange reports whether upgradeStrategy is Recreate: a change to the pods' spec (templates, ray
// start parameters) recreates every pod from the new spec, through the workloads' ReCreate update strategy
// instead of KubeRay's delete-all.
func RecreateOnChange(rc *rayv1.RayCluster) bool {
	return upgradeType(rc) == rayv1.RayClusterRecreate
}

// Rolling reports whether upgradeStrategy is RollingUpdate (kray's extension): the head first, then each
// worker group in spec order, updated in place where possible.
func Rolling(rc *rayv1.RayCluster) bool {
	return upgradeType(rc) == rayv1.RayClusterRollingUpdate
}

// UpdatesPods reports whether spec changes reach running pods at all (every strategy but None).
func UpdatesPods(rc *rayv1.RayCluster) bool {
	return upgradeType(rc) != rayv1.RayClusterUpgradeNone
}

// OriginatedFrom is the kind of KubeRay object rc was created for (its ray.io/originated-from-crd label):
// RayCluster when it has none.
func OriginatedFrom(rc *rayv1.RayCluster) string {
	if v := rc.Labels[constants.LabelOriginatedFromCRD]; v == constants.OriginatedFromRayJob || v == constants.OriginatedFromRayService {
		return v
	}
	return "RayCluster"
}

// ServedByRayService reports whether rc is a cluster of a RayService, whose pods carry the ray.io/serve label.
func ServedByRayService(rc *rayv1.RayCluster) bool {
	return OriginatedFrom(rc) == constants.OriginatedFromRayService
}

// AutoscalingEnabled reports whether the in-tree Ray autoscaler is on.
func AutoscalingEnabled(rc *rayv1.RayCluster) bool {
	return rc.Spec.EnableInTreeAutoscaling != nil && *rc.Spec.EnableInTreeAutoscaling
}

// AutoscalerV2 reports whether autoscaler v2 is selected, by autoscalerOptions.version or by the head's
// RAY_enable_autoscaler_v2 env ("1" or "true").
func AutoscalerV2(rc *rayv1.RayCluster) bool {
	if o := rc.Spec.AutoscalerOptions; o != nil && o.Version != nil {
		return *o.Version == rayv1.AutoscalerVersionV2
	}
	containers := rc.Spec.HeadGroupSpec.Template.Spec.Containers
	if len(containers) == 0 {
		return false
	}
	for _, e := range containers[constants.RayContainerIndex].Env {
		if strings.EqualFold(e.Name, constants.EnvAutoscalerV2) {
			return e.Value == "1" || strings.EqualFold(e.Value, "true")
		}
	}
	return false
}

// UserServiceAccount reports whether the head template names its own ServiceAccount, which kray must not create.
func UserServiceAccount(rc *rayv1.RayCluster) bool {
	return rc.Spec.HeadGroupSpec.Template.Spec.ServiceAccountName != ""
}

// FTEnabled reports whether GCS fault tolerance is on: gcsFaultToleranceOptions is set, or the legacy
// ray.io/ft-enabled annotation is "true".
func FTEnabled(rc *rayv1.RayCluster) bool {
	return rc.Spec.GcsFaultToleranceOptions != nil || strings.EqualFold(rc.Annotations[constants.AnnotationFTEnabled], "true")
}

// FTEmbedded reports whether GCS fault tolerance uses the embedded RocksDB store.
func FTEmbedded(rc *rayv1.RayCluster) bool {
	o := rc.Spec.GcsFaultToleranceOptions
	return o != nil && o.Backend == rayv1.GcsFTBackendRocksDB
}

// FTRedis reports whether GCS fault tolerance uses an external Redis (the default backend).
func FTRedis(rc *rayv1.RayCluster) bool {
	return FTEnabled(rc) && !FTEmbedded(rc)
}

// ExternalStorageNamespace is the Redis key namespace of the cluster: the option, else the legacy
// annotation, else the cluster's UID.
func ExternalStorageNamespace(rc *rayv1.RayCluster) string {
	if o := rc.Spec.GcsFaultToleranceOptions; o != nil && o.ExternalStorageNamespace != "" {
		return o.ExternalStorageNamespace
	}
	if v, ok := rc.Annotations[constants.AnnotationExternalStorageNS]; ok {
		return v
	}
	return string(rc.UID)
}

// AuthEnabled reports whether Ray token authentication is on (authOptions.mode is token).
func AuthEnabled(rc *rayv1.RayCluster) bool {
	return rc.Spec.AuthOptions != nil && rc.Spec.AuthOptions.Mode == rayv1.AuthModeToken
}

// K8sTokenAuth reports whether Ray delegates token checks to the Kubernetes API server.
func K8sTokenAuth(rc *rayv1.RayCluster) bool {
	return rc.Spec.AuthOptions != nil && ptr.Deref(rc.Spec.AuthOptions.EnableK8sTokenAuth, false)
}

// EffectiveSuspend reports whether the cluster's pods must be gone: spec.suspend is true, or a suspension
// already started and, as in KubeRay, runs to completion even if spec.suspend was flipped back.
func EffectiveSuspend(rc *rayv1.RayCluster) bool {
	return ClusterSuspended(rc) || meta.IsStatusConditionTrue(rc.Status.Conditions, string(rayv1.RayClusterSuspending))
}

// HeadDisruptionBudget reports whether rc asks for a disruption budget on its head
// (kray.io/head-disruption-budget: "true").
func HeadDisruptionBudget(rc *rayv1.RayCluster) bool {
	return rc.Annotations[constants.AnnotationHeadDisruptionBudget] == "true"
}

// ImagePrepull reports whether rc asks for its Ray images to be kept pulled on its nodes
// (kray.io/image-prepull: "true").
func ImagePrepull(rc *rayv1.RayCluster) bool {
	return rc.Annotations[constants.AnnotationImagePrepull] == "true"
}

// PullsBeforeUpdate reports whether a RollingUpdate that changes a worker group's Ray image pulls it onto the
// nodes of the group's pods before any of them is updated: the default, unless kray.io/image-prepull is
// "false".
func PullsBeforeUpdate(rc *rayv1.RayCluster) bool {
	return Rolling(rc) && rc.Annotations[constants.AnnotationImagePrepull] != "false"
}

// WorkerHealing reports whether kray restarts the workers of rc that lost their Ray node (on unless
// kray.io/worker-healing is "false").
func WorkerHealing(rc *rayv1.RayCluster) bool {
	return rc.Annotations[constants.AnnotationWorkerHealing] != "false"
}
