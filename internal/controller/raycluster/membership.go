package raycluster

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kray-project/kray/pkg/authtoken"
	"github.com/kray-project/kray/pkg/builder"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/membership"
	"github.com/kray-project/kray/pkg/metrics"
	"github.com/kray-project/kray/pkg/names"
	"github.com/kray-project/kray/pkg/scale"
	"github.com/kray-project/kray/pkg/spec"
)

// restartPoll is how often a worker restart in progress is looked at again.
const restartPoll = 2 * time.Second

// restartGrace is how long, past a restart's deadline and the pod's termination grace period, kray waits for
// the container it judged to be gone before it replaces the pod itself.
const restartGrace = 10 * time.Second

// reconcileWorkerMembership restarts the worker pods of a running cluster whose Ray node its current GCS has
// not listed for a grace period (package membership has the rules): in place, through a Kruise
// ContainerRecreateRequest (same pod, node, IP, volumes and devices), or, when the request is refused, no
// kruise-daemon takes it, or the container it judged still runs well past the request's deadline, by naming
// the pod in its CloneSet's podsToDelete so that Kruise replaces it. One restart per run of a pod's Ray
// container, asked only while the API server shows that run, whichever operator instance asks; a worker whose
// restarts do not bring it back waits longer before each next one. The GCS is asked only while a worker's
// membership is in doubt; a GCS that does not answer, or that is not this cluster's, decides nothing.
func (r *Reconciler) reconcileWorkerMembership(ctx context.Context, s *state) error {
	if r.Ray == nil || !spec.WorkerHealing(s.effective) || spec.ClusterSuspended(s.effective) {
		return nil
	}
	now := r.now().Time
	o := membership.Options{Grace: r.HealGrace, FaultTolerant: spec.FTEnabled(s.effective)}
	head := membership.HeadOf(s.headPod())
	var workers []membership.Worker
	var pods []string
	for _, p := range s.workerPods() {
		pods = append(pods, string(p.UID))
		if w, ok := membership.WorkerOf(p); ok {
			workers = append(workers, w)
		}
	}
	mem := r.heal.of(s.rc)
	mem.Pods(pods)
	look := mem.Observe(head, workers, now, o)
	if !look.Later.IsZero() {
		s.retryAfter(look.Later.Sub(now))
	}
	defer func() {
		for _, w := range mem.NotJoining(workers, now, o) {
			s.notJoining = append(s.notJoining, w.Pod.Name)
		}
	}()
	if !look.Ask {
		return nil
	}
	gcs := r.openGCS(ctx, s)
	var answer membership.Answer
	if !o.FaultTolerant && !mem.Identified(head) {
		// Asked before the listing, so that an ID is only kept with an answer that shows this head's GCS. A
		// GCS that does not answer it only leaves its runs to the graces.
		if id, err := gcs.ClusterID(ctx); err == nil {
			answer.ClusterID = hex.EncodeToString(id)
		}
	}
	nodes, err := gcs.Nodes(ctx)
	switch {
	case errors.Is(err, authtoken.ErrK8sTokenAuth):
		// No call of kray's can reach this GCS (pkg/authtoken): asking again changes nothing until the spec does.
		return nil
	case err != nil:
		// Nothing is known of the cluster's membership; the breaker reports the GCS. Nothing else may come to
		// reconcile the cluster (a zombie's readiness never changes): look again, less often at each miss.
		s.retryAfter(mem.NotAnswered())
		return nil
	}
	answer.Nodes = nodes
	v := mem.Heard(head, workers, answer, now, o)
	if v.Ignored {
		// A head just ready whose own node the GCS does not list yet: nothing else may come to reconcile.
		s.retryAfter(mem.NotAnswered())
	}
	if !v.Later.IsZero() {
		s.retryAfter(v.Later.Sub(now))
	}
	var errs []error
	for _, l := range v.Lost {
		errs = append(errs, r.restartWorker(ctx, s, mem, l, now))
	}
	return errors.Join(errs...)
}

