package builder

import (
	"crypto/sha1" //nolint:gosec // KubeRay's hash, for equality only
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"encoding/json"
	"math"

	appspub "github.com/openkruise/kruise-api/apps/pub"
	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	kruisev1beta1 "github.com/openkruise/kruise-api/apps/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/names"
)

// revisionHistoryLimit is set explicitly so that Kruise's defaulting never differs from what kray wrote.
const revisionHistoryLimit = 10

// HeadSelector selects the head pod of a cluster and nothing else.
func HeadSelector(rc *rayv1.RayCluster) map[string]string {
	return map[string]string{constants.LabelCluster: rc.Name, constants.LabelNodeType: constants.NodeTypeHead}
}

// WorkerSelector selects one worker group's pods; it includes the node type so a group named "headgroup"
// cannot select the head.
func WorkerSelector(rc *rayv1.RayCluster, group string) map[string]string {
	return map[string]string{constants.LabelCluster: rc.Name, constants.LabelNodeType: constants.NodeTypeWorker, constants.LabelGroup: group}
}

// HeadStatefulSet is the one-replica Advanced StatefulSet that runs (and replaces) the head pod; replicas is 0
// while the cluster is suspended. The template always carries the InPlaceUpdateReady readiness gate, which
// in-place updates need and which Kruise keeps True otherwise. The update strategy follows upgradeStrategy:
// None pauses it, so template changes never restart the running head (KubeRay's default); Recreate recreates
// the head; RollingUpdate updates it in place when only images or metadata changed, else recreates it.
func HeadStatefulSet(rc *rayv1.RayCluster, opts Options) *kruisev1beta1.StatefulSet {
	replicas := int32(1)
	if ClusterSuspended(rc) {
		replicas = 0
	}
	template := HeadPodTemplate(rc, opts)
	template.Annotations[constants.AnnotationRecreateHash] = RecreateHash(rc)
	template.Spec.ReadinessGates = append(template.Spec.ReadinessGates, corev1.PodReadinessGate{ConditionType: constants.ReadinessGateInPlaceUpdate})
	policy := kruisev1beta1.RecreatePodUpdateStrategyType
	if Rolling(rc) {
		policy = kruisev1beta1.InPlaceIfPossiblePodUpdateStrategyType
	}
	sts := &kruisev1beta1.StatefulSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: kruisev1beta1.GroupVersion.String(), Kind: "StatefulSet"},
		ObjectMeta: objectMeta(rc, names.HeadStatefulSet(rc.Name), HeadSelector(rc)),
		Spec: kruisev1beta1.StatefulSetSpec{
			Replicas:             &replicas,
			Selector:             &metav1.LabelSelector{MatchLabels: HeadSelector(rc)},
			Template:             template,
			ServiceName:          HeadServiceName(rc),
			PodManagementPolicy:  "OrderedReady",
			RevisionHistoryLimit: ptr.To[int32](revisionHistoryLimit),
			UpdateStrategy: kruisev1beta1.StatefulSetUpdateStrategy{
				Type: "RollingUpdate",
				RollingUpdate: &kruisev1beta1.RollingUpdateStatefulSetStrategy{
					Partition:       ptr.To[int32](0),
					MaxUnavailable:  ptr.To(intstr.FromInt32(1)),
					PodUpdatePolicy: policy,
					Paused:          !updatesPods(rc),
					MinReadySeconds: ptr.To[int32](0),
				},
			},
		},
	}
	setSpecHash(&sts.ObjectMeta, sts.Spec.Template, sts.Spec.UpdateStrategy, sts.Spec.Lifecycle)
	return sts
}

