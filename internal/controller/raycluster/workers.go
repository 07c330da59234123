package raycluster

import (
	"context"
	"errors"
	"fmt"
	"strings"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/builder"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/names"
	"github.com/kray-project/kray/pkg/scale"
	"github.com/kray-project/kray/pkg/spec"
	"github.com/kray-project/kray/pkg/status"
)

// reconcileWorkerGroups creates, updates and scales one CloneSet per worker group, then deletes the
// CloneSets of groups removed from the spec (their pods go with them). No group updates before the head
// StatefulSet did: a head phase that failed or was skipped holds a RollingUpdate.
func (r *Reconciler) reconcileWorkerGroups(ctx context.Context, s *state) error {
	if s.failed[phaseHeadStatefulSet] {
		s.holdRollout()
	}
	if s.isNew() {
		return r.createWorkerGroups(ctx, s)
	}
	wanted := map[string]bool{}
	var errs []error
	for i := range s.effective.Spec.WorkerGroupSpecs {
		group := &s.effective.Spec.WorkerGroupSpecs[i]
		live := s.children.cloneSet(names.WorkerCloneSet(s.rc.Name, group.GroupName))
		pulling, err := r.pullsFirst(ctx, s, group)
		if err != nil {
			errs = append(errs, fmt.Errorf("worker group %s: %w", group.GroupName, err))
		}
		if pulling {
			s.announcePull(group, live)
			s.retryAfter(imagePoll)
		}
		desired := r.desiredCloneSet(s, group, live, pulling)
		wanted[desired.Name] = true
		if live != nil {
			s.holdRolloutUnless(status.CloneSetUpdated(live), live, desired)
		}
		if err := r.reconcileWorkerGroup(ctx, s, group, live, desired); err != nil {
			errs = append(errs, fmt.Errorf("worker group %s: %w", group.GroupName, err))
		}
	}
	errs = append(errs, r.deleteRemovedGroups(ctx, s, wanted))
	return errors.Join(errs...)
}

// createWorkerGroups creates a new cluster's CloneSets at once.
func (r *Reconciler) createWorkerGroups(ctx context.Context, s *state) error {
	groups := s.effective.Spec.WorkerGroupSpecs
	errs := s.inCopies(len(groups), func(i int, own *state) error {
		group := &groups[i]
		if err := r.reconcileWorkerGroup(ctx, own, group, nil, r.desiredCloneSet(own, group, nil, false)); err != nil {
			return fmt.Errorf("worker group %s: %w", group.GroupName, err)
		}
		return nil
	})
	return errors.Join(errs...)
}

// desiredCloneSet is the CloneSet kray wants for group, given its live one (nil when missing). A held
// RollingUpdate (an earlier group still updating, or this group's new image still being pulled: pulling)
// pauses only a group that has pods to update: one whose CloneSet is missing (its pods will be new) or already
// runs the group's current spec unpaused is left as it is, so that creating a cluster or a restart of an
// earlier group's pod writes nothing to it.
func (r *Reconciler) desiredCloneSet(s *state, group *rayv1.WorkerGroupSpec, live *kruisev1alpha1.CloneSet, pulling bool) *kruisev1alpha1.CloneSet {
	free := builder.WorkerCloneSet(s.effective, group, s.options, false)
	if !(s.rolloutHeld || pulling) || live == nil || live.Annotations[constants.AnnotationSpecHash] == free.Annotations[constants.AnnotationSpecHash] {
		return free
	}
	return builder.WorkerCloneSet(s.effective, group, s.options, true)
}

