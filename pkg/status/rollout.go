package status

import (
	"fmt"
	"strings"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	kruisev1beta1 "github.com/openkruise/kruise-api/apps/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/spec"
)

// HeadSetUpdated reports whether the head StatefulSet's pods run its current template: Kruise has observed
// its latest spec and every replica is at the update revision and ready.
func HeadSetUpdated(sts *kruisev1beta1.StatefulSet) bool {
	want := ptr.Deref(sts.Spec.Replicas, 1)
	return sts.Status.ObservedGeneration >= sts.Generation &&
		sts.Status.UpdatedReplicas >= want && sts.Status.UpdatedReadyReplicas >= want
}

// CloneSetUpdated reports whether a CloneSet's update reached its target: Kruise has observed its latest
// spec and replicas minus partition pods are at the update revision and ready.
func CloneSetUpdated(cs *kruisev1alpha1.CloneSet) bool {
	target := cs.Status.ExpectedUpdatedReplicas
	return cs.Status.ObservedGeneration >= cs.Generation &&
		cs.Status.UpdatedReplicas >= target && cs.Status.UpdatedReadyReplicas >= target
}

// setUpdateProgress reports each group's update progress, the head first and then the worker groups in spec
// order, and the PodsUpToDate condition: False, with a reason saying why, while some pod runs an older spec.
func setUpdateProgress(st *rayv1.RayClusterStatus, rc *rayv1.RayCluster, obs Observed) {
	var progress []rayv1.GroupUpdateProgress
	var behind []string
	if sts := obs.HeadSet; sts != nil {
		p := rayv1.GroupUpdateProgress{
			GroupName:            constants.HeadGroupName,
			Replicas:             sts.Status.Replicas,
			UpdatedReplicas:      sts.Status.UpdatedReplicas,
			UpdatedReadyReplicas: sts.Status.UpdatedReadyReplicas,
			TargetReplicas:       ptr.Deref(sts.Spec.Replicas, 1),
		}
		progress = append(progress, p)
		if podsBehind(sts.Generation, sts.Status.ObservedGeneration, p) {
			behind = append(behind, describeProgress(p))
		}
	}
	sets := map[string]*kruisev1alpha1.CloneSet{}
	for i := range obs.CloneSets {
		sets[obs.CloneSets[i].Labels[constants.LabelGroup]] = &obs.CloneSets[i]
	}
	for i := range rc.Spec.WorkerGroupSpecs {
		cs, ok := sets[rc.Spec.WorkerGroupSpecs[i].GroupName]
		if !ok {
			continue
		}
		p := rayv1.GroupUpdateProgress{
			GroupName:            rc.Spec.WorkerGroupSpecs[i].GroupName,
			Replicas:             cs.Status.Replicas,
			UpdatedReplicas:      cs.Status.UpdatedReplicas,
			UpdatedReadyReplicas: cs.Status.UpdatedReadyReplicas,
			TargetReplicas:       cs.Status.ExpectedUpdatedReplicas,
		}
		progress = append(progress, p)
		if podsBehind(cs.Generation, cs.Status.ObservedGeneration, p) {
			behind = append(behind, describeProgress(p))
		}
	}
	st.UpdateProgress = progress
	if len(progress) == 0 {
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
// not yet observed the latest spec of a workload that has pods, or fewer pods are updated than the existing
// pods it means to update (a partition keeps the others). A new pod that is not ready yet is not behind:
// creating a cluster is not an update. (HeadSetUpdated and CloneSetUpdated, which also wait for readiness,
// decide when a rolling update moves on to the next group.)
func podsBehind(generation, observed int64, p rayv1.GroupUpdateProgress) bool {
	return (observed < generation && p.Replicas > 0) || p.UpdatedReplicas < min(p.Replicas, p.TargetReplicas)
}

func describeProgress(p rayv1.GroupUpdateProgress) string {
	return fmt.Sprintf("%s %d/%d updated, %d ready", p.GroupName, p.UpdatedReplicas, p.TargetReplicas, p.UpdatedReadyReplicas)
}