// WorkerCloneSet is a worker group's CloneSet. replicas is the group's desired pod count; podsToDelete is
// left empty (the reconciler fills it from a fresh read). The update strategy follows upgradeStrategy: None
// pauses it, so template changes never restart running workers; Recreate recreates them all at once;
// RollingUpdate updates them in place when only images or metadata changed, else recreates them, at most
// rollingUpdate.maxUnavailable at a time and leaving rollingUpdate.partition pods at the old spec. held pauses a
// RollingUpdate while an earlier group is still updating. Outside RollingUpdate maxUnavailable is 100%, so
// named removals are never held back. With workerDrain set, pods carry the drain hook label and Kruise holds
// a pod chosen for deletion in PreparingDelete until kray removes it.
func WorkerCloneSet(rc *rayv1.RayCluster, group *rayv1.WorkerGroupSpec, opts Options, held bool) *kruisev1alpha1.CloneSet {
	replicas := GroupReplicas(rc, group)
	selector := WorkerSelector(rc, group.GroupName)
	template := WorkerPodTemplate(rc, group, opts)
	if RecreateOnChange(rc) {
		// KubeRay's Recreate replaces every pod on any spec change, not only the groups whose template changed.
		template.Annotations[constants.AnnotationRecreateHash] = RecreateHash(rc)
	}
	strategy := kruisev1alpha1.CloneSetUpdateStrategy{
		Type:           kruisev1alpha1.RecreateCloneSetUpdateStrategyType,
		Partition:      ptr.To(intstr.FromInt32(0)),
		MaxUnavailable: ptr.To(intstr.FromString("100%")),
		MaxSurge:       ptr.To(intstr.FromInt32(0)),
		Paused:         !updatesPods(rc),
	}
	if Rolling(rc) {
		strategy.Type = kruisev1alpha1.InPlaceIfPossibleCloneSetUpdateStrategyType
		strategy.MaxUnavailable = ptr.To(intstr.FromString(constants.DefaultMaxUnavailable))
		strategy.Paused = held
		strategy.InPlaceUpdateStrategy = &appspub.InPlaceUpdateStrategy{}
		if ru := group.RollingUpdate; ru != nil {
			if ru.MaxUnavailable != nil {
				strategy.MaxUnavailable = ptr.To(*ru.MaxUnavailable)
			}
			if ru.Partition != nil {
				strategy.Partition = ptr.To(*ru.Partition)
			}
		}
	}
	var lifecycle *appspub.Lifecycle
	if rc.Spec.WorkerDrain != nil {
		template.Labels[constants.LabelDrainHook] = constants.DrainHookValue
		lifecycle = &appspub.Lifecycle{PreDelete: &appspub.LifecycleHook{LabelsHandler: map[string]string{constants.LabelDrainHook: constants.DrainHookValue}}}
	}
	cs := &kruisev1alpha1.CloneSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: kruisev1alpha1.GroupVersion.String(), Kind: "CloneSet"},
		ObjectMeta: objectMeta(rc, names.WorkerCloneSet(rc.Name, group.GroupName), selector),
		Spec: kruisev1alpha1.CloneSetSpec{
			Replicas:             &replicas,
			Selector:             &metav1.LabelSelector{MatchLabels: selector},
			Template:             template,
			RevisionHistoryLimit: ptr.To[int32](revisionHistoryLimit),
			UpdateStrategy:       strategy,
			Lifecycle:            lifecycle,
		},
	}
	setSpecHash(&cs.ObjectMeta, cs.Spec.Template, cs.Spec.UpdateStrategy, cs.Spec.Lifecycle)
	return cs
}

// setSpecHash records a hash of the parts of a workload spec that kray owns apart from replicas and
// podsToDelete, so the reconciler rewrites them only when they change.
func setSpecHash(meta *metav1.ObjectMeta, template corev1.PodTemplateSpec, strategy any, lifecycle *appspub.Lifecycle) {
	data, err := json.Marshal(struct {
		Template  corev1.PodTemplateSpec
		Strategy  any
		Lifecycle *appspub.Lifecycle `json:",omitempty"`
	}{template, strategy, lifecycle})
	if err != nil {
		panic(err) // API types always marshal
	}
	sum := sha256.Sum256(data)
	if meta.Annotations == nil {
		meta.Annotations = map[string]string{}
	}
	meta.Annotations[constants.AnnotationSpecHash] = hex.EncodeToString(sum[:])[:16]
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

// updatesPods reports whether spec changes reach running pods at all (every strategy but None).
func updatesPods(rc *rayv1.RayCluster) bool {
	return upgradeType(rc) != rayv1.RayClusterUpgradeNone
}

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

// RecreateHash is KubeRay's ray.io/upgrade-strategy-recreate-hash: base32hex of the SHA-1 of the spec's JSON
// with the fields that must not restart pods muted (replicas, min/max, workersToDelete, every template's
// tolerations and scheduling gates, and upgradeStrategy itself).
func RecreateHash(rc *rayv1.RayCluster) string {
	spec := rc.Spec.DeepCopy()
	spec.UpgradeStrategy = nil
	spec.HeadGroupSpec.Template.Spec.Tolerations = nil
	spec.HeadGroupSpec.Template.Spec.SchedulingGates = nil
	for i := range spec.WorkerGroupSpecs {
		g := &spec.WorkerGroupSpecs[i]
		g.Replicas, g.MinReplicas, g.MaxReplicas = nil, nil, nil
		g.ScaleStrategy.WorkersToDelete = nil
		g.Template.Spec.Tolerations = nil
		g.Template.Spec.SchedulingGates = nil
	}
	data, err := json.Marshal(spec)
	if err != nil {
		panic(err) // API types always marshal
	}
	sum := sha1.Sum(data)
	return base32.HexEncoding.EncodeToString(sum[:])
}
