package controller

import (
	"context"
	"errors"
	"fmt"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kray-project/kray/pkg/builder"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/names"
	"github.com/kray-project/kray/pkg/scale"
)

// reconcileReplicaLabels labels new worker pods with their replica index, and the hosts of a multi-host
// replica with its shared name and their host index (KubeRay's RayMultiHostIndexing). Kruise creates pods
// from one template, so kray adds these labels right after creation. A group is re-read from the API server
// before labelling, so an index is never handed out twice from a stale cache.
func (r *Reconciler) reconcileReplicaLabels(ctx context.Context, s *state) error {
	if !r.ReplicaIndexing {
		return nil
	}
	var errs []error
	for i := range s.effective.Spec.WorkerGroupSpecs {
		group := &s.effective.Spec.WorkerGroupSpecs[i]
		sel := client.MatchingLabels{constants.LabelCluster: s.rc.Name, constants.LabelNodeType: constants.NodeTypeWorker, constants.LabelGroup: group.GroupName}
		cached := &corev1.PodList{}
		if err := r.Client.List(ctx, cached, client.InNamespace(s.rc.Namespace), sel); err != nil {
			return fmt.Errorf("list pods of worker group %s: %w", group.GroupName, err)
		}
		if !anyUnlabeled(cached.Items) {
			continue
		}
		cs := &kruisev1alpha1.CloneSet{}
		if err := r.Client.Get(ctx, types.NamespacedName{Namespace: s.rc.Namespace, Name: names.WorkerCloneSet(s.rc.Name, group.GroupName)}, cs); err != nil {
			if apierrors.IsNotFound(err) {
				continue // its pods are labelled once the CloneSet that owns them is in the cache
			}
			return fmt.Errorf("get CloneSet of worker group %s: %w", group.GroupName, err)
		}
		fresh := &corev1.PodList{}
		if err := r.APIReader.List(ctx, fresh, client.InNamespace(s.rc.Namespace), sel); err != nil {
			return fmt.Errorf("list pods of worker group %s: %w", group.GroupName, err)
		}
		for pod, labels := range scale.ReplicaLabels(fresh.Items, cs.UID, group.GroupName, builder.NumOfHosts(group)) {
			meta := podMeta{Labels: map[string]*string{}}
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

// reconcileHeadlessWorkerService creates, once, the headless Service through which the hosts of multi-host
// replicas reach each other, when some group has numOfHosts above 1.
func (r *Reconciler) reconcileHeadlessWorkerService(ctx context.Context, s *state) error {
	svc := builder.HeadlessWorkerService(s.rc)
	if svc == nil {
		return nil
	}
	return r.createOnce(ctx, s, svc, &corev1.Service{}, constants.EventCreatedService, constants.EventFailedToCreateService)
}
