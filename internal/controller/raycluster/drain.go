package raycluster

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"time"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/internal/controller/shared"
	"github.com/kray-project/kray/pkg/builder"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/metrics"
	"github.com/kray-project/kray/pkg/ray"
	"github.com/kray-project/kray/pkg/scale"
	"github.com/kray-project/kray/pkg/spec"
)

// drainPoll is how often a pod waiting for its Ray node to drain is checked again.
const drainPoll = time.Second

// reconcileDrains puts the drain hook on worker pods that predate workerDrain or that Kruise has just
// updated in place, then walks the worker pods that Kruise holds behind that hook: in PreparingDelete before
// their deletion, in PreparingUpdate (not ready) before an in-place update restarts their Ray container. For
// each, it asks Ray's GCS once to drain the pod's node (recording when, in the pod), then releases the hook
// (Kruise deletes or updates the pod) when the node is drained, when Ray has no node for the pod, or when
// workerDrain.timeoutSeconds has passed. A GCS that cannot be reached only delays the release until the
// timeout. Without workerDrain (turned off), held pods are released at once.
func (r *Reconciler) reconcileDrains(ctx context.Context, s *state) error {
	var errs []error
	if s.effective.Spec.WorkerDrain != nil && !spec.ClusterSuspended(s.effective) {
		errs = append(errs, r.hookExistingPods(ctx, s))
	}
	var waiting []*corev1.Pod
	for _, p := range s.children.podsMatching(drainWaitSelector(s.rc.Name)) {
		if p.DeletionTimestamp == nil {
			waiting = append(waiting, p)
		}
	}
	if len(waiting) == 0 {
		return errors.Join(errs...)
	}
	if why := drainSkipped(s, r.Ray != nil); why != "" {
		for _, p := range waiting {
			errs = append(errs, r.releaseDrainHook(ctx, s, p, metrics.DrainDisabled, 0, why))
		}
		return errors.Join(errs...)
	}
	timeout := time.Duration(ptr.Deref(s.effective.Spec.WorkerDrain.TimeoutSeconds, constants.DefaultDrainTimeoutSeconds)) * time.Second
	// Held pods of a paused GCS start their drain without a request, and are released after the timeout.
	sess := r.openGCS(ctx, s)
	g := gcsView{client: sess.client, address: sess.address, now: r.now().Time, timeout: timeout, spent: sess.spent}
	g.nodes, g.lookupErr = sess.Nodes(ctx)
	for _, p := range waiting {
		errs = append(errs, r.drainHeld(ctx, s, p, g))
	}
	return errors.Join(errs...)
}

// gcsView is what one reconcile knows of a cluster's GCS for its drains: the client, the nodes it listed (or
// why it could not), the reconcile's time and the drain timeout.
type gcsView struct {
	client    ray.Client
	address   string
	nodes     []ray.Node
	lookupErr error
	now       time.Time
	timeout   time.Duration
	// spent reports whether this reconcile's time for GCS calls is spent (gcsBudget): a drain request that
	// does not fit waits for the next reconcile.
	spent func() bool
}

