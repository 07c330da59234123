package raycluster

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/ray"
)

// stallingRay is a GCS that lists its nodes at once but answers no drain request: each waits until the
// caller gives up (or a second, so a test without a deadline still ends).
type stallingRay struct {
	mu     sync.Mutex
	nodes  []ray.Node
	lists  int
	drains int
}

func (f *stallingRay) Dial(string, ray.Credentials) (ray.Client, error) { return f, nil }

func (f *stallingRay) Nodes(context.Context) ([]ray.Node, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lists++
	return f.nodes, nil
}

// ClusterID answers at once, as the listing does.
func (f *stallingRay) ClusterID(context.Context) ([]byte, error) { return []byte("c"), nil }

func (f *stallingRay) Drain(ctx context.Context, _ []byte, _ string, _ time.Time) (ray.DrainReply, error) {
	f.mu.Lock()
	f.drains++
	f.mu.Unlock()
	select {
	case <-ctx.Done():
		return ray.DrainReply{}, ctx.Err()
	case <-time.After(time.Second):
		return ray.DrainReply{}, fmt.Errorf("stalled")
	}
}

// A head whose GCS takes every drain request and never answers holds a reconcile for gcsBudget at most, not
// for one call timeout per held pod; its calls are then paused (a condition says so) and resume after the
// pause, while the held pods wait for their drain timeout.
func TestStallingGCSHoldsAReconcileForItsBudgetOnly(t *testing.T) {
	defer func(b time.Duration) { gcsBudget = b }(gcsBudget)
	gcsBudget = 300 * time.Millisecond
	const workers = 6
	rc := cluster("c").group("g", workers).with(func(rc *rayv1.RayCluster) {
		rc.Spec.WorkerDrain = &rayv1.WorkerDrainOptions{TimeoutSeconds: ptr.To[int32](600)}
	}).obj()
	e := newEnv(t, rc)
	gcs := &stallingRay{}
	e.r.Ray = gcs
	e.converge(rc)
	for i := range workers {
		name := fmt.Sprintf("c-g-worker-%05d", i)
		gcs.nodes = append(gcs.nodes, ray.Node{ID: []byte(name), InstanceID: name, Status: ray.NodeStatusRunning})
		pod := e.get(&corev1.Pod{}, name).(*corev1.Pod)
		pod.Labels[constants.LabelKruiseLifecycleState] = constants.KruiseStatePreparingDelete
		pod.Annotations = map[string]string{constants.AnnotationKruiseLifecycleTimestamp: testNow.Format(time.RFC3339)}
		if err := e.api.Update(context.Background(), pod); err != nil {
			t.Fatal(err)
		}
	}
	started := func() int {
		n := 0
		for i := range workers {
			if e.get(&corev1.Pod{}, fmt.Sprintf("c-g-worker-%05d", i)).(*corev1.Pod).Annotations[constants.AnnotationDrainStarted] != "" {
				n++
			}
		}
		return n
	}
	paused := func() *string {
		got := &rayv1.RayCluster{}
		if err := e.api.Get(context.Background(), client.ObjectKeyFromObject(rc), got); err != nil {
			t.Fatal(err)
		}
		if c := meta.FindStatusCondition(got.Status.Conditions, constants.ConditionRayGCSPaused); c != nil {
			return &c.Message
		}
		return nil
	}

	e.mustReconcile(rc)
	if gcs.drains != 1 || started() != 1 {
		t.Fatalf("first reconcile: %d drain requests, %d drains started; want one of each, the rest left for later", gcs.drains, started())
	}
	if msg := paused(); msg == nil || !strings.Contains(*msg, "paused until") {
		t.Errorf("after a stalled call: condition %s %v, want it saying the calls are paused", constants.ConditionRayGCSPaused, msg)
	}

	lists := gcs.lists
	e.mustReconcile(rc)
	if gcs.lists != lists || gcs.drains != 1 {
		t.Errorf("while paused: %d lists, %d drain requests; want no call", gcs.lists-lists, gcs.drains-1)
	}
	if started() != workers {
		t.Errorf("while paused: %d of %d drains started, want all, to be released after the timeout", started(), workers)
	}
	// A reconcile during the pause does not end it.
	e.mustReconcile(rc)
	if gcs.lists != lists || paused() == nil {
		t.Errorf("a second reconcile while paused: %d lists, paused %v; want no call and the pause kept", gcs.lists-lists, paused() != nil)
	}

	e.clock.SetTime(testNow.Add(gcsPauseFirst + time.Second))
	e.mustReconcile(rc)
	if gcs.lists == lists {
		t.Error("after the pause: the GCS was not asked again")
	}
}

// A call that ran out of time counts as a failure, one refused or answered with an error does not.
func TestBudgetedClientCountsOnlyTimeouts(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{context.DeadlineExceeded, true},
		{fmt.Errorf("DrainNode: %w", grpcstatus.Error(codes.DeadlineExceeded, "context deadline exceeded")), true},
		{fmt.Errorf("GetClusterResourceState: %w", grpcstatus.Error(codes.Unavailable, "connection refused")), false},
		{nil, false},
	} {
		c := budgetedClient{err: new(error)}
		c.note(tc.err)
		if got := c.failure() != nil; got != tc.want {
			t.Errorf("%v: counted %t, want %t", tc.err, got, tc.want)
		}
	}
}

// The pause doubles with each failed reconcile in a row, up to gcsPauseMax; an answered reconcile ends it.
func TestGCSBreakerPauses(t *testing.T) {
	var b gcsBreaker
	key := client.ObjectKey{Namespace: "ns", Name: "c"}
	now := testNow
	var got []time.Duration
	for range 9 {
		b.record(key, now, fmt.Errorf("deadline exceeded"))
		got = append(got, b.failed[key].until.Sub(now))
	}
	want := []time.Duration{5 * time.Second, 10 * time.Second, 20 * time.Second, 40 * time.Second, time.Minute, time.Minute, time.Minute, time.Minute, time.Minute}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("pauses %v, want %v", got, want)
	}
	if err := b.paused(key, now.Add(59*time.Second)); err == nil || !strings.Contains(err.Error(), "after 9 reconciles in a row without an answer: deadline exceeded") {
		t.Errorf("paused: %v", err)
	}
	if err := b.paused(key, now.Add(time.Minute)); err != nil {
		t.Errorf("after the pause: %v", err)
	}
	b.record(key, now, nil)
	if err := b.paused(key, now); err != nil || len(b.failed) != 0 {
		t.Errorf("after an answer: %v, %d remembered", err, len(b.failed))
	}
}
