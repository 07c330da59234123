package controller

import (
	"context"
	"fmt"
	"strings"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/builder"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/scale"
	"github.com/kray-project/kray/pkg/status"
)

// reconcileWorkerGroups creates, updates and scales one CloneSet per worker group, then deletes the
// CloneSets of groups removed from the spec (their pods go with them).
func (r *Reconciler) reconcileWorkerGroups(ctx context.Context, s *state) error {
	wanted := map[string]bool{}
	for i := range s.effective.Spec.WorkerGroupSpecs {
		group := &s.effective.Spec.WorkerGroupSpecs[i]
		desired := builder.WorkerCloneSet(s.effective, group, r.Options, s.rolloutHeld)
		wanted[desired.Name] = true
		live, err := r.reconcileWorkerGroup(ctx, s, group, desired)
		if err != nil {
			return fmt.Errorf("worker group %s: %w", group.GroupName, err)
		}
		if live != nil {
			s.holdRolloutUnless(status.CloneSetUpdated(live), live, desired)
		}
	}
	return r.deleteRemovedGroups(ctx, s, wanted)
}

// reconcileWorkerGroup creates or updates one group's CloneSet and returns it as read before kray's write
// (nil when it was just created).
func (r *Reconciler) reconcileWorkerGroup(ctx context.Context, s *state, group *rayv1.WorkerGroupSpec, desired *kruisev1alpha1.CloneSet) (*kruisev1alpha1.CloneSet, error) {
	live := &kruisev1alpha1.CloneSet{}
	err := r.Client.Get(ctx, client.ObjectKeyFromObject(desired), live)
	if apierrors.IsNotFound(err) {
		if err := ignoreAlreadyExists(r.Client.Create(ctx, desired)); err != nil {
			s.warn(constants.EventFailedToWriteWorkload, "Failed to create CloneSet %s for worker group %s: %v", desired.Name, group.GroupName, err)
			return nil, fmt.Errorf("create CloneSet %s: %w", desired.Name, err)
		}
		s.normal(constants.EventCreatedWorkerCloneSet, "Created CloneSet %s/%s for worker group %s with %d replicas", desired.Namespace, desired.Name, group.GroupName, ptr.Deref(desired.Spec.Replicas, 0))
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if !ownedBy(live, s.rc) {
		return nil, notOwnedError("CloneSet", live.Name)
	}
	observed := live.DeepCopy()
	if !cloneSetMayDiffer(live, desired, group) && !r.replicasNeedWork(ctx, s, group, live, desired) {
		return observed, nil
	}
	var plan scale.Plan
	var before int32
	changed, err := r.updateFresh(ctx, client.ObjectKeyFromObject(desired), live, func() (bool, error) {
		var err error
		before = ptr.Deref(live.Spec.Replicas, 0)
		plan, err = r.planScale(ctx, s, group, live, desired)
		if err != nil {
			return false, err
		}
		templateChanged := live.Annotations[constants.AnnotationSpecHash] != desired.Annotations[constants.AnnotationSpecHash]
		if !templateChanged && !plan.Changed(r.scaleInput(live, desired, group, nil, s.rc)) {
			return false, nil
		}
		if templateChanged {
			live.Spec.Template = desired.Spec.Template
			live.Spec.UpdateStrategy = desired.Spec.UpdateStrategy
			live.Spec.Lifecycle = desired.Spec.Lifecycle
			setAnnotation(live, constants.AnnotationSpecHash, desired.Annotations[constants.AnnotationSpecHash])
		}
		live.Spec.Replicas = ptr.To(plan.Replicas)
		live.Spec.ScaleStrategy.PodsToDelete = plan.PodsToDelete
		return true, nil
	})
	if len(plan.Ignored) > 0 {
		s.warn(constants.EventWorkersToDeleteIgnored, "Worker group %s: workersToDelete names that were not deleted: %s", group.GroupName, scale.Describe(plan.Ignored))
	}
	if err != nil {
		s.warn(constants.EventFailedToWriteWorkload, "Failed to update CloneSet %s for worker group %s: %v", desired.Name, group.GroupName, err)
		return observed, fmt.Errorf("update CloneSet %s: %w", desired.Name, err)
	}
	if !changed {
		return observed, nil
	}
	if len(plan.Named) > 0 {
		s.normal(constants.EventDeletedWorkerPod, "Worker group %s: asked CloneSet %s to delete pods %s", group.GroupName, desired.Name, strings.Join(plan.Named, ", "))
	}
	if len(plan.Replaced) > 0 {
		s.normal(constants.EventDeletedWorkerPod, "Worker group %s: a multi-host replica lost a host; asked CloneSet %s to replace its other hosts %s", group.GroupName, desired.Name, strings.Join(plan.Replaced, ", "))
	}
	if plan.Replicas != before {
		s.normal(constants.EventScaledWorkerGroup, "Worker group %s: CloneSet %s replicas %d -> %d", group.GroupName, desired.Name, before, plan.Replicas)
	}
	return observed, nil
}

// atomicHosts is the group's numOfHosts when replicas are kept whole (replica indexing on), else 1.
func (r *Reconciler) atomicHosts(group *rayv1.WorkerGroupSpec) int32 {
	if !r.ReplicaIndexing {
		return 1
	}
	return builder.NumOfHosts(group)
}

// replicasNeedWork is, for a group whose multi-host replicas kray keeps whole, the cache-based check that a
// replica lost a host or the group has pods to remove.
func (r *Reconciler) replicasNeedWork(ctx context.Context, s *state, group *rayv1.WorkerGroupSpec, live, desired *kruisev1alpha1.CloneSet) bool {
	hosts := r.atomicHosts(group)
	if hosts <= 1 {
		return false
	}
	pods := &corev1.PodList{}
	sel := client.MatchingLabels{constants.LabelCluster: s.rc.Name, constants.LabelNodeType: constants.NodeTypeWorker, constants.LabelGroup: group.GroupName}
	if err := r.Client.List(ctx, pods, client.InNamespace(s.rc.Namespace), sel); err != nil {
		return true // let the planner's fresh read decide
	}
	return scale.ReplicasNeedWork(pods.Items, live.UID, hosts, ptr.Deref(desired.Spec.Replicas, 0))
}

// cloneSetMayDiffer is the cheap, cache-based check that avoids a fresh read when nothing can change.
func cloneSetMayDiffer(live, desired *kruisev1alpha1.CloneSet, group *rayv1.WorkerGroupSpec) bool {
	return live.Annotations[constants.AnnotationSpecHash] != desired.Annotations[constants.AnnotationSpecHash] ||
		ptr.Deref(live.Spec.Replicas, -1) != ptr.Deref(desired.Spec.Replicas, 0) ||
		len(group.ScaleStrategy.WorkersToDelete) > 0 || len(live.Spec.ScaleStrategy.PodsToDelete) > 0
}

// planScale lists the group's pods from the API server (never the cache) when names are involved, and
// computes the CloneSet's replicas and podsToDelete.
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
	return scale.Compute(r.scaleInput(live, desired, group, pods, s.rc)), nil
}

