// Package status computes a RayCluster's status from what kray observed in one reconcile. It is pure: the
// caller passes the pods, Service, workloads, errors and the current time, and writes the result once.
package status

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	kruisev1beta1 "github.com/openkruise/kruise-api/apps/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/spec"
)

// Observed is what one reconcile saw and did.
type Observed struct {
	// Pods are all pods labelled with the cluster's name, including terminating and exited ones.
	Pods []corev1.Pod
	// HeadService is the head Service, nil if it does not exist yet.
	HeadService *corev1.Service
	// HeadSet and CloneSets are the cluster's Kruise workloads as last read.
	HeadSet   *kruisev1beta1.StatefulSet
	CloneSets []kruisev1alpha1.CloneSet
	// SyncError is the error of the reconcile phases, nil when they all succeeded.
	SyncError error
	// InvalidSpec is the validation error, nil when the spec is valid.
	InvalidSpec error
	// InvalidReason is the condition reason for InvalidSpec (metadata or spec).
	InvalidReason string
	// Now is the time this status is computed at.
	Now metav1.Time
	// BatchScheduler is the batch scheduler the cluster's pods go to, "" for Kubernetes' default scheduler.
	BatchScheduler string
	// GCSPaused says why kray does not call the cluster's GCS for now, nil when it does.
	GCSPaused error
	// RestartingWorkers are the worker pods kray is restarting because they lost their Ray node.
	RestartingWorkers []string
	// NotJoiningWorkers are the worker pods that stayed out of their cluster's GCS after kray restarted them.
	NotJoiningWorkers []string
}

// Compute returns the new status of rc. It does not modify rc.
func Compute(rc *rayv1.RayCluster, obs Observed) rayv1.RayClusterStatus {
	st := *rc.Status.DeepCopy()
	st.ObservedGeneration = rc.Generation
	st.LastUpdateTime = &obs.Now
	workers(rc, &st, obs.Pods)
	desiredResources(rc, &st)
	st.Endpoints = endpoints(obs.HeadService)
	head := headPod(obs.Pods)
	st.Head = headInfo(obs.HeadService, head)

	setValidity(&st, obs)
	setHeadPodReady(&st, head, obs.Now)
	setReplicaFailure(&st, rc, obs, head)
	setWorkloadsSynced(&st, rc, obs)
	setUpdateProgress(&st, rc, obs)
	suspendedNow := setSuspension(&st, rc, obs.Pods, obs.Now)
	setProvisioned(&st, obs.Pods, obs.Now)
	setPodsScheduled(&st, obs)
	setGCSPaused(&st, obs)
	setWorkersRestarting(&st, obs)
	setWorkersNotJoining(&st, obs)

	state := st.State
	switch {
	case suspendedNow:
		state = rayv1.Suspended
	case obs.SyncError == nil && obs.InvalidSpec == nil && !spec.ClusterSuspended(rc) && allPodsUp(&st, obs.Pods):
		state = rayv1.Ready
	}
	if state != st.State {
		st.State = state
		if st.StateTransitionTimes == nil {
			st.StateTransitionTimes = map[rayv1.ClusterState]*metav1.Time{}
		}
		st.StateTransitionTimes[state] = &obs.Now
	}
	if st.State == rayv1.Ready {
		st.Reason = ""
	}
	return st
}

// NeedsWrite reports whether updated differs from old in anything but lastUpdateTime. It compares
// semantically: a status read back from the API server has quantities that carry their string form and
// times in the local zone, which a plain deep comparison would see as changes on every reconcile.
func NeedsWrite(old, updated rayv1.RayClusterStatus) bool {
	return !sameBut(old, updated, func(*rayv1.RayClusterStatus, *rayv1.RayClusterStatus) {})
}

