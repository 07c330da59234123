package raycluster

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kray-project/kray/internal/controller/shared"
	"github.com/kray-project/kray/pkg/builder"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/names"
	"github.com/kray-project/kray/pkg/scale"
	"github.com/kray-project/kray/pkg/spec"
)

// reconcileReplicaLabels labels the hosts of a multi-host replica with its shared name, its index and their
// host index, which keep the replica whole, and, with ReplicaIndexing (KubeRay's RayMultiHostIndexing), the
// workers of single-host groups with their replica index. Kruise creates pods from one template, so kray
// adds these labels right after creation: one pod PATCH each. A group with an unlabelled pod in the cache is
// listed again from the API server before labelling, so an index is never handed out twice from a stale view.
func (r *Reconciler) reconcileReplicaLabels(ctx context.Context, s *state) error {
	var errs []error
	for i := range s.effective.Spec.WorkerGroupSpecs {
		group := &s.effective.Spec.WorkerGroupSpecs[i]
		if spec.NumOfHosts(group) == 1 && !r.ReplicaIndexing {
			continue
		}
		if !anyUnlabeled(s.children.groupPods(s.effective, group.GroupName)) {
			continue
		}
		cs := s.children.cloneSet(names.WorkerCloneSet(s.rc.Name, group.GroupName))
		if cs == nil {
			continue // its pods are labelled once the CloneSet that owns them is in the cache
		}
		fresh := &corev1.PodList{}
		sel := client.MatchingLabels(builder.WorkerSelector(s.effective, group.GroupName))
		if err := r.APIReader.List(ctx, fresh, client.InNamespace(s.rc.Namespace), sel); err != nil {
			errs = append(errs, fmt.Errorf("list pods of worker group %s: %w", group.GroupName, err))
			continue
		}
		for pod, labels := range scale.ReplicaLabels(fresh.Items, cs.UID, group.GroupName, spec.NumOfHosts(group)) {
			meta := shared.Meta{Labels: map[string]*string{}}
			for k, v := range labels {
				meta.Labels[k] = ptr.To(v)
			}
			if err := r.patchPodMeta(ctx, s.rc.Namespace, pod, meta); err != nil {
				errs = append(errs, fmt.Errorf("label pod %s with its replica: %w", pod, err))
			}
		}
	}
	return errors.Join(errs...)
}

// anyUnlabeled reports whether a live pod of the list has no replica index yet.
func anyUnlabeled(pods []corev1.Pod) bool {
	for i := range pods {
		if pods[i].DeletionTimestamp == nil && !scale.IsDead(&pods[i]) && pods[i].Labels[constants.LabelReplicaIndex] == "" {
			return true
		}
	}
	return false
}
