package raycluster

import (
	"context"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/batchscheduler"
	"github.com/kray-project/kray/pkg/builder"
)

// reconcilePodGroup keeps the PodGroup a cluster's gang is scheduled by (scheduler-plugins' or Volcano's):
// created before the cluster's workloads, its size following the pods the cluster wants (scale changes,
// suspended groups), and deleted while the cluster is suspended. A PodGroup that KubeRay made for the cluster
// (owned by it, controlled by nothing) is adopted; any other of that name the cluster does not control is
// never adopted or changed: the workloads wait, and a Warning says whose it is.
func (r *Reconciler) reconcilePodGroup(ctx context.Context, s *state) error {
	name := s.options.Scheduling.PodGroupName(s.effective)
	if name == "" || s.options.Scheduling.Scheduler != r.BatchScheduler {
		// Only an operator running the cluster's scheduler reads and writes its kind of PodGroup.
		return nil
	}
	desired := builder.PodGroup(s.effective, s.options.Scheduling)
	key := types.NamespacedName{Namespace: s.rc.Namespace, Name: name}
	live := batchscheduler.EmptyPodGroup(s.options.Scheduling.Scheduler)
	err := r.Cache.Get(ctx, key, live)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("read PodGroup %s: %w", key.Name, err)
	}
	found := err == nil
	if desired == nil {
		if !found {
			return nil
		}
		return r.deleteUnwanted(ctx, s, live, "PodGroup", EventDeletedPodGroup, EventFailedToWritePodGroup, "the cluster's pods are not a gang now (suspended)")
	}
	members, resources := batchscheduler.PodGroupSize(desired)
	if !found {
		made, err := r.create(ctx, desired)
		if err != nil {
			s.warn(EventFailedToWritePodGroup, "Failed to create PodGroup %s/%s: %v", key.Namespace, key.Name, err)
			return fmt.Errorf("create PodGroup %s: %w", key.Name, err)
		}
		if made {
			s.normal(EventCreatedPodGroup, "Created PodGroup %s/%s of %d pods", key.Namespace, key.Name, members)
			return nil
		}
		// It exists, and the cache (which holds only PodGroups labelled with a cluster) does not show it.
		if err := r.APIReader.Get(ctx, key, live); err != nil {
			return fmt.Errorf("read PodGroup %s, whose create found it existing: %w", key.Name, err)
		}
	}
	switch {
	case ownedBy(live, s.rc):
	case madeForCluster(live, s.rc):
		if err := r.adoptPodGroup(ctx, live, desired, s); err != nil {
			s.warn(EventFailedToWritePodGroup, "Failed to adopt PodGroup %s/%s: %v", key.Namespace, key.Name, err)
			return fmt.Errorf("adopt PodGroup %s: %w", key.Name, err)
		}
		s.normal(EventUpdatedPodGroup, "Adopted PodGroup %s/%s, which KubeRay made for this RayCluster", key.Namespace, key.Name)
	default:
		s.warn(EventFailedToWritePodGroup, "PodGroup %s/%s exists and is not controlled by this RayCluster: kray neither uses nor changes it, and the cluster's pods wait for it", key.Namespace, key.Name)
		return notOwnedError("PodGroup", key.Name)
	}
	liveMembers, liveResources := batchscheduler.PodGroupSize(live)
	if liveMembers == members && equality.Semantic.DeepEqual(liveResources, resources) {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"minMember": members, "minResources": resources}})
	if err != nil {
		return err
	}
	if err := r.Writer.Patch(ctx, live, client.RawPatch(types.MergePatchType, patch)); err != nil {
		s.warn(EventFailedToWritePodGroup, "Failed to update PodGroup %s/%s: %v", key.Namespace, key.Name, err)
		return fmt.Errorf("update PodGroup %s: %w", key.Name, err)
	}
	s.normal(EventUpdatedPodGroup, "Updated PodGroup %s/%s: %d pods (was %d)", key.Namespace, key.Name, members, liveMembers)
	return nil
}

// madeForCluster reports whether obj, controlled by nothing, names rc (by UID) among its owners: a PodGroup
// KubeRay made for the cluster (its owner reference is not a controller's).
func madeForCluster(obj metav1.Object, rc *rayv1.RayCluster) bool {
	if metav1.GetControllerOfNoCopy(obj) != nil {
		return false
	}
	for _, ref := range obj.GetOwnerReferences() {
		if ref.UID == rc.UID && ref.Kind == "RayCluster" {
			return true
		}
	}
	return false
}

// adoptPodGroup makes rc the controller of live, a PodGroup made for it, and gives it desired's labels so that
// the operator's cache holds it; the write fails if live changed since it was read.
func (r *Reconciler) adoptPodGroup(ctx context.Context, live, desired client.Object, s *state) error {
	adopted := live.DeepCopyObject().(client.Object)
	refs := adopted.GetOwnerReferences()
	for i := range refs {
		if refs[i].UID == s.rc.UID {
			refs[i].Controller, refs[i].BlockOwnerDeletion = ptr.To(true), ptr.To(true)
		}
	}
	adopted.SetOwnerReferences(refs)
	labels := adopted.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	for k, v := range desired.GetLabels() {
		labels[k] = v
	}
	adopted.SetLabels(labels)
	if err := r.Writer.Patch(ctx, adopted, client.MergeFromWithOptions(live, client.MergeFromWithOptimisticLock{})); err != nil {
		return err
	}
	live.SetOwnerReferences(adopted.GetOwnerReferences())
	live.SetLabels(adopted.GetLabels())
	live.SetResourceVersion(adopted.GetResourceVersion())
	return nil
}