// drainHeld moves the drain of one held pod a step: it releases a pod that cannot run a Ray node or whose
// update restarts nothing, starts the drain of a new hold (once its new image is on its node, when kray pulls
// it there: awaitsImage), and releases the pod once the node asked is drained or gone, Ray has no node for it,
// or the timeout passed.
func (r *Reconciler) drainHeld(ctx context.Context, s *state, p *corev1.Pod, g gcsView) error {
	if p.Status.PodIP == "" {
		// Never started (unscheduled, or a gang member still pending): no Ray node can run in it.
		return r.releaseDrainHook(ctx, s, p, metrics.DrainNoNode, 0, "it has no IP, so no Ray node")
	}
	if p.Labels[constants.LabelKruiseLifecycleState] == constants.KruiseStatePreparingUpdate && !s.updateRestarts(p) {
		return r.releaseDrainHook(ctx, s, p, metrics.DrainNoRestart, 0, "the update changes only its labels or annotations and restarts no container")
	}
	rec, ok := recordedDrain(p)
	if !ok {
		if wait, err := r.awaitsImage(ctx, s, p, g.timeout); wait || err != nil {
			s.retryAfter(imagePoll)
			return err
		}
		s.retryAfter(drainPoll)
		if g.spent() {
			return nil // started by the next reconcile, so that its request reaches the GCS
		}
		if recorded, err := r.liveDrainRecorded(ctx, p, false); err != nil || recorded {
			return err
		}
		return r.startDrain(ctx, s, p, g)
	}
	took, deadline := g.now.Sub(rec.started), rec.started.Add(g.timeout)
	switch {
	case !g.now.Before(deadline):
		return r.releaseDrainHook(ctx, s, p, metrics.DrainTimedOut, took, fmt.Sprintf("its Ray node did not drain within %s", g.timeout))
	case g.lookupErr != nil:
		s.retryAfter(min(drainPoll, deadline.Sub(g.now)))
		return nil
	case rec.node != nil:
		// The node asked to drain decides, not a node that the pod's restarted raylet registered since.
		switch node, found := ray.FindNodeByID(g.nodes, rec.node); {
		case !found:
			return r.releaseDrainHook(ctx, s, p, metrics.DrainDrained, took, fmt.Sprintf("its Ray node %x has left the cluster", rec.node))
		case node.Drained():
			return r.releaseDrainHook(ctx, s, p, metrics.DrainDrained, took, fmt.Sprintf("its Ray node %x is %s", rec.node, node.Status))
		}
		s.retryAfter(min(drainPoll, deadline.Sub(g.now)))
		return nil
	}
	node, found := ray.FindNode(g.nodes, p.Name, p.Status.PodIP)
	switch {
	case !found:
		return r.releaseDrainHook(ctx, s, p, metrics.DrainNoNode, took, "Ray reports no node for it")
	case node.Drained():
		return r.releaseDrainHook(ctx, s, p, metrics.DrainDrained, took, fmt.Sprintf("its Ray node is %s", node.Status))
	}
	// No drain request reached the GCS when this hold began (it did not answer): ask now, once.
	s.retryAfter(min(drainPoll, deadline.Sub(g.now)))
	if g.spent() {
		return nil
	}
	if recorded, err := r.liveDrainRecorded(ctx, p, true); err != nil || recorded {
		return err
	}
	return r.requestDrain(ctx, s, p, g, node, deadline)
}

// liveDrainRecorded reports whether the pod as the API server holds it records this hold's drain (with the
// node asked, when withNode), or is gone. The cache may not yet show the record of a drain this operator asked
// for a moment ago, so a request is sent only after this read, one per request, and never twice.
func (r *Reconciler) liveDrainRecorded(ctx context.Context, p *corev1.Pod, withNode bool) (bool, error) {
	live := &corev1.Pod{}
	switch err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(p), live); {
	case apierrors.IsNotFound(err):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("read pod %s before asking Ray to drain its node: %w", p.Name, err)
	case live.UID != p.UID:
		return true, nil // a new pod of the same name; the next reconcile sees it
	}
	rec, ok := recordedDrain(live)
	return ok && (!withNode || rec.node != nil), nil
}

// drainRecord is what kray recorded in a held pod about the drain of its current hold.
type drainRecord struct {
	started time.Time
	// node is the ID of the Ray node kray asked to drain; nil when no request reached the GCS.
	node []byte
}

// recordedDrain returns the drain recorded in the pod for the hold Kruise has it in now; false when none is:
// never started, or started in an earlier hold (Kruise returned the pod to Normal, or moved it from one hold
// to the next, with the hook label kept). A record without its hold (an older kray's) counts as this hold's.
func recordedDrain(p *corev1.Pod) (drainRecord, bool) {
	started, err := time.Parse(time.RFC3339, p.Annotations[constants.AnnotationDrainStarted])
	if err != nil {
		return drainRecord{}, false
	}
	if hold, ok := p.Annotations[constants.AnnotationDrainHold]; ok && hold != holdOf(p) {
		return drainRecord{}, false
	}
	node, err := hex.DecodeString(p.Annotations[constants.AnnotationDrainNode])
	if err != nil || len(node) == 0 {
		node = nil
	}
	return drainRecord{started: started, node: node}, true
}

