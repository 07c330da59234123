package raycluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kray-project/kray/pkg/builder"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/membership"
	"github.com/kray-project/kray/pkg/metrics"
	"github.com/kray-project/kray/pkg/scale"
	"github.com/kray-project/kray/pkg/spec"
)

// restartPoll is how often a worker restart in progress is looked at again.
const restartPoll = 2 * time.Second

// reconcileWorkerMembership restarts the worker pods of a running cluster whose Ray node its current GCS does
// not list (membership.Plan): in place, through a Kruise ContainerRecreateRequest (same pod, node, IP,
// volumes and devices), or, when the request is refused or does not finish within its deadline (a node
// without kruise-daemon), by naming the pod in its CloneSet's podsToDelete so that Kruise replaces it. One
// restart per run of a pod's Ray container, whichever operator instance asks. The GCS is asked only when a
// worker's membership is in doubt; a GCS that does not answer decides nothing.
func (r *Reconciler) reconcileWorkerMembership(ctx context.Context, s *state) error {
	if r.Ray == nil || !spec.WorkerHealing(s.effective) || spec.ClusterSuspended(s.effective) {
		return nil
	}
	now := r.now().Time
	check := membership.Plan(s.workerPods(), membership.HeadOf(s.headPod(), spec.FTEnabled(s.effective)), now, r.healGrace())
	if !check.Later.IsZero() {
		s.retryAfter(check.Later.Sub(now))
	}
	if len(check.Due) == 0 {
		return nil
	}
	nodes, err := r.openGCS(ctx, s).Nodes(ctx)
	if err != nil {
		return nil // nothing is known of the cluster's membership; the breaker and the drains report the GCS
	}
	var errs []error
	for _, rs := range check.Decide(nodes) {
		errs = append(errs, r.restartWorker(ctx, s, rs))
	}
	return errors.Join(errs...)
}

// healGrace is the grace of membership.Plan.
func (r *Reconciler) healGrace() time.Duration {
	if r.HealGrace > 0 {
		return r.HealGrace
	}
	return membership.DefaultGrace
}

// restartWorker restarts one worker's Ray container in place, or has Kruise replace the pod when the restart
// cannot happen, and follows the restart until it is done.
func (r *Reconciler) restartWorker(ctx context.Context, s *state, rs membership.Restart) error {
	p := rs.Worker.Pod
	if p.Annotations[constants.AnnotationRestartPolicy] == string(corev1.RestartPolicyNever) {
		// A restarted container is an exit under Never (scale.ExitedUnderNever): the pod is replaced instead.
		return r.replaceWorker(ctx, s, rs, "its template asks for restartPolicy Never, under which a new pod replaces an ended one")
	}
	crr := builder.WorkerRestart(s.rc, p, rs.Worker.Run, string(rs.Reason))
	switch err := r.Writer.Create(ctx, crr); {
	case err == nil:
		metrics.WorkerRestarted(string(rs.Reason), metrics.RestartInPlace)
		s.normal(EventRestartedWorker, "Worker pod %s: restarting its Ray container in place: %s", p.Name, reasonText(rs.Reason))
		s.restarting = append(s.restarting, p.Name)
		s.retryAfter(restartPoll)
		return nil
	case apierrors.IsAlreadyExists(err):
	case rejection(err):
		return r.replaceWorker(ctx, s, rs, fmt.Sprintf("the in-place restart was refused: %v", err))
	default:
		s.warn(EventFailedToRestartWorker, "Worker pod %s: failed to ask for the restart of its Ray container: %v", p.Name, err)
		return fmt.Errorf("create ContainerRecreateRequest %s: %w", crr.Name, err)
	}
	live := &kruisev1alpha1.ContainerRecreateRequest{}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(crr), live); err != nil {
		return client.IgnoreNotFound(err) // gone after its TTL: the run it restarted is over
	}
	if !ownedBy(live, s.rc) {
		return notOwnedError("ContainerRecreateRequest", live.Name)
	}
	switch why := restartFailed(live, r.now().Time); {
	case why != "":
		return r.replaceWorker(ctx, s, rs, why)
	case live.Status.Phase != kruisev1alpha1.ContainerRecreateRequestCompleted:
		s.restarting = append(s.restarting, p.Name)
		s.retryAfter(restartPoll)
	}
	return nil
}

