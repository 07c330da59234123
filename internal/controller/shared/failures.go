package shared

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// FailureCounts counts, per object, the reads of a peer (a Ray dashboard) in a row that failed; safe for
// concurrent reconciles. It lives in memory only: after a restart every peer is read at the first poll.
type FailureCounts struct {
	mu sync.Mutex
	n  map[types.NamespacedName]int
}

// Record adds one failure for key when failed, forgets key otherwise, and returns key's count.
func (f *FailureCounts) Record(key types.NamespacedName, failed bool) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !failed {
		delete(f.n, key)
		return 0
	}
	if f.n == nil {
		f.n = map[types.NamespacedName]int{}
	}
	f.n[key]++
	return f.n[key]
}

// Backoff is when a peer whose reads failed failures times in a row is read next: poll, doubled for each
// failure after the first, at most limit. A peer that is down is not hammered, and a slow one does not keep a
// reconcile worker busy every few seconds.
func Backoff(failures int, poll, limit time.Duration) time.Duration {
	after := poll
	for i := 1; i < failures && after < limit; i++ {
		after *= 2
	}
	return min(after, limit)
}