func (r *Reconciler) scaleInput(live, desired *kruisev1alpha1.CloneSet, group *rayv1.WorkerGroupSpec, pods []corev1.Pod, rc *rayv1.RayCluster) scale.Input {
	return scale.Input{
		NumOfHosts:          r.atomicHosts(group),
		CloneSetUID:         live.UID,
		CurrentReplicas:     ptr.Deref(live.Spec.Replicas, 0),
		CurrentPodsToDelete: live.Spec.ScaleStrategy.PodsToDelete,
		DesiredReplicas:     ptr.Deref(desired.Spec.Replicas, 0),
		WorkersToDelete:     group.ScaleStrategy.WorkersToDelete,
		Pods:                pods,
		Autoscaling:         builder.AutoscalingEnabled(rc),
	}
}

// drainRemovedGroup reports whether a removed group's CloneSet may be deleted. With workerDrain set, it first
// scales the CloneSet to 0, so that its pods go through the drain hook, and waits until they are gone;
// deleting the CloneSet right away would delete them without a drain.
func (r *Reconciler) drainRemovedGroup(ctx context.Context, s *state, cs *kruisev1alpha1.CloneSet) (bool, error) {
	if s.rc.Spec.WorkerDrain == nil || builder.ClusterSuspended(s.effective) || cs.Spec.Lifecycle == nil || cs.Spec.Lifecycle.PreDelete == nil {
		return true, nil
	}
	group := cs.Labels[constants.LabelGroup]
	if ptr.Deref(cs.Spec.Replicas, 0) > 0 {
		_, err := r.updateFresh(ctx, client.ObjectKeyFromObject(cs), cs, func() (bool, error) {
			if ptr.Deref(cs.Spec.Replicas, 0) == 0 {
				return false, nil
			}
			cs.Spec.Replicas = ptr.To[int32](0)
			cs.Spec.ScaleStrategy.PodsToDelete = nil
			return true, nil
		})
		if err != nil {
			s.warn(constants.EventFailedToWriteWorkload, "Failed to scale CloneSet %s of removed worker group %s to 0: %v", cs.Name, group, err)
			return false, fmt.Errorf("scale CloneSet %s to 0: %w", cs.Name, err)
		}
		s.normal(constants.EventScaledWorkerGroup, "Worker group %s was removed from the spec: scaled CloneSet %s to 0 so that its workers drain before it is deleted", group, cs.Name)
		s.retryAfter(drainPoll)
		return false, nil
	}
	pods := &corev1.PodList{}
	if err := r.Client.List(ctx, pods, client.InNamespace(s.rc.Namespace), client.MatchingLabels{constants.LabelCluster: s.rc.Name, constants.LabelNodeType: constants.NodeTypeWorker, constants.LabelGroup: group}); err != nil {
		return false, fmt.Errorf("list pods of removed worker group %s: %w", group, err)
	}
	for i := range pods.Items {
		if pods.Items[i].DeletionTimestamp == nil {
			s.retryAfter(drainPoll)
			return false, nil
		}
	}
	return true, nil
}

