// Package membership decides which worker pods of a running Ray cluster are no longer part of it: pods whose
// Ray container runs but whose Ray node the cluster's current GCS does not list as live. It is a pure function
// of the pods, the head and the GCS's node table; the controller reads, asks it, and restarts the pods it
// names.
//
// Two losses are told apart. Without GCS fault tolerance a GCS that restarted (a replaced head pod, or a
// restarted head container) knows none of the nodes that registered with the one before: their raylets retry
// for Ray's gcs_rpc_server_reconnect_timeout_s (60 s) and then exit, so a worker whose Ray container started
// before the head's did is lost, and is restarted as soon as the new GCS answers. With fault tolerance the
// raylets reconnect; a worker that stays out of the GCS (a zombie: running, not ready, never back) is
// restarted once it has been out for the grace period.
package membership

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/ray"
)

// DefaultGrace is how long a worker pod may be not ready, counted from the latest of its Ray container's
// start, the head's readiness and its own loss of readiness, before a node missing from the GCS restarts it:
// a starting raylet registers within seconds, and a raylet that lost its GCS reconnects within seconds of
// the GCS coming back.
const DefaultGrace = 60 * time.Second

// Reason says why a worker pod is restarted.
type Reason string

const (
	// ReasonHeadReplaced: the worker's Ray container started before the head's current one, the cluster has no
	// GCS fault tolerance, and the current GCS does not list its node: it belonged to a GCS that is gone.
	ReasonHeadReplaced Reason = "HeadReplaced"
	// ReasonNotInGCS: the worker has been not ready for the grace period and the GCS lists no live node for it.
	ReasonNotInGCS Reason = "NotInGCS"
)

// Head is what the decision knows of the cluster's head pod.
type Head struct {
	// Started is when the head's Ray container started its current run: the current GCS runs since then.
	Started time.Time
	// Ready is when the head pod last became ready; zero while it is not ready (nothing is decided then).
	Ready time.Time
	// FaultTolerant is set when the cluster's GCS keeps its state across restarts (Redis or embedded storage).
	FaultTolerant bool
}

// Worker is one worker pod as the decision reads it.
type Worker struct {
	Pod *corev1.Pod
	// Run identifies the Ray container's current run (its container ID): a restart is asked once per run.
	Run string
	// Started is when the current run started.
	Started time.Time
	// NotReadySince is when the pod last became not ready; zero while it is ready.
	NotReadySince time.Time
}

// Restart is a worker pod to restart, with why.
type Restart struct {
	Worker Worker
	Reason Reason
}

// Check is the worker pods whose membership may need the GCS's answer, and when to look again at those
// that may need it later.
type Check struct {
	// Due are the workers whose fate the GCS's node table decides now.
	Due []Worker
	// HeadReplaced marks, by pod name, the due workers that started before the head's GCS.
	headReplaced map[string]bool
	// Later is the earliest time a worker not yet due becomes due; zero when none will.
	Later time.Time
}

// Plan reads the cluster's worker pods and its head and returns the workers whose Ray node must be looked up
// in the GCS now. It needs no call: a cluster whose workers are all ready and younger than its head's GCS
// (the steady state) yields nothing, and the GCS is not asked.
func Plan(workers []*corev1.Pod, head Head, now time.Time, grace time.Duration) Check {
	var c Check
	if head.Ready.IsZero() || head.Started.IsZero() {
		return c
	}
	for _, p := range workers {
		w, ok := running(p)
		if !ok {
			continue
		}
		if !head.FaultTolerant && w.Started.Before(head.Started) {
			if c.headReplaced == nil {
				c.headReplaced = map[string]bool{}
			}
			c.headReplaced[p.Name] = true
			c.Due = append(c.Due, w)
			continue
		}
		if w.NotReadySince.IsZero() {
			continue
		}
		due := latest(w.Started, head.Ready, w.NotReadySince).Add(grace)
		if !now.Before(due) {
			c.Due = append(c.Due, w)
		} else if c.Later.IsZero() || due.Before(c.Later) {
			c.Later = due
		}
	}
	return c
}

// Decide returns the due workers of c whose pod the GCS's node table lists no live node for.
func (c Check) Decide(nodes []ray.Node) []Restart {
	var out []Restart
	for _, w := range c.Due {
		if Live(nodes, w.Pod) {
			continue
		}
		reason := ReasonNotInGCS
		if c.headReplaced[w.Pod.Name] {
			reason = ReasonHeadReplaced
		}
		out = append(out, Restart{Worker: w, Reason: reason})
	}
	return out
}

// Live reports whether the GCS lists a node of the pod that is not dead: registered with the pod's name as
// instance ID, or, for a node registered without one, with the pod's IP.
func Live(nodes []ray.Node, p *corev1.Pod) bool {
	for _, n := range nodes {
		if n.Status == ray.NodeStatusDead {
			continue
		}
		if n.InstanceID == p.Name || (n.InstanceID == "" && p.Status.PodIP != "" && n.IP == p.Status.PodIP) {
			return true
		}
	}
	return false
}

// running returns the worker as the decision reads it, when its Ray container runs in a running pod that no
// one is deleting or updating: Kruise holds pods it is about to delete or update in place (kray drains their
// Ray node there, and a drained raylet exits), and a restarting container is the kubelet's business.
func running(p *corev1.Pod) (Worker, bool) {
	if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" || len(p.Spec.Containers) == 0 {
		return Worker{}, false
	}
	switch p.Labels[constants.LabelKruiseLifecycleState] {
	case "", constants.KruiseStateNormal, constants.KruiseStateUpdated:
	default:
		return Worker{}, false
	}
	name := p.Spec.Containers[constants.RayContainerIndex].Name
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name != name {
			continue
		}
		if cs.State.Running == nil || cs.ContainerID == "" {
			return Worker{}, false
		}
		return Worker{Pod: p, Run: cs.ContainerID, Started: cs.State.Running.StartedAt.Time, NotReadySince: notReadySince(p)}, true
	}
	return Worker{}, false
}

// notReadySince is when the pod's Ready condition last turned false; zero while it is true.
func notReadySince(p *corev1.Pod) time.Time {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			if c.Status == corev1.ConditionTrue {
				return time.Time{}
			}
			return c.LastTransitionTime.Time
		}
	}
	return time.Time{}
}

// HeadOf reads the head pod: when its Ray container started and when the pod became ready. The zero Head
// (nothing decided) when the pod is not running, not ready, or going.
func HeadOf(p *corev1.Pod, faultTolerant bool) Head {
	h := Head{FaultTolerant: faultTolerant}
	if p == nil || p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning || len(p.Spec.Containers) == 0 {
		return h
	}
	name := p.Spec.Containers[constants.RayContainerIndex].Name
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == name && cs.State.Running != nil {
			h.Started = cs.State.Running.StartedAt.Time
		}
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			h.Ready = c.LastTransitionTime.Time
		}
	}
	if h.Started.IsZero() || h.Ready.IsZero() {
		return Head{FaultTolerant: faultTolerant}
	}
	return h
}

// latest is the latest of ts.
func latest(ts ...time.Time) time.Time {
	var out time.Time
	for _, t := range ts {
		if t.After(out) {
			out = t
		}
	}
	return out
}