// ProgressOnly reports whether updated differs from old only in how far things have come, not in where
// they stand: pod counts (ready and available workers, each group's updateProgress), the head's pod and
// Service addresses, the head pod becoming Ready before the cluster was first provisioned (HeadPodReady
// turning True while RayClusterProvisioned is not; the state that follows from it is not progress), and the
// reason or message of a condition whose status is unchanged, besides lastUpdateTime. A change of state, of
// any other condition's status (the head going down, or a replaced head coming up, among them), of an
// endpoint or of the desired size is not progress. The caller may space progress writes out; any other
// difference is written at once.
func ProgressOnly(old, updated rayv1.RayClusterStatus) bool {
	return sameBut(old, updated, func(a, b *rayv1.RayClusterStatus) {
		a.ReadyWorkerReplicas, a.AvailableWorkerReplicas = b.ReadyWorkerReplicas, b.AvailableWorkerReplicas
		a.UpdateProgress = b.UpdateProgress
		a.Head = b.Head
		provisioned := meta.IsStatusConditionTrue(a.Conditions, string(rayv1.RayClusterProvisioned))
		for i := range a.Conditions {
			c := &a.Conditions[i]
			u := meta.FindStatusCondition(b.Conditions, c.Type)
			switch {
			case u == nil:
			case u.Status == c.Status:
				c.Reason, c.Message, c.LastTransitionTime = u.Reason, u.Message, u.LastTransitionTime
			case c.Type == string(rayv1.HeadPodReady) && u.Status == metav1.ConditionTrue && !provisioned:
				*c = *u
			}
		}
	})
}

// sameBut reports whether old and updated are semantically equal once lastUpdateTime is set aside and
// ignore has copied into a copy of old the fields of updated that do not count.
func sameBut(old, updated rayv1.RayClusterStatus, ignore func(a, b *rayv1.RayClusterStatus)) bool {
	a, b := old.DeepCopy(), updated
	a.LastUpdateTime, b.LastUpdateTime = nil, nil
	ignore(a, &b)
	return equality.Semantic.DeepEqual(*a, b)
}

func workers(rc *rayv1.RayCluster, st *rayv1.RayClusterStatus, pods []corev1.Pod) {
	var desired, lo, hi int64
	for i := range rc.Spec.WorkerGroupSpecs {
		g := &rc.Spec.WorkerGroupSpecs[i]
		desired += int64(spec.GroupReplicas(rc, g))
		if spec.GroupSuspended(rc, g) {
			continue
		}
		hosts := int64(spec.NumOfHosts(g))
		lo += int64(ptr.Deref(g.MinReplicas, 0)) * hosts
		hi += int64(ptr.Deref(g.MaxReplicas, math.MaxInt32)) * hosts
	}
	st.DesiredWorkerReplicas, st.MinWorkerReplicas, st.MaxWorkerReplicas = sat(desired), sat(lo), sat(hi)
	var ready, available int32
	for i := range pods {
		p := &pods[i]
		if p.Labels[constants.LabelNodeType] != constants.NodeTypeWorker || p.Status.Phase != corev1.PodRunning {
			continue
		}
		available++
		if PodReady(p) {
			ready++
		}
	}
	st.ReadyWorkerReplicas, st.AvailableWorkerReplicas = ready, available
}

func sat(n int64) int32 {
	if n > math.MaxInt32 {
		return math.MaxInt32
	}
	return int32(n)
}

func headPod(pods []corev1.Pod) *corev1.Pod {
	var found *corev1.Pod
	for i := range pods {
		p := &pods[i]
		if p.Labels[constants.LabelNodeType] != constants.NodeTypeHead {
			continue
		}
		// Prefer the live pod when an old one is still terminating under the same name's predecessor.
		if found == nil || (found.DeletionTimestamp != nil && p.DeletionTimestamp == nil) {
			found = p
		}
	}
	return found
}

func headInfo(svc *corev1.Service, head *corev1.Pod) rayv1.HeadInfo {
	var info rayv1.HeadInfo
	if head != nil {
		info.PodIP, info.PodName = head.Status.PodIP, head.Name
	}
	if svc != nil {
		info.ServiceName = svc.Name
		info.ServiceIP = svc.Spec.ClusterIP
		if svc.Spec.ClusterIP == corev1.ClusterIPNone {
			info.ServiceIP = info.PodIP
		}
	}
	return info
}

