package builder

import (
	"crypto/sha1" //nolint:gosec // KubeRay's hash, for equality only
	"crypto/sha256"
	"encoding/base32"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"

	appspub "github.com/openkruise/kruise-api/apps/pub"
	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	kruisev1beta1 "github.com/openkruise/kruise-api/apps/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/batchscheduler"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/names"
	"github.com/kray-project/kray/pkg/spec"
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
	if spec.ClusterSuspended(rc) {
		replicas = 0
	}
	template := HeadPodTemplate(rc, opts)
	opts.Scheduling.ApplyPod(&template, rc, batchscheduler.GroupHead)
	opts.Scheduling.Keep(&template, opts.LiveTemplates[names.HeadStatefulSet(rc.Name)])
	setPullPolicies(&template, opts.LiveTemplates[names.HeadStatefulSet(rc.Name)])
	template.Annotations[constants.AnnotationRecreateHash] = headRecreateHash(rc)
	template.Spec.ReadinessGates = append(template.Spec.ReadinessGates, corev1.PodReadinessGate{ConditionType: constants.ReadinessGateInPlaceUpdate})
	policy := kruisev1beta1.RecreatePodUpdateStrategyType
	if spec.Rolling(rc) {
		policy = kruisev1beta1.InPlaceIfPossiblePodUpdateStrategyType
	}
	sts := &kruisev1beta1.StatefulSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: kruisev1beta1.GroupVersion.String(), Kind: "StatefulSet"},
		ObjectMeta: objectMeta(rc, names.HeadStatefulSet(rc.Name), HeadSelector(rc)),
		Spec: kruisev1beta1.StatefulSetSpec{
			Replicas:             &replicas,
			Selector:             &metav1.LabelSelector{MatchLabels: HeadSelector(rc)},
			Template:             template,
			ServiceName:          names.HeadServiceFor(rc),
			PodManagementPolicy:  "OrderedReady",
			RevisionHistoryLimit: ptr.To[int32](revisionHistoryLimit),
			UpdateStrategy: kruisev1beta1.StatefulSetUpdateStrategy{
				Type: "RollingUpdate",
				RollingUpdate: &kruisev1beta1.RollingUpdateStatefulSetStrategy{
					Partition:       ptr.To[int32](0),
					MaxUnavailable:  ptr.To(intstr.FromInt32(1)),
					PodUpdatePolicy: policy,
					Paused:          !spec.UpdatesPods(rc),
					MinReadySeconds: ptr.To[int32](0),
				},
			},
		},
	}
	setSpecHash(&sts.ObjectMeta, sts.Spec.Template, sts.Spec.UpdateStrategy, sts.Spec.Lifecycle)
	setScheduling(&sts.ObjectMeta, opts.Scheduling)
	return sts
}

