package raycluster

import (
	"fmt"
	"sync"
	"time"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/internal/controller/shared"
	"github.com/kray-project/kray/pkg/batchscheduler"
	"github.com/kray-project/kray/pkg/builder"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/spec"
)

// state is what the phases of one reconcile share.
//
// The rule for rc and effective: every phase reads the spec from effective and from nothing else; rc is the
// object as read, used for its identity, metadata and status, and as the object the status and the events
// are written for.
type state struct {
	rc *rayv1.RayCluster
	// effective is rc with kray's extension settings kept in annotations filled in (spec.WithExtensions), and
	// with spec.suspend on while a suspension that already started completes (as in KubeRay, a suspension runs
	// to its end even if spec.suspend is flipped back).
	effective *rayv1.RayCluster
	// children is the cluster's pods and workloads as the cache held them when the reconcile began.
	children children
	// failed holds the phases that failed or were skipped in this reconcile.
	failed map[string]bool
	// rolloutHeld is set while a RollingUpdate is still updating an earlier group (the head, or a worker group
	// before the current one): later groups keep their update paused, so groups update one at a time.
	rolloutHeld bool
	// createdHead is set when this reconcile created the head StatefulSet (a new cluster).
	createdHead bool
	// requeueAfter, when set, asks for the next reconcile sooner than the resync (a drain being waited for).
	requeueAfter time.Duration
	// events are emitted after the status write (see Reconcile).
	events []shared.Event
	// options are the builders' options for this cluster's workloads (workloadOptions), decided once per
	// reconcile; options.Scheduling is how the cluster's pods are scheduled (schedulingOf).
	options builder.Options
	// gcs is the reconcile's session with the cluster's GCS, nil until a phase needs it (openGCS).
	gcs *gcsSession
	// imageUpdates are the worker groups whose RollingUpdate gives their pods a new Ray image, by group name
	// (findImageUpdates), and pullJobs the cluster's ImagePullJobs by image, as the image-prepull phase found
	// or created them.
	imageUpdates map[string]imageUpdate
	pullJobs     map[string]*kruisev1alpha1.ImagePullJob
	// nodeImages are the NodeImages the reconcile read, by node name; nil for a node that has none.
	nodeImages map[string]*kruisev1alpha1.NodeImage
	// restarting are the worker pods whose restart (membership) was asked or is under way.
	restarting []string
	// notJoining are the worker pods that stayed out of the GCS after kray restarted them, in a back-off.
	notJoining []string
}

// schedulingOf is how a cluster's pods are scheduled: as its workloads record it (the head StatefulSet's,
// else a CloneSet's), so that a cluster keeps the scheduling it was created with, or for a new cluster as the
// operator's batch scheduler and the cluster's labels decide.
func schedulingOf(c children, rc *rayv1.RayCluster, operator string) batchscheduler.Scheduling {
	if c.headSet != nil {
		return batchscheduler.Parse(c.headSet.Annotations[constants.AnnotationBatchScheduler])
	}
	for i := range c.cloneSets {
		if shared.OwnedBy(&c.cloneSets[i], rc) {
			return batchscheduler.Parse(c.cloneSets[i].Annotations[constants.AnnotationBatchScheduler])
		}
	}
	return batchscheduler.Decide(rc, operator)
}

// workloadOptions are the builders' options for the workloads of the cluster of s: the operator's, with the
// cluster's scheduling and, under a batch scheduler, the pod templates of the workloads that exist (whose
// scheduler metadata is kept).
func (r *Reconciler) workloadOptions(s *state) builder.Options {
	o := r.Options
	o.Scheduling = schedulingOf(s.children, s.effective, r.BatchScheduler)
	if o.Scheduling.Scheduler == "" {
		return o
	}
	o.LiveTemplates = map[string]*corev1.PodTemplateSpec{}
	if h := s.children.headSet; h != nil {
		o.LiveTemplates[h.Name] = &h.Spec.Template
	}
	for i := range s.children.cloneSets {
		if cs := &s.children.cloneSets[i]; shared.OwnedBy(cs, s.rc) {
			o.LiveTemplates[cs.Name] = &cs.Spec.Template
		}
	}
	return o
}

// newState starts a reconcile of rc, whose spec with kray's annotated extension settings filled in is ext.
func newState(rc, ext *rayv1.RayCluster, c children) *state {
	return &state{rc: rc, effective: effectiveCluster(ext), children: c, failed: map[string]bool{}}
}

// isNew reports whether the cluster has no Kruise workload yet.
func (s *state) isNew() bool {
	return s.children.headSet == nil && len(s.children.cloneSets) == 0
}

// inCopies runs f(i) for every i below n and returns their errors by i. When n is above 1 they run at once,
// each on its own copy of s (sharing what they only read), and what each copy queued and set is folded back
// into s in the order of i, so that the events and the outcome do not depend on which write returned first.
func (s *state) inCopies(n int, f func(i int, own *state) error) []error {
	errs := make([]error, n)
	if n == 1 {
		errs[0] = f(0, s)
		return errs
	}
	copies := make([]state, n)
	var wg sync.WaitGroup
	for i := range copies {
		copies[i] = *s
		copies[i].events = nil
		wg.Go(func() { errs[i] = f(i, &copies[i]) })
	}
	wg.Wait()
	for i := range copies {
		s.fold(&copies[i])
	}
	return errs
}

// fold takes into s what f queued and set on a copy of s (inCopies).
func (s *state) fold(run *state) {
	s.events = append(s.events, run.events...)
	s.createdHead = s.createdHead || run.createdHead
	s.rolloutHeld = s.rolloutHeld || run.rolloutHeld
	if run.requeueAfter > 0 {
		s.retryAfter(run.requeueAfter)
	}
}

// effectiveCluster returns rc, or a copy with spec.suspend on while a started suspension completes.
func effectiveCluster(rc *rayv1.RayCluster) *rayv1.RayCluster {
	if spec.ClusterSuspended(rc) || !spec.EffectiveSuspend(rc) {
		return rc
	}
	cp := rc.DeepCopy()
	on := true
	cp.Spec.Suspend = &on
	return cp
}

// holdRolloutUnless holds later groups of a RollingUpdate unless this workload is done: its pods are
// updated (Kruise's status says so) and kray is not changing its spec in this reconcile.
func (s *state) holdRolloutUnless(updated bool, live, desired client.Object) {
	if !updated || live.GetAnnotations()[constants.AnnotationSpecHash] != desired.GetAnnotations()[constants.AnnotationSpecHash] {
		s.holdRollout()
	}
}

// holdRollout holds the later groups of a RollingUpdate.
func (s *state) holdRollout() {
	if spec.Rolling(s.effective) {
		s.rolloutHeld = true
	}
}

// retryAfter asks for a reconcile within d.
func (s *state) retryAfter(d time.Duration) {
	d = max(d, 100*time.Millisecond)
	if s.requeueAfter == 0 || d < s.requeueAfter {
		s.requeueAfter = d
	}
}

// normal queues a Normal event.
func (s *state) normal(reason, format string, args ...any) {
	s.events = append(s.events, shared.Normal(reason, fmt.Sprintf(format, args...)))
}

// warn queues a Warning event.
func (s *state) warn(reason, format string, args ...any) {
	s.events = append(s.events, shared.Warning(reason, fmt.Sprintf(format, args...)))
}
