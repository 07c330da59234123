package raycluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kray-project/kray/pkg/ray"
)

// gcsBudget bounds the time one reconcile of a cluster spends calling its GCS, all calls together, so that a
// head that stalls every call holds a reconcile worker this long at most; a pod whose drain request does not
// fit waits for the next reconcile. A variable for the tests.
var gcsBudget = 10 * time.Second

// Bounds of the pause after a GCS failed to answer: it doubles with each failure in a row.
const (
	gcsPauseFirst = 5 * time.Second
	gcsPauseMax   = time.Minute
)

// errGCSBudgetSpent is what a call finds once the reconcile's time for its cluster's GCS is spent.
var errGCSBudgetSpent = errors.New("this reconcile's time for Ray GCS calls is spent")

// gcsBreaker remembers, by cluster, the GCS that failed to answer in a row, and pauses the calls to each
// such GCS: a head that keeps timing out is asked less often, so it never takes the reconcile workers that
// other clusters need. It is held in memory only: after a restart every GCS is asked again, once.
type gcsBreaker struct {
	mu     sync.Mutex
	failed map[types.NamespacedName]gcsFailures
}

// gcsFailures is a run of failed reconciles of one cluster's GCS calls.
type gcsFailures struct {
	count int
	// until is when the GCS is asked again.
	until time.Time
	// last is the last failure.
	last error
}

// paused returns why the calls to the cluster's GCS are paused at now, nil when they are not.
func (b *gcsBreaker) paused(key types.NamespacedName, now time.Time) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	f, ok := b.failed[key]
	if !ok || !now.Before(f.until) {
		return nil
	}
	return fmt.Errorf("Ray GCS calls paused until %s after %d reconciles in a row without an answer: %w", f.until.UTC().Format(time.RFC3339), f.count, f.last)
}

// record notes how a reconcile's calls went: err, the first failure, nil when every call was answered.
func (b *gcsBreaker) record(key types.NamespacedName, now time.Time, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err == nil {
		delete(b.failed, key)
		return
	}
	if b.failed == nil {
		b.failed = map[types.NamespacedName]gcsFailures{}
	}
	f := b.failed[key]
	f.count++
	pause := gcsPauseMax
	if f.count < 16 {
		pause = min(gcsPauseMax, gcsPauseFirst<<(f.count-1))
	}
	f.until, f.last = now.Add(pause), err
	b.failed[key] = f
}

// forget drops what is known of a cluster that is gone.
func (b *gcsBreaker) forget(key types.NamespacedName) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.failed, key)
}

// budgetedClient is one reconcile's client of a cluster's GCS: its calls together end by deadline, and it
// keeps the first that ran out of time. A GCS that refuses or answers an error at once costs nothing and is
// not paused. A call made after the deadline is not sent (errGCSBudgetSpent).
type budgetedClient struct {
	client   ray.Client
	deadline time.Time
	err      *error
}

// newBudgetedClient wraps c with a budget of gcsBudget from now.
func newBudgetedClient(c ray.Client) budgetedClient {
	return budgetedClient{client: c, deadline: time.Now().Add(gcsBudget), err: new(error)}
}

// spent reports whether the budget is spent.
func (c budgetedClient) spent() bool { return !time.Now().Before(c.deadline) }

// failure is the first call that failed, nil when none did.
func (c budgetedClient) failure() error { return *c.err }

// note keeps err if it is the first call to run out of time.
func (c budgetedClient) note(err error) {
	if *c.err == nil && (errors.Is(err, context.DeadlineExceeded) || status.Code(err) == codes.DeadlineExceeded) {
		*c.err = err
	}
}

func (c budgetedClient) Nodes(ctx context.Context) ([]ray.Node, error) {
	if c.spent() {
		return nil, errGCSBudgetSpent
	}
	ctx, cancel := context.WithDeadline(ctx, c.deadline)
	defer cancel()
	nodes, err := c.client.Nodes(ctx)
	c.note(err)
	return nodes, err
}

func (c budgetedClient) Drain(ctx context.Context, nodeID []byte, reason string, deadline time.Time) (ray.DrainReply, error) {
	if c.spent() {
		return ray.DrainReply{}, errGCSBudgetSpent
	}
	ctx, cancel := context.WithDeadline(ctx, c.deadline)
	defer cancel()
	reply, err := c.client.Drain(ctx, nodeID, reason, deadline)
	c.note(err)
	return reply, err
}

func (c budgetedClient) ClusterID(ctx context.Context) ([]byte, error) {
	if c.spent() {
		return nil, errGCSBudgetSpent
	}
	ctx, cancel := context.WithDeadline(ctx, c.deadline)
	defer cancel()
	id, err := c.client.ClusterID(ctx)
	c.note(err)
	return id, err
}