// WorkerCloneSet is a worker group's CloneSet. replicas is the group's desired pod count; podsToDelete is
// left empty (the reconciler fills it from a fresh read). The update strategy follows upgradeStrategy: None
// pauses it, so template changes never restart running workers; Recreate recreates them all at once;
// RollingUpdate updates them in place when only images or metadata changed, else recreates them, at most
// rollingUpdate.maxUnavailable at a time and leaving rollingUpdate.partition pods at the old spec. held pauses a
// RollingUpdate while an earlier group is still updating. Outside RollingUpdate maxUnavailable is 100%, so
// named removals are never held back. With workerDrain set, pods carry the drain hook label and Kruise holds
// a pod chosen for deletion in PreparingDelete until kray removes it, and under RollingUpdate a pod about to
// be updated in place in PreparingUpdate, not ready, until kray releases it.
func WorkerCloneSet(rc *rayv1.RayCluster, group *rayv1.WorkerGroupSpec, opts Options, held bool) *kruisev1alpha1.CloneSet {
	replicas := spec.GroupReplicas(rc, group)
	selector := WorkerSelector(rc, group.GroupName)
	template := WorkerPodTemplate(rc, group, opts)
	opts.Scheduling.ApplyPod(&template, rc, group.GroupName)
	opts.Scheduling.Keep(&template, opts.LiveTemplates[names.WorkerCloneSet(rc.Name, group.GroupName)])
	setPullPolicies(&template, opts.LiveTemplates[names.WorkerCloneSet(rc.Name, group.GroupName)])
	if spec.RecreateOnChange(rc) {
		// KubeRay's Recreate replaces every pod on any spec change, not only the groups whose template changed.
		template.Annotations[constants.AnnotationRecreateHash] = headRecreateHash(rc)
	}
	strategy := kruisev1alpha1.CloneSetUpdateStrategy{
		Type:           kruisev1alpha1.RecreateCloneSetUpdateStrategyType,
		Partition:      ptr.To(intstr.FromInt32(0)),
		MaxUnavailable: ptr.To(intstr.FromString("100%")),
		MaxSurge:       ptr.To(intstr.FromInt32(0)),
		Paused:         !spec.UpdatesPods(rc),
	}
	if spec.Rolling(rc) {
		strategy.Type = kruisev1alpha1.InPlaceIfPossibleCloneSetUpdateStrategyType
		strategy.MaxUnavailable = ptr.To(intstr.FromString(DefaultMaxUnavailable))
		strategy.Paused = held
		strategy.InPlaceUpdateStrategy = &appspub.InPlaceUpdateStrategy{}
		if ru := group.RollingUpdate; ru != nil {
			if ru.MaxUnavailable != nil {
				strategy.MaxUnavailable = ptr.To(*ru.MaxUnavailable)
			}
			if ru.Partition != nil {
				strategy.Partition = ptr.To(*ru.Partition)
			}
			if ru.MaxSurge != nil {
				strategy.MaxSurge = ptr.To(*ru.MaxSurge)
			}
		}
	}
	var lifecycle *appspub.Lifecycle
	if rc.Spec.WorkerDrain != nil {
		template.Labels[constants.LabelDrainHook] = constants.DrainHookValue
		hook := map[string]string{constants.LabelDrainHook: constants.DrainHookValue}
		lifecycle = &appspub.Lifecycle{PreDelete: &appspub.LifecycleHook{LabelsHandler: hook}}
		if spec.Rolling(rc) {
			// A pod about to be updated in place is taken out of every Service's endpoints and held in
			// PreparingUpdate, behind the same hook, until kray has drained its Ray node.
			lifecycle.InPlaceUpdate = &appspub.LifecycleHook{LabelsHandler: hook, MarkPodNotReady: true}
		}
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
	setScheduling(&cs.ObjectMeta, opts.Scheduling)
	return cs
}

// setScheduling records on a workload how its pods are scheduled, when not by the default scheduler.
func setScheduling(meta *metav1.ObjectMeta, s batchscheduler.Scheduling) {
	if v := s.String(); v != "" {
		meta.Annotations[constants.AnnotationBatchScheduler] = v
	}
}

// setSpecHash records a hash of the parts of a workload spec that kray owns apart from replicas and
// podsToDelete, so the reconciler rewrites them only when they change. The template is hashed in its
// generated protobuf encoding, which is deterministic (map keys sorted) and several times cheaper to produce
// than JSON on every reconcile; the small Kruise parts, which have no protobuf encoding, as JSON.
func setSpecHash(meta *metav1.ObjectMeta, template corev1.PodTemplateSpec, strategy any, lifecycle *appspub.Lifecycle) {
	tmpl, err := template.Marshal()
	if err != nil {
		panic(err) // API types always marshal
	}
	rest, err := json.Marshal(struct {
		Strategy  any
		Lifecycle *appspub.Lifecycle `json:",omitempty"`
	}{strategy, lifecycle})
	if err != nil {
		panic(err) // API types always marshal
	}
	h := sha256.New()
	_ = binary.Write(h, binary.BigEndian, uint64(len(tmpl))) // a hash.Hash never fails to write
	h.Write(tmpl)
	h.Write(rest)
	if meta.Annotations == nil {
		meta.Annotations = map[string]string{}
	}
	meta.Annotations[constants.AnnotationSpecHash] = hex.EncodeToString(h.Sum(nil))[:16]
}

// headRecreateHash is the head template's ray.io/upgrade-strategy-recreate-hash: RecreateHash, except under
// RollingUpdate, where the worker groups are left out, so that a change of workers alone never updates the
// head pod (in place, which takes it out of its Services for a moment).
func headRecreateHash(rc *rayv1.RayCluster) string {
	if !spec.Rolling(rc) {
		return RecreateHash(rc)
	}
	head := rc.DeepCopy()
	head.Spec.WorkerGroupSpecs = nil
	return RecreateHash(head)
}

// RecreateHash is KubeRay's ray.io/upgrade-strategy-recreate-hash: base32hex of the SHA-1 of the spec's JSON
// with the fields that must not restart pods muted (replicas, min/max, workersToDelete, every template's
// tolerations and scheduling gates, and upgradeStrategy itself). spec.networkPolicy is muted too, which
// KubeRay v1.7 does not do: a NetworkPolicy applies to running pods, so a change of it alone restarts none.
func RecreateHash(rc *rayv1.RayCluster) string {
	muted := rc.Spec.DeepCopy()
	muted.UpgradeStrategy = nil
	muted.NetworkPolicy = nil
	muted.HeadGroupSpec.Template.Spec.Tolerations = nil
	muted.HeadGroupSpec.Template.Spec.SchedulingGates = nil
	for i := range muted.WorkerGroupSpecs {
		g := &muted.WorkerGroupSpecs[i]
		g.Replicas, g.MinReplicas, g.MaxReplicas = nil, nil, nil
		g.ScaleStrategy.WorkersToDelete = nil
		g.Template.Spec.Tolerations = nil
		g.Template.Spec.SchedulingGates = nil
	}
	data, err := json.Marshal(muted)
	if err != nil {
		panic(err) // API types always marshal
	}
	sum := sha1.Sum(data)
	return base32.HexEncoding.EncodeToString(sum[:])
}