// endpoints maps each named head Service port to its node port, else its target port.
func endpoints(svc *corev1.Service) map[string]string {
	if svc == nil {
		return nil
	}
	out := map[string]string{}
	for _, p := range svc.Spec.Ports {
		if p.Name == "" {
			continue
		}
		switch {
		case p.NodePort != 0:
			out[p.Name] = strconv.Itoa(int(p.NodePort))
		case p.TargetPort.IntVal != 0:
			out[p.Name] = strconv.Itoa(int(p.TargetPort.IntVal))
		case p.TargetPort.StrVal != "":
			out[p.Name] = p.TargetPort.StrVal
		default:
			out[p.Name] = strconv.Itoa(int(p.Port))
		}
	}
	return out
}

// PodReady reports whether the pod's Ready condition is True.
func PodReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// allPodsUp reports whether the cluster has its head and every desired worker, all running and ready. The
// count matters because Kruise creates a new cluster's head and workers apart: the head is often ready before
// the first worker pod exists.
func allPodsUp(st *rayv1.RayClusterStatus, pods []corev1.Pod) bool {
	return len(pods) == int(st.DesiredWorkerReplicas)+1 && allRunningAndReady(pods)
}

func allRunningAndReady(pods []corev1.Pod) bool {
	for i := range pods {
		if pods[i].Status.Phase != corev1.PodRunning || !PodReady(&pods[i]) {
			return false
		}
	}
	return true
}

func set(st *rayv1.RayClusterStatus, t string, s metav1.ConditionStatus, reason, msg string, now metav1.Time) {
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: st.ObservedGeneration, LastTransitionTime: now,
	})
}

func setValidity(st *rayv1.RayClusterStatus, obs Observed) {
	if obs.InvalidSpec != nil {
		set(st, constants.ConditionSpecValid, metav1.ConditionFalse, obs.InvalidReason, obs.InvalidSpec.Error(), obs.Now)
		return
	}
	set(st, constants.ConditionSpecValid, metav1.ConditionTrue, constants.ReasonValid, "", obs.Now)
}

// setHeadPodReady mirrors the head pod's Ready condition, naming the failing container when there is one.
func setHeadPodReady(st *rayv1.RayClusterStatus, head *corev1.Pod, now metav1.Time) {
	t := string(rayv1.HeadPodReady)
	if head == nil {
		set(st, t, metav1.ConditionFalse, constants.ReasonHeadPodNotFound, "Head Pod not found", now)
		return
	}
	for _, c := range head.Status.Conditions {
		if c.Type != corev1.PodReady {
			continue
		}
		reason, msg := c.Reason, c.Message
		if c.Status == corev1.ConditionTrue && reason == "" {
			reason = constants.ReasonHeadPodRunningAndReady
		}
		if reason == "ContainersNotReady" {
			for _, cs := range head.Status.ContainerStatuses {
				switch {
				case cs.State.Waiting != nil && cs.State.Waiting.Reason != "":
					reason, msg = cs.State.Waiting.Reason, msg+"; "+cs.Name+": "+cs.State.Waiting.Message
				case cs.State.Terminated != nil && cs.State.Terminated.Reason != "":
					reason, msg = cs.State.Terminated.Reason, msg+"; "+cs.Name+": "+cs.State.Terminated.Message
				default:
					continue
				}
				break
			}
		}
		if reason == "" {
			reason = constants.ReasonUnknown
		}
		set(st, t, metav1.ConditionStatus(c.Status), reason, msg, now)
		return
	}
	reason := constants.ReasonUnknown
	if head.Status.Reason != "" {
		reason = head.Status.Reason // e.g. Evicted
	}
	set(st, t, metav1.ConditionFalse, reason, head.Status.Message, now)
}

