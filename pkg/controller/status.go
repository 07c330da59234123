package controller

import (
	"context"
	"errors"
	"fmt"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	kruisev1beta1 "github.com/openkruise/kruise-api/apps/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/builder"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/metrics"
	"github.com/kray-project/kray/pkg/names"
	"github.com/kray-project/kray/pkg/status"
)

// errStatusConflict reports that the status write lost a race; the reconcile is requeued because a status-only
// change of the RayCluster (its own write included) does not trigger one.
var errStatusConflict = errors.New("status write conflict")

// writeStatus observes the cluster's pods and workloads from the cache, computes the status and writes it
// only if it changed. Events about status transitions are queued for emission after the write.
func (r *Reconciler) writeStatus(ctx context.Context, s *state, obs status.Observed) error {
	rc := s.rc
	if err := r.observe(ctx, rc, &obs); err != nil {
		return fmt.Errorf("observe: %w", err)
	}
	obs.Now = r.now()
	updated := status.Compute(rc, obs)
	metrics.ObserveCluster(rc.Namespace, rc.Name, string(updated.State), len(obs.Pods))
	if !status.NeedsWrite(rc.Status, updated) {
		return nil
	}
	transitions(s, rc.Status, updated)
	cp := rc.DeepCopy()
	cp.Status = updated
	if err := r.Client.Status().Update(ctx, cp); err != nil {
		if apierrors.IsConflict(err) {
			return errStatusConflict
		}
		return fmt.Errorf("write status: %w", err)
	}
	if updated.State == rayv1.Ready && rc.Status.StateTransitionTimes[rayv1.Ready] == nil {
		metrics.ObserveFirstReady(obs.Now.Sub(rc.CreationTimestamp.Time))
	}
	return nil
}

func (r *Reconciler) observe(ctx context.Context, rc *rayv1.RayCluster, obs *status.Observed) error {
	inCluster := []client.ListOption{client.InNamespace(rc.Namespace), client.MatchingLabels{constants.LabelCluster: rc.Name}}
	pods := &corev1.PodList{}
	if err := r.Client.List(ctx, pods, inCluster...); err != nil {
		return err
	}
	obs.Pods = pods.Items
	svc := &corev1.Service{}
	switch err := r.Client.Get(ctx, client.ObjectKey{Namespace: rc.Namespace, Name: builder.HeadServiceName(rc)}, svc); {
	case err == nil:
		obs.HeadService = svc
	case !apierrors.IsNotFound(err):
		return err
	}
	sts := &kruisev1beta1.StatefulSet{}
	switch err := r.Client.Get(ctx, client.ObjectKey{Namespace: rc.Namespace, Name: names.HeadStatefulSet(rc.Name)}, sts); {
	case err == nil:
		obs.HeadSet = sts
	case !apierrors.IsNotFound(err):
		return err
	}
	sets := &kruisev1alpha1.CloneSetList{}
	if err := r.Client.List(ctx, sets, inCluster...); err != nil {
		return err
	}
	obs.CloneSets = sets.Items
	return nil
}

// transitions queues events for condition changes users should see in `kubectl describe`.
func transitions(s *state, old, updated rayv1.RayClusterStatus) {
	failure := string(rayv1.RayClusterReplicaFailure)
	if c := meta.FindStatusCondition(updated.Conditions, failure); c != nil && c.Status == "True" && !meta.IsStatusConditionTrue(old.Conditions, failure) {
		reason := constants.EventFailedCreateWorkerPod
		if c.Reason == constants.ReasonFailedCreateHeadPod {
			reason = constants.EventFailedCreateHeadPod
		}
		s.warn(reason, "%s", c.Message)
	}
	suspended := string(rayv1.RayClusterSuspended)
	if meta.IsStatusConditionTrue(updated.Conditions, string(rayv1.RayClusterSuspending)) && !meta.IsStatusConditionTrue(old.Conditions, string(rayv1.RayClusterSuspending)) {
		s.normal(constants.EventSuspending, "Suspending: scaling the head StatefulSet and every worker CloneSet to 0")
	}
	if meta.IsStatusConditionTrue(updated.Conditions, suspended) && !meta.IsStatusConditionTrue(old.Conditions, suspended) {
		s.normal(constants.EventSuspended, "Suspended: all Ray pods are gone")
	}
}