// reconcileWorkerGroup creates the group's CloneSet when live is nil, else updates its template, replicas
// and podsToDelete when they differ from desired.
func (r *Reconciler) reconcileWorkerGroup(ctx context.Context, s *state, group *rayv1.WorkerGroupSpec, live, desired *kruisev1alpha1.CloneSet) error {
	if live == nil {
		created, err := r.create(ctx, desired)
		if err != nil {
			s.warn(EventFailedToWriteWorkload, "Failed to create CloneSet %s for worker group %s: %v", desired.Name, group.GroupName, err)
			return fmt.Errorf("create CloneSet %s: %w", desired.Name, err)
		}
		if created {
			s.normal(EventCreatedWorkerCloneSet, "Created CloneSet %s/%s for worker group %s with %d replicas", desired.Namespace, desired.Name, group.GroupName, ptr.Deref(desired.Spec.Replicas, 0))
		}
		return nil
	}
	if !ownedBy(live, s.rc) {
		return notOwnedError("CloneSet", live.Name)
	}
	if !cloneSetMayDiffer(live, desired, group) && !r.replicasNeedWork(s, group, live, desired) {
		return nil
	}
	var plan scale.Plan
	var before int32
	fresh := &kruisev1alpha1.CloneSet{}
	changed, err := r.updateFresh(ctx, client.ObjectKeyFromObject(desired), fresh, func() (bool, error) {
		var err error
		before = ptr.Deref(fresh.Spec.Replicas, 0)
		plan, err = r.planScale(ctx, s, group, fresh, desired)
		if err != nil {
			return false, err
		}
		templateChanged := fresh.Annotations[constants.AnnotationSpecHash] != desired.Annotations[constants.AnnotationSpecHash]
		if !templateChanged && !plan.Changed(r.scaleInput(s, fresh, desired, group, nil)) {
			return false, nil
		}
		if templateChanged {
			fresh.Spec.Template = desired.Spec.Template
			fresh.Spec.UpdateStrategy = desired.Spec.UpdateStrategy
			fresh.Spec.Lifecycle = desired.Spec.Lifecycle
			setSpecHash(fresh, desired)
		}
		fresh.Spec.Replicas = ptr.To(plan.Replicas)
		fresh.Spec.ScaleStrategy.PodsToDelete = plan.PodsToDelete
		return true, nil
	})
	if len(plan.Ignored) > 0 {
		s.warn(EventWorkersToDeleteIgnored, "Worker group %s: workersToDelete names that were not deleted: %s", group.GroupName, scale.Describe(plan.Ignored))
	}
	if err != nil {
		s.warn(EventFailedToWriteWorkload, "Failed to update CloneSet %s for worker group %s: %v", desired.Name, group.GroupName, err)
		return fmt.Errorf("update CloneSet %s: %w", desired.Name, err)
	}
	if !changed {
		return nil
	}
	if len(plan.Named) > 0 {
		s.normal(EventDeletedWorkerPod, "Worker group %s: asked CloneSet %s to delete pods %s", group.GroupName, desired.Name, strings.Join(plan.Named, ", "))
	}
	if len(plan.Replaced) > 0 {
		s.normal(EventDeletedWorkerPod, "Worker group %s: a multi-host replica lost a host; asked CloneSet %s to replace its other hosts %s", group.GroupName, desired.Name, strings.Join(plan.Replaced, ", "))
	}
	if plan.Replicas != before {
		s.normal(EventScaledWorkerGroup, "Worker group %s: CloneSet %s replicas %d -> %d", group.GroupName, desired.Name, before, plan.Replicas)
	}
	return nil
}

// atomicHosts is the number of pods kray keeps together as one replica: the group's numOfHosts (a
// single-host group's replicas are single pods).
func (r *Reconciler) atomicHosts(group *rayv1.WorkerGroupSpec) int32 {
	return spec.NumOfHosts(group)
}

// replicasNeedWork is, for a group whose multi-host replicas kray keeps whole, the cache-based check that a
// replica lost a host or the group has pods to remove.
func (r *Reconciler) replicasNeedWork(s *state, group *rayv1.WorkerGroupSpec, live, desired *kruisev1alpha1.CloneSet) bool {
	hosts := r.atomicHosts(group)
	if hosts <= 1 {
		return false
	}
	return scale.ReplicasNeedWork(s.children.groupPods(s.effective, group.GroupName), live.UID, hosts, ptr.Deref(desired.Spec.Replicas, 0))
}

// cloneSetMayDiffer is the cheap, cache-based check that avoids a fresh read when nothing can change.
func cloneSetMayDiffer(live, desired *kruisev1alpha1.CloneSet, group *rayv1.WorkerGroupSpec) bool {
	return live.Annotations[constants.AnnotationSpecHash] != desired.Annotations[constants.AnnotationSpecHash] ||
		ptr.Deref(live.Spec.Replicas, -1) != ptr.Deref(desired.Spec.Replicas, 0) ||
		len(group.ScaleStrategy.WorkersToDelete) > 0 || len(live.Spec.ScaleStrategy.PodsToDelete) > 0
}

// planScale computes the CloneSet's replicas and podsToDelete. When pods are named (by the autoscaler, or to
// keep multi-host replicas whole), it lists the cluster's pods from the API server, never the cache: a
// stale list could name a pod that is already gone, or miss one that was just created.
func (r *Reconciler) planScale(ctx context.Context, s *state, group *rayv1.WorkerGroupSpec, live, desired *kruisev1alpha1.CloneSet) (scale.Plan, error) {
	var pods []corev1.Pod
	if len(group.ScaleStrategy.WorkersToDelete) > 0 || len(live.Spec.ScaleStrategy.PodsToDelete) > 0 || r.atomicHosts(group) > 1 {
		list := &corev1.PodList{}
		sel := client.MatchingLabels{constants.LabelCluster: s.rc.Name}
		if err := r.APIReader.List(ctx, list, client.InNamespace(s.rc.Namespace), sel); err != nil {
			return scale.Plan{}, fmt.Errorf("list pods of cluster for worker group %s: %w", group.GroupName, err)
		}
		pods = list.Items
	}
	return scale.Compute(r.scaleInput(s, live, desired, group, pods)), nil
}