// setReplicaFailure reports pod creations that the workloads could not make (for example a ResourceQuota
// refusal), which kray sees only in their status; it is removed once they succeed again.
func setReplicaFailure(st *rayv1.RayClusterStatus, rc *rayv1.RayCluster, obs Observed, head *corev1.Pod) {
	t := string(rayv1.RayClusterReplicaFailure)
	if obs.HeadSet != nil && head == nil {
		for _, c := range obs.HeadSet.Status.Conditions {
			if c.Type == kruisev1beta1.FailedCreatePod && c.Status == corev1.ConditionTrue {
				set(st, t, metav1.ConditionTrue, constants.ReasonFailedCreateHeadPod, c.Message, obs.Now)
				return
			}
		}
	}
	for i := range obs.CloneSets {
		cs := &obs.CloneSets[i]
		if !shortOfPods(cs) {
			// Kruise v1.9 keeps FailedScale after the pods it could not create have been created.
			continue
		}
		for _, c := range cs.Status.Conditions {
			if c.Type == kruisev1alpha1.CloneSetConditionFailedScale && c.Status == corev1.ConditionTrue {
				set(st, t, metav1.ConditionTrue, constants.ReasonFailedCreateWorkerPod, fmt.Sprintf("CloneSet %s: %s", cs.Name, c.Message), obs.Now)
				return
			}
		}
	}
	meta.RemoveStatusCondition(&st.Conditions, t)
}

// shortOfPods reports whether cs may have fewer pods than it wants: its status is of an older spec, or it
// counts fewer pods than its replicas.
func shortOfPods(cs *kruisev1alpha1.CloneSet) bool {
	return cs.Status.ObservedGeneration != cs.Generation || cs.Status.Replicas < ptr.Deref(cs.Spec.Replicas, 1)
}

func setWorkloadsSynced(st *rayv1.RayClusterStatus, rc *rayv1.RayCluster, obs Observed) {
	if obs.InvalidSpec != nil {
		return
	}
	if obs.SyncError != nil {
		set(st, constants.ConditionWorkloadsSynced, metav1.ConditionFalse, constants.ReasonWorkloadWriteFailed, obs.SyncError.Error(), obs.Now)
		return
	}
	set(st, constants.ConditionWorkloadsSynced, metav1.ConditionTrue, constants.ReasonSynced, "", obs.Now)
}

// setGCSPaused reports a pause of the calls to the cluster's GCS, and removes the condition once they resume.
func setGCSPaused(st *rayv1.RayClusterStatus, obs Observed) {
	if obs.GCSPaused == nil {
		meta.RemoveStatusCondition(&st.Conditions, constants.ConditionRayGCSPaused)
		return
	}
	set(st, constants.ConditionRayGCSPaused, metav1.ConditionTrue, constants.ReasonGCSNotAnswering, obs.GCSPaused.Error(), obs.Now)
}

// setWorkersRestarting reports the workers kray is restarting because they lost their Ray node, and removes
// the condition once none is.
func setWorkersRestarting(st *rayv1.RayClusterStatus, obs Observed) {
	if len(obs.RestartingWorkers) == 0 {
		meta.RemoveStatusCondition(&st.Conditions, constants.ConditionWorkersRestarting)
		return
	}
	msg := fmt.Sprintf("restarting %d worker pods that lost their Ray node: %s", len(obs.RestartingWorkers), strings.Join(obs.RestartingWorkers, ", "))
	set(st, constants.ConditionWorkersRestarting, metav1.ConditionTrue, constants.ReasonRayNodeLost, msg, obs.Now)
}

// setWorkersNotJoining reports the workers that stayed out of their cluster's GCS after kray restarted them,
// and removes the condition once none does.
func setWorkersNotJoining(st *rayv1.RayClusterStatus, obs Observed) {
	if len(obs.NotJoiningWorkers) == 0 {
		meta.RemoveStatusCondition(&st.Conditions, constants.ConditionWorkersNotJoining)
		return
	}
	msg := fmt.Sprintf("%d worker pods stayed out of the cluster's GCS after kray restarted them, and are restarted again only after a back-off: %s", len(obs.NotJoiningWorkers), strings.Join(obs.NotJoiningWorkers, ", "))
	set(st, constants.ConditionWorkersNotJoining, metav1.ConditionTrue, constants.ReasonRestartedWorkersNotJoining, msg, obs.Now)
}

