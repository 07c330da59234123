// Package scale holds the pure decisions about a cluster's pods: a worker CloneSet's replicas and
// podsToDelete from the RayCluster's desired state and a fresh list of the group's pods (Compute), which pods
// are dead or exited under restartPolicy Never and must be deleted, and the replica labels of multi-host
// groups. The controller reads, calls them, and writes.
package scale

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Input is everything Compute needs; Pods must come from a fresh read, never from a guess.
type Input struct {
	// CloneSetUID identifies the pods this CloneSet controls.
	CloneSetUID types.UID
	// CurrentReplicas and CurrentPodsToDelete are the live CloneSet's spec values.
	CurrentReplicas     int32
	CurrentPodsToDelete []string
	// DesiredReplicas is the group's clamped pod count from the RayCluster.
	DesiredReplicas int32
	// WorkersToDelete is the group's scaleStrategy.workersToDelete, as the autoscaler wrote it.
	WorkersToDelete []string
	// Pods are the cluster's pods (any group), so that another group's pod is told apart from a gone one.
	Pods []corev1.Pod
	// Autoscaling forbids lowering replicas by more pods than are named for deletion.
	Autoscaling bool
	// NumOfHosts above 1 makes the group's replicas atomic: a named host takes its whole replica along, a
	// replica that lost a host is replaced whole, and a scale-down removes whole replicas.
	NumOfHosts int32
}

// Ignored is a workersToDelete name that kray did not pass to the CloneSet, with the reason.
type Ignored struct {
	Name   string
	Reason string
}

// Plan is the CloneSet write that realises Input.
type Plan struct {
	Replicas     int32
	PodsToDelete []string
	// Named are live pods newly added to podsToDelete.
	Named []string
	// Replaced are the live hosts of multi-host replicas that lost a host, newly added to podsToDelete
	// without lowering replicas: the CloneSet recreates them, and they form a new replica.
	Replaced []string
	// Ignored are names kray could not act on: dead pods and other groups' pods. Names of pods that are
	// gone or terminating are done, not ignored.
	Ignored []Ignored
}

// Changed reports whether the plan differs from the live CloneSet.
func (p Plan) Changed(in Input) bool {
	return p.Replicas != in.CurrentReplicas || !equalSets(p.PodsToDelete, in.CurrentPodsToDelete)
}

// Reasons a workersToDelete name is ignored.
const (
	IgnoredDead       = "the pod has already exited (Failed or Succeeded); kray deletes it and the CloneSet has replaced it"
	IgnoredOtherOwner = "the pod is not controlled by this group's CloneSet"
)

// Compute returns the CloneSet replicas and podsToDelete for in. Names of live pods are added to
// podsToDelete; with autoscaling on, replicas drops by at most the number of pods named this round, so
// the CloneSet never picks a victim nobody named. Listed names that are no longer active are dropped, as
// the CloneSet controller does itself.
func Compute(in Input) Plan {
	byName := make(map[string]*corev1.Pod, len(in.Pods))
	for i := range in.Pods {
		byName[in.Pods[i].Name] = &in.Pods[i]
	}
	var plan Plan
	listed := map[string]bool{}
	for _, name := range in.CurrentPodsToDelete {
		if p := byName[name]; p != nil && IsActive(p, in.CloneSetUID) && !listed[name] {
			listed[name] = true
			plan.PodsToDelete = append(plan.PodsToDelete, name)
		}
	}
	names := dedupe(in.WorkersToDelete)
	var reps map[string]*replica
	var unlabeled []*corev1.Pod
	if in.NumOfHosts > 1 {
		reps, unlabeled = replicasOf(in.Pods, in.CloneSetUID, true)
		names = expandToReplicas(names, reps)
	}
	for _, name := range names {
		p := byName[name]
		switch {
		case p == nil, p.DeletionTimestamp != nil && IsControlledBy(p, in.CloneSetUID):
			// gone or going: the request is done (the autoscaler clears the name itself)
		case !IsControlledBy(p, in.CloneSetUID):
			plan.Ignored = append(plan.Ignored, Ignored{name, IgnoredOtherOwner})
		case IsDead(p):
			plan.Ignored = append(plan.Ignored, Ignored{name, IgnoredDead})
		case listed[name]:
			// already requested; the CloneSet is working on it
		default:
			listed[name] = true
			plan.Named = append(plan.Named, name)
			plan.PodsToDelete = append(plan.PodsToDelete, name)
		}
	}
	plan.Replicas = in.DesiredReplicas
	if in.Autoscaling && in.DesiredReplicas < in.CurrentReplicas {
		floor := in.CurrentReplicas - int32(len(plan.Named))
		if floor > plan.Replicas {
			plan.Replicas = floor
		}
	}
	if in.NumOfHosts > 1 {
		plan.atomicReplicas(in, listed, reps, unlabeled)
	}
	return plan
}

// atomicReplicas keeps a multi-host group's replicas whole: the rest of a replica that lost a host is
// replaced, and a scale-down that nobody named is done by naming whole replicas (without autoscaling; with
// it, only the autoscaler names pods).
func (plan *Plan) atomicReplicas(in Input, listed map[string]bool, reps map[string]*replica, unlabeled []*corev1.Pod) {
	for _, name := range brokenReplicaMembers(reps, in.NumOfHosts) {
		if !listed[name] {
			listed[name] = true
			plan.Replaced = append(plan.Replaced, name)
			plan.PodsToDelete = append(plan.PodsToDelete, name)
		}
	}
	if in.Autoscaling {
		return
	}
	active := 0
	for i := range in.Pods {
		if IsActive(&in.Pods[i], in.CloneSetUID) && !listed[in.Pods[i].Name] {
			active++
		}
	}
	if excess := active - int(plan.Replicas); excess > 0 {
		for _, name := range wholeReplicaVictims(reps, unlabeled, excess, listed) {
			listed[name] = true
			plan.Named = append(plan.Named, name)
			plan.PodsToDelete = append(plan.PodsToDelete, name)
		}
	}
}

// IsActive reports whether the CloneSet counts pod p: controlled by uid, not terminating, not exited.
func IsActive(p *corev1.Pod, uid types.UID) bool {
	return IsControlledBy(p, uid) && p.DeletionTimestamp == nil && !IsDead(p)
}

// IsDead reports whether the pod has exited for good (phase Failed or Succeeded, which includes evictions).
func IsDead(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded
}

// IsControlledBy reports whether uid is the pod's controller.
func IsControlledBy(p *corev1.Pod, uid types.UID) bool {
	ref := metav1.GetControllerOf(p)
	return ref != nil && ref.UID == uid
}

// Describe renders ignored names for an event message, sorted for stable output.
func Describe(ignored []Ignored) string {
	sorted := append([]Ignored(nil), ignored...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	out := ""
	for i, ig := range sorted {
		if i > 0 {
			out += "; "
		}
		out += fmt.Sprintf("%s: %s", ig.Name, ig.Reason)
	}
	return out
}

func dedupe(in []string) []string {
	seen := make(map[string]bool, len(in))
	out := make([]string, 0, len(in))
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

func equalSets(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	m := make(map[string]bool, len(a))
	for _, s := range a {
		m[s] = true
	}
	for _, s := range b {
		if !m[s] {
			return false
		}
	}
	return true
}