// holdOf names the hold Kruise has the pod in: its lifecycle state and when Kruise set it.
func holdOf(p *corev1.Pod) string {
	return p.Labels[constants.LabelKruiseLifecycleState] + "@" + p.Annotations[constants.AnnotationKruiseLifecycleTimestamp]
}

// updateRestarts says whether the in-place update the pod is held for restarts a container: true unless the
// pod's CloneSet is in the snapshot and its template differs from the pod only in labels or annotations.
func (s *state) updateRestarts(p *corev1.Pod) bool {
	if cs := s.cloneSetOf(p); cs != nil {
		return scale.InPlaceUpdateRestarts(p, &cs.Spec.Template)
	}
	return true
}

// cloneSetOf is the pod's CloneSet in the snapshot, nil when it is not there.
func (s *state) cloneSetOf(p *corev1.Pod) *kruisev1alpha1.CloneSet {
	ref := metav1.GetControllerOf(p)
	for i := range s.children.cloneSets {
		if cs := &s.children.cloneSets[i]; ref != nil && cs.UID == ref.UID {
			return cs
		}
	}
	return nil
}

// drainWhileInvalid drains and releases the worker pods Kruise holds behind the drain hook while the spec is
// invalid, since Kruise waits for kray whatever the spec says: with the spec's workerDrain, else, when only
// its annotation copy is unreadable, with the default timeout.
func (r *Reconciler) drainWhileInvalid(ctx context.Context, s *state) error {
	held := false
	for _, p := range s.children.podsMatching(drainWaitSelector(s.rc.Name)) {
		held = held || p.DeletionTimestamp == nil
	}
	if !held {
		return nil
	}
	if _, ok := s.rc.Annotations[constants.AnnotationWorkerDrain]; ok && s.effective.Spec.WorkerDrain == nil {
		s.effective = s.effective.DeepCopy()
		s.effective.Spec.WorkerDrain = &rayv1.WorkerDrainOptions{}
	}
	return r.runPhase(ctx, s, phase{name: phaseWorkerDrain, run: r.reconcileDrains})
}

// drainSkipped says why held pods are released without a drain: workerDrain is off, the operator has no
// Ray client, or the whole cluster is being suspended (its head and GCS go too). Empty means drain.
func drainSkipped(s *state, haveRay bool) string {
	switch {
	case s.effective.Spec.WorkerDrain == nil:
		return "workerDrain is not set"
	case !haveRay:
		return "the operator has no Ray client"
	case spec.ClusterSuspended(s.effective):
		return "the cluster is being suspended"
	case !spec.FTEnabled(s.effective) && headGoing(s):
		// Without GCS fault tolerance every Ray node goes with the head's GCS (a Recreate upgrade replaces
		// the head beside the workers): there is nothing left to drain.
		return "the head pod is being replaced and the cluster has no GCS fault tolerance, so its Ray nodes go with the head"
	}
	return ""
}

// headGoing reports whether the cluster's head pod is gone or being deleted.
func headGoing(s *state) bool {
	sel := labels.SelectorFromSet(builder.HeadSelector(s.rc))
	for _, p := range s.children.podsMatching(sel) {
		if p.DeletionTimestamp == nil && !scale.IsDead(p) {
			return false
		}
	}
	return true
}

