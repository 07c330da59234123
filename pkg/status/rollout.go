package status

import (
	"fmt"
	"strconv"
	"strings"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	kruisev1beta1 "github.com/openkruise/kruise-api/apps/v1beta1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/scale"
	"github.com/kray-project/kray/pkg/spec"
)

// HeadSetUpdated reports whether the head StatefulSet's pods run its current template: Kruise has observed
// its latest spec, counts every replica at the update revision and ready, and so do the head pods themselves,
// Kruise's InPlaceUpdateReady included. The pods are checked because an Advanced StatefulSet counts a pod
// updated and ready from its revision label and its Ready condition alone: an in-place update changes the
// label at once, while Ready turns False only when the kubelet sees the restart.
func HeadSetUpdated(sts *kruisev1beta1.StatefulSet, pods []corev1.Pod) bool {
	want := ptr.Deref(sts.Spec.Replicas, 1)
	if sts.Status.ObservedGeneration < sts.Generation || sts.Status.UpdatedReplicas < want || sts.Status.UpdatedReadyReplicas < want {
		return false
	}
	p := groupProgress(constants.HeadGroupName, constants.NodeTypeHead, pods, sts.Status.UpdateRevision, want)
	return p.Replicas == p.UpdatedReadyReplicas && p.UpdatedReadyReplicas >= want
}

// CloneSetUpdated reports whether a CloneSet's update reached its target: Kruise has observed its latest
// spec and replicas minus partition pods are at the update revision and ready.
func CloneSetUpdated(cs *kruisev1alpha1.CloneSet) bool {
	target := cs.Status.ExpectedUpdatedReplicas
	return cs.Status.ObservedGeneration >= cs.Generation &&
		cs.Status.UpdatedReplicas >= target && cs.Status.UpdatedReadyReplicas >= target
}

// setUpdateProgress reports the update progress of each group whose pods do not all run the current spec
// yet, the head first and then the worker groups in spec order, and the PodsUpToDate condition: False, with a
// reason saying why, while some pod runs an older spec. A group that is up to date, and so every group of a
// cluster being created, is not listed: a new cluster's pods coming up change no progress. The counts come
// from the pods of this reconcile, against the revision Kruise updates to, so that they agree with the ready
// worker counts beside them (Kruise's own status counts lag behind the pods).
func setUpdateProgress(st *rayv1.RayClusterStatus, rc *rayv1.RayCluster, obs Observed) {
	var progress []rayv1.GroupUpdateProgress
	var behind []string
	workloads := 0
	if sts := obs.HeadSet; sts != nil {
		workloads++
		p := groupProgress(constants.HeadGroupName, constants.NodeTypeHead, obs.Pods, sts.Status.UpdateRevision, ptr.Deref(sts.Spec.Replicas, 1))
		if podsBehind(specGeneration(sts), sts.Status.ObservedGeneration, p) {
			progress = append(progress, p)
			behind = append(behind, describeProgress(p))
		}
	}
	sets := map[string]*kruisev1alpha1.CloneSet{}
	for i := range obs.CloneSets {
		sets[obs.CloneSets[i].Labels[constants.LabelGroup]] = &obs.CloneSets[i]
	}
	for i := range rc.Spec.WorkerGroupSpecs {
		group := rc.Spec.WorkerGroupSpecs[i].GroupName
		cs, ok := sets[group]
		if !ok {
			continue
		}
		workloads++
		p := groupProgress(group, constants.NodeTypeWorker, obs.Pods, cs.Status.UpdateRevision, cs.Status.ExpectedUpdatedReplicas)
		if podsBehind(specGeneration(cs), cs.Status.ObservedGeneration, p) {
			progress = append(progress, p)
			behind = append(behind, describeProgress(p))
		}
	}
	st.UpdateProgress = progress
	if workloads == 0 {
		return
	}
	if len(behind) == 0 {
		set(st, constants.ConditionPodsUpToDate, metav1.ConditionTrue, constants.ReasonUpToDate, "", obs.Now)
		return
	}
	reason, verb := constants.ReasonUpgradeStrategyNone, "upgradeStrategy None leaves running pods on their spec"
	switch {
	case spec.Rolling(rc):
		reason, verb = constants.ReasonRollingUpdate, "rolling update in progress, the head first, then each worker group in order"
	case spec.RecreateOnChange(rc):
		reason, verb = constants.ReasonRecreating, "recreating pods from the current spec"
	}
	set(st, constants.ConditionPodsUpToDate, metav1.ConditionFalse, reason, fmt.Sprintf("%s: %s", verb, strings.Join(behind, "; ")), obs.Now)
}