// restartWorker restarts one lost worker's Ray container in place, after a back-off when its earlier restarts
// did not bring it back, or has Kruise replace the pod when the restart cannot happen, and follows the
// restart until it is done. It acts only while the API server shows the run that was judged: a cache that
// lags may still show a run that Ray itself already ended.
func (r *Reconciler) restartWorker(ctx context.Context, s *state, mem *membership.Memory, l membership.Lost, now time.Time) error {
	p := l.Worker.Pod
	asked, wasAsked := mem.WasAsked(l.Worker.Run)
	if n := mem.Restarts(l.Worker); n > 0 && !wasAsked {
		// Before any read: a worker that restarts do not bring back costs nothing while it waits.
		wait := membership.BackOff(l.Grace, n)
		s.warn(EventWorkerNotJoining, "Worker pod %s has stayed out of its cluster's GCS after %d restarts; the next one waits until it has been out %s: check what keeps it from the head (a NetworkPolicy on its side, its TLS)", p.Name, n, wait)
		if l.Out < wait {
			s.retryAfter(wait - l.Out)
			return nil
		}
	}
	if current, err := r.stillRuns(ctx, l.Worker); err != nil || !current {
		return err
	}
	if wasAsked {
		return r.followRestart(ctx, s, l, asked, now)
	}
	if p.Annotations[constants.AnnotationRestartPolicy] == string(corev1.RestartPolicyNever) {
		// A restarted container is an exit under Never (scale.ExitedUnderNever): the pod is replaced instead.
		return r.replaceWorker(ctx, s, l, "its template asks for restartPolicy Never, under which a new pod replaces an ended one")
	}
	// A run of a head that is gone without fault tolerance holds no work that could finish: it is not given the
	// pod's grace to stop.
	crr := builder.WorkerRestart(s.rc, p, l.Worker.ContainerID, string(l.Reason), l.Reason == membership.ReasonHeadReplaced)
	switch err := r.Writer.Create(ctx, crr); {
	case err == nil:
		if stamped := stampedRun(crr); stamped != l.Worker.ContainerID {
			// Kruise's webhook stamped another run of the container than the one judged (its cache lags or
			// leads the API server's): that run is not kray's to restart. The daemon holds the request for its
			// unready grace, so deleting it now, while it is that request, kills nothing.
			return r.withdrawRestart(ctx, s, crr, stamped)
		}
		mem.Asked(l.Worker.Run, now)
		mem.Restarted(l.Worker)
		metrics.WorkerRestarted(string(l.Reason), metrics.RestartInPlace)
		s.normal(EventRestartedWorker, "Worker pod %s: restarting its Ray container in place: %s", p.Name, reasonText(l))
		s.restarting = append(s.restarting, p.Name)
		s.retryAfter(restartPoll)
		return nil
	case apierrors.IsAlreadyExists(err):
		// Asked by this operator before a restart of its own, or by another instance: timed from now.
		return r.followRestart(ctx, s, l, mem.Asked(l.Worker.Run, now), now)
	case rejection(err):
		return r.replaceWorker(ctx, s, l, fmt.Sprintf("the in-place restart was refused: %v", err))
	default:
		s.warn(EventFailedToRestartWorker, "Worker pod %s: failed to ask for the restart of its Ray container: %v", p.Name, err)
		return fmt.Errorf("create ContainerRecreateRequest %s: %w", crr.Name, err)
	}
}

// stillRuns reports whether the API server shows the worker's pod running the Ray container run that was
// judged, not held by Kruise and not going.
func (r *Reconciler) stillRuns(ctx context.Context, w membership.Worker) (bool, error) {
	live := &corev1.Pod{}
	switch err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(w.Pod), live); {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("read pod %s before restarting its Ray container: %w", w.Pod.Name, err)
	}
	now, ok := membership.WorkerOf(live)
	return ok && now.Run == w.Run, nil
}

// followRestart follows the restart asked at asked (on the operator's clock) of a run that still runs: it
// waits while Kruise may still be stopping the container, and has the pod replaced once the restart clearly
// did not happen: no kruise-daemon took the request, or the run still runs past the request's deadline and
// the pod's termination grace period.
func (r *Reconciler) followRestart(ctx context.Context, s *state, l membership.Lost, asked, now time.Time) error {
	p := l.Worker.Pod
	key := client.ObjectKey{Namespace: s.rc.Namespace, Name: names.WorkerRestart(p.Name, l.Worker.ContainerID)}
	live := &kruisev1alpha1.ContainerRecreateRequest{}
	switch err := r.APIReader.Get(ctx, key, live); {
	case apierrors.IsNotFound(err):
		return r.replaceWorker(ctx, s, l, fmt.Sprintf("its in-place restart %s ended and is gone, and the Ray container it was to restart still runs", key.Name))
	case err != nil:
		return fmt.Errorf("read ContainerRecreateRequest %s: %w", key.Name, err)
	case !ownedBy(live, s.rc):
		return notOwnedError("ContainerRecreateRequest", live.Name)
	}
	if live.Status.Phase == kruisev1alpha1.ContainerRecreateRequestCompleted && !takenByDaemon(live) {
		return r.replaceWorker(ctx, s, l, fmt.Sprintf("no kruise-daemon took its in-place restart %s (%s): none runs on the pod's node", live.Name, live.Status.Message))
	}
	grace := time.Duration(ptr.Deref(p.Spec.TerminationGracePeriodSeconds, corev1.DefaultTerminationGracePeriodSeconds)) * time.Second
	if wait := time.Duration(builder.WorkerRestartDeadlineSeconds)*time.Second + grace + restartGrace; now.Sub(asked) >= wait {
		return r.replaceWorker(ctx, s, l, fmt.Sprintf("the Ray container its in-place restart %s was to restart still runs %s after it was asked (%s %s)", live.Name, wait, live.Status.Phase, live.Status.Message))
	} else {
		s.retryAfter(min(restartPoll, wait-now.Sub(asked)))
	}
	s.restarting = append(s.restarting, p.Name)
	return nil
}