// deleteRemovedGroups deletes the CloneSets this cluster owns whose group is no longer in the spec.
func (r *Reconciler) deleteRemovedGroups(ctx context.Context, s *state, wanted map[string]bool) error {
	list := &kruisev1alpha1.CloneSetList{}
	if err := r.Client.List(ctx, list, client.InNamespace(s.rc.Namespace), client.MatchingLabels{constants.LabelCluster: s.rc.Name}); err != nil {
		return fmt.Errorf("list CloneSets: %w", err)
	}
	for i := range list.Items {
		cs := &list.Items[i]
		if wanted[cs.Name] || !ownedBy(cs, s.rc) || cs.DeletionTimestamp != nil {
			continue
		}
		if drained, err := r.drainRemovedGroup(ctx, s, cs); err != nil || !drained {
			if err != nil {
				return err
			}
			continue
		}
		uid := cs.UID
		err := r.Client.Delete(ctx, cs, client.Preconditions{UID: &uid}, client.PropagationPolicy("Background"))
		if client.IgnoreNotFound(err) != nil {
			s.warn(constants.EventFailedToWriteWorkload, "Failed to delete CloneSet %s of a removed worker group: %v", cs.Name, err)
			return fmt.Errorf("delete CloneSet %s: %w", cs.Name, err)
		}
		s.normal(constants.EventDeletedWorkerCloneSet, "Deleted CloneSet %s/%s: worker group %s was removed from the spec", cs.Namespace, cs.Name, cs.Labels[constants.LabelGroup])
	}
	return nil
}