// podsBehind reports whether some of a workload's pods run an older spec than the workload's own: Kruise has
// observed an earlier spec but not yet the one kray last wrote (specGeneration) of a workload that has pods,
// or fewer pods are updated than the existing pods it means to update (a partition keeps the others).
// Creating a cluster or scaling a group is not an update: the pods of a workload Kruise has not reported on
// yet come from its only spec, a replicas change leaves the template as it was, and a new pod that is not
// ready yet is not behind. (HeadSetUpdated and CloneSetUpdated, which also wait for readiness, decide when a
// rolling update moves on to the next group.)
func podsBehind(specGeneration, observed int64, p rayv1.GroupUpdateProgress) bool {
	if observed == 0 {
		return false
	}
	return (observed < specGeneration && p.Replicas > 0) || p.UpdatedReplicas < min(p.Replicas, p.TargetReplicas)
}

// specGeneration is the generation of the write that gave w the spec kray last wrote: its
// kray.io/spec-generation annotation, 1 (its creation) without one, never above its generation.
func specGeneration(w metav1.Object) int64 {
	g, err := strconv.ParseInt(w.GetAnnotations()[constants.AnnotationSpecGeneration], 10, 64)
	if err != nil || g < 1 {
		g = 1
	}
	return min(g, w.GetGeneration())
}

// groupProgress counts a group's live pods (not ended, not being deleted), those of them at updateRevision,
// and those of these that are Ready; target is the number of pods the group updates.
func groupProgress(group, nodeType string, pods []corev1.Pod, updateRevision string, target int32) rayv1.GroupUpdateProgress {
	p := rayv1.GroupUpdateProgress{GroupName: group, TargetReplicas: target}
	for i := range pods {
		pod := &pods[i]
		if pod.Labels[constants.LabelNodeType] != nodeType || pod.Labels[constants.LabelGroup] != group || pod.DeletionTimestamp != nil || scale.IsDead(pod) {
			continue
		}
		p.Replicas++
		if !atRevision(pod, updateRevision) {
			continue
		}
		p.UpdatedReplicas++
		if PodReady(pod) && inPlaceUpdateReady(pod) {
			p.UpdatedReadyReplicas++
		}
	}
	return p
}

// inPlaceUpdateReady reports whether Kruise's InPlaceUpdateReady condition of the pod is not False: Kruise
// sets it False before it updates a pod in place, and True once the update is done.
func inPlaceUpdateReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == constants.ReadinessGateInPlaceUpdate {
			return c.Status != corev1.ConditionFalse
		}
	}
	return true
}

// atRevision reports whether a pod's controller-revision-hash label names revision, in full or by the hash
// after its last dash (as Kruise compares them); an empty revision (not computed yet) matches no pod.
func atRevision(pod *corev1.Pod, revision string) bool {
	label := pod.Labels[appsv1.ControllerRevisionHashLabelKey]
	if revision == "" || label == "" {
		return false
	}
	return label == revision || shortHash(label) == shortHash(revision)
}

func shortHash(revision string) string {
	return revision[strings.LastIndexByte(revision, '-')+1:]
}

func describeProgress(p rayv1.GroupUpdateProgress) string {
	return fmt.Sprintf("%s %d/%d updated, %d ready", p.GroupName, p.UpdatedReplicas, p.TargetReplicas, p.UpdatedReadyReplicas)
}