// restartFailed says why a worker restart will not restart the container: Kruise completed it without
// recreating the container, or it is past its deadline (no kruise-daemon took it). Empty while it runs, or
// once it succeeded.
func restartFailed(crr *kruisev1alpha1.ContainerRecreateRequest, now time.Time) string {
	if crr.Status.Phase == kruisev1alpha1.ContainerRecreateRequestCompleted {
		for _, c := range crr.Status.ContainerRecreateStates {
			if c.Phase != kruisev1alpha1.ContainerRecreateRequestSucceeded {
				return fmt.Sprintf("the in-place restart %s ended %s: %s %s", crr.Name, c.Phase, c.Message, crr.Status.Message)
			}
		}
		if len(crr.Status.ContainerRecreateStates) == 0 && crr.Status.Message != "" {
			return fmt.Sprintf("the in-place restart %s ended without a restart: %s", crr.Name, crr.Status.Message)
		}
		return ""
	}
	deadline := crr.CreationTimestamp.Add(time.Duration(builder.WorkerRestartDeadlineSeconds)*time.Second + restartGrace)
	if !crr.CreationTimestamp.IsZero() && !now.Before(deadline) {
		return fmt.Sprintf("the in-place restart %s did not finish within %ds (phase %q): no kruise-daemon runs on the pod's node", crr.Name, builder.WorkerRestartDeadlineSeconds, crr.Status.Phase)
	}
	return ""
}

// restartGrace is how long after a restart's deadline kray waits for Kruise to complete it, before it
// replaces the pod itself.
const restartGrace = 10 * time.Second

// replaceWorker names the pod in its CloneSet's podsToDelete with its replicas unchanged, so that Kruise
// replaces it with a new pod: the restart kray could not make in place.
func (r *Reconciler) replaceWorker(ctx context.Context, s *state, rs membership.Restart, why string) error {
	p := rs.Worker.Pod
	ref := metav1.GetControllerOf(p)
	var cs *kruisev1alpha1.CloneSet
	for i := range s.children.cloneSets {
		if c := &s.children.cloneSets[i]; ref != nil && c.UID == ref.UID && ownedBy(c, s.rc) {
			cs = c
		}
	}
	if cs == nil {
		return nil // a pod of no CloneSet of this cluster's: never named
	}
	fresh := &kruisev1alpha1.CloneSet{}
	changed, err := r.updateFresh(ctx, client.ObjectKeyFromObject(cs), fresh, func() (bool, error) {
		if fresh.UID != cs.UID || slices.Contains(fresh.Spec.ScaleStrategy.PodsToDelete, p.Name) {
			return false, nil
		}
		fresh.Spec.ScaleStrategy.PodsToDelete = append(fresh.Spec.ScaleStrategy.PodsToDelete, p.Name)
		return true, nil
	})
	if err != nil {
		s.warn(EventFailedToRestartWorker, "Worker pod %s: failed to ask CloneSet %s to replace it: %v", p.Name, cs.Name, err)
		return fmt.Errorf("name pod %s in CloneSet %s podsToDelete: %w", p.Name, cs.Name, err)
	}
	s.restarting = append(s.restarting, p.Name)
	if changed {
		metrics.WorkerRestarted(string(rs.Reason), metrics.RestartReplaced)
		s.normal(EventRestartedWorker, "Worker pod %s: asked CloneSet %s to replace it (%s), since %s", p.Name, cs.Name, reasonText(rs.Reason), why)
	}
	return nil
}

// reasonText explains a restart reason in an event.
func reasonText(reason membership.Reason) string {
	switch reason {
	case membership.ReasonHeadReplaced:
		return "its Ray node belonged to a GCS that is gone (the head was replaced without GCS fault tolerance), and Ray would end it only after gcs_rpc_server_reconnect_timeout_s"
	case membership.ReasonNotInGCS:
		return "it has not been ready for the grace period and the cluster's GCS lists no live Ray node for it"
	}
	return string(reason)
}

// workerPods are the cluster's worker pods that one of its own CloneSets controls.
func (s *state) workerPods() []*corev1.Pod {
	var uids []metav1.Object
	for i := range s.children.cloneSets {
		if ownedBy(&s.children.cloneSets[i], s.rc) {
			uids = append(uids, &s.children.cloneSets[i])
		}
	}
	var out []*corev1.Pod
	for i := range s.children.pods {
		p := &s.children.pods[i]
		if slices.ContainsFunc(uids, func(w metav1.Object) bool { return scale.IsControlledBy(p, w.GetUID()) }) {
			out = append(out, p)
		}
	}
	return out
}

// headPod is the cluster's head pod that its StatefulSet controls and that is not going, nil when there is none.
func (s *state) headPod() *corev1.Pod {
	for _, p := range s.children.podsMatching(labels.SelectorFromSet(builder.HeadSelector(s.rc))) {
		if s.children.headSet != nil && !scale.IsControlledBy(p, s.children.headSet.UID) {
			continue
		}
		if p.DeletionTimestamp == nil && !scale.IsDead(p) {
			return p
		}
	}
	return nil
}