// scaleInput is the planner's input for one group's CloneSet.
func (r *Reconciler) scaleInput(s *state, live, desired *kruisev1alpha1.CloneSet, group *rayv1.WorkerGroupSpec, pods []corev1.Pod) scale.Input {
	return scale.Input{
		NumOfHosts:          r.atomicHosts(group),
		CloneSetUID:         live.UID,
		CurrentReplicas:     ptr.Deref(live.Spec.Replicas, 0),
		CurrentPodsToDelete: live.Spec.ScaleStrategy.PodsToDelete,
		DesiredReplicas:     ptr.Deref(desired.Spec.Replicas, 0),
		WorkersToDelete:     group.ScaleStrategy.WorkersToDelete,
		Pods:                pods,
		Autoscaling:         spec.AutoscalingEnabled(s.effective),
	}
}

// drainRemovedGroup reports whether a removed group's CloneSet may be deleted. With workerDrain set, it first
// scales the CloneSet to 0, so that its pods go through the drain hook, and waits until they are gone;
// deleting the CloneSet right away would delete them without a drain.
func (r *Reconciler) drainRemovedGroup(ctx context.Context, s *state, cs *kruisev1alpha1.CloneSet) (bool, error) {
	if s.effective.Spec.WorkerDrain == nil || spec.ClusterSuspended(s.effective) || cs.Spec.Lifecycle == nil || cs.Spec.Lifecycle.PreDelete == nil {
		return true, nil
	}
	group := cs.Labels[constants.LabelGroup]
	if ptr.Deref(cs.Spec.Replicas, 0) > 0 {
		fresh := &kruisev1alpha1.CloneSet{}
		changed, err := r.updateFresh(ctx, client.ObjectKeyFromObject(cs), fresh, func() (bool, error) {
			if ptr.Deref(fresh.Spec.Replicas, 0) == 0 {
				return false, nil
			}
			fresh.Spec.Replicas = ptr.To[int32](0)
			fresh.Spec.ScaleStrategy.PodsToDelete = nil
			return true, nil
		})
		if err != nil {
			s.warn(EventFailedToWriteWorkload, "Failed to scale CloneSet %s of removed worker group %s to 0: %v", cs.Name, group, err)
			return false, fmt.Errorf("scale CloneSet %s to 0: %w", cs.Name, err)
		}
		if changed {
			s.normal(EventScaledWorkerGroup, "Worker group %s was removed from the spec: scaled CloneSet %s to 0 so that its workers drain before it is deleted", group, cs.Name)
		}
		s.retryAfter(drainPoll)
		return false, nil
	}
	for _, p := range s.children.groupPods(s.effective, group) {
		if p.DeletionTimestamp == nil {
			s.retryAfter(drainPoll)
			return false, nil
		}
	}
	return true, nil
}

// deleteRemovedGroups deletes the CloneSets this cluster owns whose group is no longer in the spec.
func (r *Reconciler) deleteRemovedGroups(ctx context.Context, s *state, wanted map[string]bool) error {
	var errs []error
	for i := range s.children.cloneSets {
		cs := &s.children.cloneSets[i]
		if wanted[cs.Name] || !ownedBy(cs, s.rc) || cs.DeletionTimestamp != nil {
			continue
		}
		switch drained, err := r.drainRemovedGroup(ctx, s, cs); {
		case err != nil:
			errs = append(errs, err)
			continue
		case !drained:
			continue
		}
		uid := cs.UID
		err := r.Writer.Delete(ctx, cs.DeepCopy(), client.Preconditions{UID: &uid}, client.PropagationPolicy(metav1.DeletePropagationBackground))
		if client.IgnoreNotFound(err) != nil {
			s.warn(EventFailedToWriteWorkload, "Failed to delete CloneSet %s of a removed worker group: %v", cs.Name, err)
			errs = append(errs, fmt.Errorf("delete CloneSet %s: %w", cs.Name, err))
			continue
		}
		if err == nil {
			s.normal(EventDeletedWorkerCloneSet, "Deleted CloneSet %s/%s: worker group %s was removed from the spec", cs.Namespace, cs.Name, cs.Labels[constants.LabelGroup])
		}
	}
	return errors.Join(errs...)
}