// takenByDaemon reports whether a kruise-daemon took the request: the daemon records a state for each container
// it works on, and kruise-manager completes a request that no daemon answered within a minute without any.
func takenByDaemon(crr *kruisev1alpha1.ContainerRecreateRequest) bool {
	return len(crr.Status.ContainerRecreateStates) > 0
}

// stampedRun is the container ID Kruise's webhook stamped on the request's container at its creation: the run
// kruise-daemon restarts, and only while it still runs.
func stampedRun(crr *kruisev1alpha1.ContainerRecreateRequest) string {
	if len(crr.Spec.Containers) == 0 || crr.Spec.Containers[0].StatusContext == nil {
		return ""
	}
	return crr.Spec.Containers[0].StatusContext.ContainerID
}

// withdrawRestart deletes a request just created that names a run other than the one judged, by its UID: a
// request of the same name made since is not touched. No restart is counted; the next reconcile judges again.
func (r *Reconciler) withdrawRestart(ctx context.Context, s *state, crr *kruisev1alpha1.ContainerRecreateRequest, stamped string) error {
	err := r.Writer.Delete(ctx, crr, client.Preconditions{UID: ptr.To(crr.UID)})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("withdraw ContainerRecreateRequest %s, stamped with run %q: %w", crr.Name, stamped, err)
	}
	s.retryAfter(restartPoll)
	return nil
}

// replaceWorker names the pod in its CloneSet's podsToDelete with its replicas unchanged, so that Kruise
// replaces it with a new pod: the restart kray could not make in place. A pod of a multi-host group is never
// named (its replacement would replace every host of its replica, each alive in Ray): a Warning says why.
func (r *Reconciler) replaceWorker(ctx context.Context, s *state, l membership.Lost, why string) error {
	p := l.Worker.Pod
	if hosts := s.hostsOf(p); hosts > 1 {
		s.warn(EventFailedToRestartWorker, "Worker pod %s could not be restarted in place (%s) and is not replaced: its group has %d hosts per replica, and replacing one pod replaces the whole replica", p.Name, why, hosts)
		return nil
	}
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
		metrics.WorkerRestarted(string(l.Reason), metrics.RestartReplaced)
		s.normal(EventRestartedWorker, "Worker pod %s: asked CloneSet %s to replace it (%s), since %s", p.Name, cs.Name, reasonText(l), why)
	}
	return nil
}

// reasonText explains why a lost worker is restarted, in an event.
func reasonText(l membership.Lost) string {
	switch l.Reason {
	case membership.ReasonHeadReplaced:
		if l.Bound != "" {
			return fmt.Sprintf("its raylet belongs to Ray cluster %s, and the head's GCS is a new cluster (the head was replaced without GCS fault tolerance) that it can never join", shortID(l.Bound))
		}
		return fmt.Sprintf("it ran when kray first saw the head's current GCS (a head replaced without GCS fault tolerance leaves such runs out), which has not listed its Ray node for %s", l.Out)
	case membership.ReasonNotInGCS:
		return fmt.Sprintf("the cluster's GCS has not listed a live Ray node for it for %s", l.Out)
	}
	return string(l.Reason)
}

// shortID is the first 12 hex digits of a cluster ID, enough to tell two apart in an event.
func shortID(id string) string {
	return id[:min(len(id), 12)]
}

// hostsOf is the hosts per replica of the pod's worker group, 1 when the group is not in the spec.
func (s *state) hostsOf(p *corev1.Pod) int32 {
	for i := range s.effective.Spec.WorkerGroupSpecs {
		if g := &s.effective.Spec.WorkerGroupSpecs[i]; g.GroupName == p.Labels[constants.LabelGroup] {
			return spec.NumOfHosts(g)
		}
	}
	return 1
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