// startDrain begins the drain of the pod's current hold: it asks the GCS to drain the pod's node and records
// the start, the hold and the node asked in the pod, whatever the answer: the timeout counts from the first
// attempt.
func (r *Reconciler) startDrain(ctx context.Context, s *state, p *corev1.Pod, g gcsView) error {
	record := shared.Meta{Annotations: map[string]*string{
		constants.AnnotationDrainStarted: ptr.To(r.now().Format(time.RFC3339)),
		constants.AnnotationDrainHold:    ptr.To(holdOf(p)),
		constants.AnnotationDrainNode:    nil,
	}}
	switch node, found := ray.FindNode(g.nodes, p.Name, p.Status.PodIP); {
	case g.lookupErr != nil:
		s.warn(EventDrainFailed, "Worker pod %s: cannot reach Ray GCS %s to drain its node, releasing it after the timeout: %v", p.Name, g.address, g.lookupErr)
	case !found:
		s.normal(EventDrainingWorker, "Worker pod %s: Ray reports no node for it; nothing to drain", p.Name)
	default:
		r.sendDrain(ctx, s, p, g, node, g.now.Add(g.timeout))
		record.Annotations[constants.AnnotationDrainNode] = ptr.To(hex.EncodeToString(node.ID))
	}
	if err := r.patchPodMeta(ctx, p.Namespace, p.Name, record); err != nil {
		return fmt.Errorf("record drain start on pod %s: %w", p.Name, err)
	}
	return nil
}

// requestDrain asks the GCS to drain the node of a pod whose drain started without a request, and records the
// node asked.
func (r *Reconciler) requestDrain(ctx context.Context, s *state, p *corev1.Pod, g gcsView, node ray.Node, deadline time.Time) error {
	r.sendDrain(ctx, s, p, g, node, deadline)
	asked := shared.Meta{Annotations: map[string]*string{constants.AnnotationDrainNode: ptr.To(hex.EncodeToString(node.ID))}}
	if err := r.patchPodMeta(ctx, p.Namespace, p.Name, asked); err != nil {
		return fmt.Errorf("record drained node on pod %s: %w", p.Name, err)
	}
	return nil
}

// sendDrain sends the drain request and reports its answer in an event.
func (r *Reconciler) sendDrain(ctx context.Context, s *state, p *corev1.Pod, g gcsView, node ray.Node, deadline time.Time) {
	reply, err := g.client.Drain(ctx, node.ID, fmt.Sprintf("kray: pod %s/%s is being %s", p.Namespace, p.Name, heldFor(p)), deadline)
	switch {
	case err != nil:
		s.warn(EventDrainFailed, "Worker pod %s: Ray GCS %s did not take the drain request, releasing it after the timeout: %v", p.Name, g.address, err)
	case !reply.Accepted:
		s.warn(EventDrainFailed, "Worker pod %s: Ray rejected the drain request, releasing it after the timeout: %s", p.Name, reply.Rejection)
	default:
		s.normal(EventDrainingWorker, "Worker pod %s: asked Ray to drain node %x before the pod is %s", p.Name, node.ID, heldFor(p))
	}
}

// releaseDrainHook removes the drain hook label, after which Kruise deletes the pod or updates it in place;
// took is the time since the drain started (0 when none did).
func (r *Reconciler) releaseDrainHook(ctx context.Context, s *state, p *corev1.Pod, outcome string, took time.Duration, why string) error {
	if err := r.patchPodMeta(ctx, p.Namespace, p.Name, shared.Meta{Labels: map[string]*string{constants.LabelDrainHook: nil}}); err != nil {
		s.warn(EventFailedToReleaseDrainHook, "Failed to release the drain hook of worker pod %s: %v", p.Name, err)
		return fmt.Errorf("release drain hook of pod %s: %w", p.Name, err)
	}
	metrics.ObserveDrainRelease(outcome, took)
	reason := EventDrainedWorker
	if outcome == metrics.DrainTimedOut {
		reason = EventDrainTimedOut
	}
	if outcome == metrics.DrainTimedOut {
		s.warn(reason, "Worker pod %s: released to be %s: %s", p.Name, heldFor(p), why)
		return nil
	}
	s.normal(reason, "Worker pod %s: released to be %s: %s", p.Name, heldFor(p), why)
	return nil
}

// heldFor is what Kruise holds a pod behind the drain hook for.
func heldFor(p *corev1.Pod) string {
	if p.Labels[constants.LabelKruiseLifecycleState] == constants.KruiseStatePreparingUpdate {
		return "updated in place"
	}
	return "deleted"
}

