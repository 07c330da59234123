package shared

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// EventRepeatWindow is how long an event identical to one already emitted for the same object is not sent
// again: each event costs an API request (a POST, or a PATCH of its count), and a reconcile that finds the
// same problem every few seconds (a name in workersToDelete that matches no pod, a write that keeps failing)
// would otherwise send one per reconcile. The object's status carries the current state.
const EventRepeatWindow = 5 * time.Minute

// Event is a Kubernetes event a controller records about the object it reconciles.
type Event struct {
	Type, Reason, Message string
}

// Normal and Warning are events of their type.
func Normal(reason, message string) Event  { return Event{corev1.EventTypeNormal, reason, message} }
func Warning(reason, message string) Event { return Event{corev1.EventTypeWarning, reason, message} }

// Events records events through Recorder, leaving out those identical (object, type, reason, message) to one
// recorded within EventRepeatWindow. It is safe for concurrent reconciles.
type Events struct {
	Recorder record.EventRecorder

	mu   sync.Mutex
	seen map[eventKey]time.Time
}

type eventKey struct {
	uid                 types.UID
	kind, reason, about string
}

// Emit records each of events about obj that was not recorded within EventRepeatWindow before now.
func (e *Events) Emit(obj client.Object, now time.Time, events ...Event) {
	for _, ev := range events {
		if e.fresh(eventKey{uid: obj.GetUID(), kind: ev.Type, reason: ev.Reason, about: ev.Message}, now) {
			e.Recorder.Event(obj, ev.Type, ev.Reason, ev.Message)
		}
	}
}

// fresh reports whether the event has not been emitted within EventRepeatWindow before now, and records it.
func (e *Events) fresh(key eventKey, now time.Time) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.seen == nil {
		e.seen = map[eventKey]time.Time{}
	}
	if last, ok := e.seen[key]; ok && now.Sub(last) < EventRepeatWindow {
		return false
	}
	if len(e.seen) > 10000 {
		for k, t := range e.seen {
			if now.Sub(t) >= EventRepeatWindow {
				delete(e.seen, k)
			}
		}
	}
	e.seen[key] = now
	return true
}
