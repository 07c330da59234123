package raycluster

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// eventRepeatWindow is how long an event identical to one already emitted for the same RayCluster is not
// sent again: each event costs an API request (a POST, or a PATCH of its count), and a reconcile that finds
// the same problem every few seconds (a name in workersToDelete that matches no pod, a write that keeps
// failing) would otherwise send one per reconcile. The status condition carries the current state.
const eventRepeatWindow = 5 * time.Minute

// recentEvents remembers when each event was last emitted, per RayCluster, type, reason and message.
type recentEvents struct {
	mu   sync.Mutex
	seen map[eventKey]time.Time
}

type eventKey struct {
	uid                 types.UID
	kind, reason, about string
}

// fresh reports whether the event has not been emitted within eventRepeatWindow before now, and records it.
func (r *recentEvents) fresh(key eventKey, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen == nil {
		r.seen = map[eventKey]time.Time{}
	}
	if last, ok := r.seen[key]; ok && now.Sub(last) < eventRepeatWindow {
		return false
	}
	if len(r.seen) > 10000 {
		for k, t := range r.seen {
			if now.Sub(t) >= eventRepeatWindow {
				delete(r.seen, k)
			}
		}
	}
	r.seen[key] = now
	return true
}

// emit sends the queued events, leaving out those identical to one sent within eventRepeatWindow.
func (r *Reconciler) emit(s *state) {
	now := r.now().Time
	for _, e := range s.events {
		kind := corev1.EventTypeNormal
		if e.warning {
			kind = corev1.EventTypeWarning
		}
		if r.recent.fresh(eventKey{uid: s.rc.UID, kind: kind, reason: e.reason, about: e.message}, now) {
			r.Recorder.Event(s.rc, kind, e.reason, e.message)
		}
	}
	s.events = nil
}