// drainWaitSelector selects a cluster's worker pods that Kruise holds behind the drain hook: in
// PreparingDelete, or in PreparingUpdate before an in-place update.
func drainWaitSelector(cluster string) labels.Selector {
	sel := labels.SelectorFromSet(labels.Set{
		constants.LabelCluster:   cluster,
		constants.LabelNodeType:  constants.NodeTypeWorker,
		constants.LabelDrainHook: constants.DrainHookValue,
	})
	return sel.Add(requirement(constants.LabelKruiseLifecycleState, selection.In, constants.KruiseStatePreparingDelete, constants.KruiseStatePreparingUpdate))
}

// unhookedSelector selects a cluster's worker pods without the drain hook label that are running (lifecycle
// Normal) or that Kruise has just updated in place (Updated, which becomes Normal once hooked again).
func unhookedSelector(cluster string) labels.Selector {
	sel := labels.SelectorFromSet(labels.Set{
		constants.LabelCluster:  cluster,
		constants.LabelNodeType: constants.NodeTypeWorker,
	})
	return sel.Add(requirement(constants.LabelKruiseLifecycleState, selection.In, constants.KruiseStateNormal, constants.KruiseStateUpdated),
		requirement(constants.LabelDrainHook, selection.DoesNotExist))
}

// requirement is a label requirement of constant parts.
func requirement(key string, op selection.Operator, values ...string) labels.Requirement {
	r, err := labels.NewRequirement(key, op, values)
	if err != nil {
		panic(err) // constant keys, operators and values never fail
	}
	return *r
}

// hookExistingPods puts the drain hook label on running worker pods that lack it: pods created before
// workerDrain was set, which no template change reaches under upgradeStrategy None, and pods whose hook was
// released for an in-place update that Kruise has done.
func (r *Reconciler) hookExistingPods(ctx context.Context, s *state) error {
	// A pod that Kruise returned to Normal after a cancelled deletion loses its old drain start, so its
	// next drain gets its own timeout.
	hook := shared.Meta{
		Labels: map[string]*string{constants.LabelDrainHook: ptr.To(constants.DrainHookValue)},
		Annotations: map[string]*string{
			constants.AnnotationDrainStarted: nil, constants.AnnotationDrainHold: nil, constants.AnnotationDrainNode: nil,
		},
	}
	var errs []error
	for _, p := range s.children.podsMatching(unhookedSelector(s.rc.Name)) {
		if p.DeletionTimestamp != nil {
			continue
		}
		if err := r.patchPodMeta(ctx, s.rc.Namespace, p.Name, hook); err != nil {
			errs = append(errs, fmt.Errorf("label pod %s with the drain hook: %w", p.Name, err))
		}
	}
	return errors.Join(errs...)
}

// gcsAddress is the cluster's GCS address: the head Service and the head's GCS port, unless the operator
// was given one address for every cluster.
func (r *Reconciler) gcsAddress(s *state) string {
	if r.RayGCSAddress != "" {
		return r.RayGCSAddress
	}
	return net.JoinHostPort(builder.HeadServiceFQDN(s.effective, r.Options), builder.GCSPort(s.effective))
}

// rayClient returns the GCS client for address, presenting creds with each call; a dial error comes back
// from its calls.
func (r *Reconciler) rayClient(address string, creds ray.Credentials) ray.Client {
	c, err := r.Ray.Dial(address, creds)
	if err != nil {
		return failedClient{err}
	}
	return c
}

// failedClient is the client of a GCS that cannot be called: it could not be dialed, or the cluster's auth
// token could not be read.
type failedClient struct{ err error }

func (c failedClient) Nodes(context.Context) ([]ray.Node, error) { return nil, c.err }
func (c failedClient) Drain(context.Context, []byte, string, time.Time) (ray.DrainReply, error) {
	return ray.DrainReply{}, c.err
}
func (c failedClient) ClusterID(context.Context) ([]byte, error) { return nil, c.err }