// setSuspension runs KubeRay's suspend lifecycle and reports whether the cluster is (now) suspended.
func setSuspension(st *rayv1.RayClusterStatus, rc *rayv1.RayCluster, pods []corev1.Pod, now metav1.Time) bool {
	suspending, suspended := string(rayv1.RayClusterSuspending), string(rayv1.RayClusterSuspended)
	isSuspending := meta.IsStatusConditionTrue(st.Conditions, suspending)
	isSuspended := meta.IsStatusConditionTrue(st.Conditions, suspended)
	wanted := spec.ClusterSuspended(rc)
	switch {
	case isSuspending && len(pods) == 0:
		set(st, suspending, metav1.ConditionFalse, suspending, "", now)
		set(st, suspended, metav1.ConditionTrue, suspended, "", now)
		set(st, string(rayv1.RayClusterProvisioned), metav1.ConditionFalse, constants.ReasonPodsProvisioning, "RayCluster has been suspended", now)
		return true
	case isSuspending:
		return false
	case wanted && !isSuspended:
		set(st, suspending, metav1.ConditionTrue, suspending, "", now)
		set(st, suspended, metav1.ConditionFalse, suspended, "", now)
		if len(pods) == 0 {
			// Nothing to wait for: finish the suspension in the same pass.
			return setSuspension(st, rc, pods, now)
		}
		return false
	case wanted && isSuspended:
		return true
	default:
		set(st, suspending, metav1.ConditionFalse, suspending, "", now)
		set(st, suspended, metav1.ConditionFalse, suspended, "", now)
		return false
	}
}

// setProvisioned records the first time every pod is running and ready (allPodsUp); it stays True afterwards
// (a completed suspension resets it).
func setProvisioned(st *rayv1.RayClusterStatus, pods []corev1.Pod, now metav1.Time) {
	t := string(rayv1.RayClusterProvisioned)
	if meta.IsStatusConditionTrue(st.Conditions, t) || meta.IsStatusConditionTrue(st.Conditions, string(rayv1.RayClusterSuspended)) {
		return
	}
	if allPodsUp(st, pods) {
		set(st, t, metav1.ConditionTrue, constants.ReasonAllPodRunningAndReadyFirstTime, "All Ray Pods are ready for the first time", now)
		return
	}
	set(st, t, metav1.ConditionFalse, constants.ReasonPodsProvisioning, "RayCluster Pods are being provisioned for first time", now)
}

// setPodsScheduled reports, for a cluster whose pods go to a batch scheduler, the pods that wait for it:
// how many, and what the scheduler said of the first (by name) in its PodScheduled condition. The scheduler
// decides; kray only reports, and never deletes or recreates a waiting pod.
func setPodsScheduled(st *rayv1.RayClusterStatus, obs Observed) {
	if obs.BatchScheduler == "" {
		return
	}
	var waiting []*corev1.Pod
	live := 0
	for i := range obs.Pods {
		p := &obs.Pods[i]
		if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		live++
		if p.Spec.NodeName == "" {
			waiting = append(waiting, p)
		}
	}
	if len(waiting) == 0 {
		if live > 0 {
			set(st, constants.ConditionPodsScheduled, metav1.ConditionTrue, constants.ReasonAllPodsScheduled, "", obs.Now)
		}
		return
	}
	first := waiting[0]
	for _, p := range waiting[1:] {
		if p.Name < first.Name {
			first = p
		}
	}
	said := fmt.Sprintf("%s has not reported on them yet", obs.BatchScheduler)
	for _, c := range first.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			said = fmt.Sprintf("%s says of %s: %s: %s", obs.BatchScheduler, first.Name, c.Reason, c.Message)
		}
	}
	set(st, constants.ConditionPodsScheduled, metav1.ConditionFalse, constants.ReasonWaitingForScheduler,
		fmt.Sprintf("%d of %d pods wait for %s; %s", len(waiting), live, obs.BatchScheduler, said), obs.Now)
}
