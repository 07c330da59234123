package raycluster

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/tools/record"

	rayv1 "github.com/kray-project/kray/api/v1"
)

// An event identical to one emitted for the same cluster within the window costs no request; another
// message, another cluster or the window's end sends it again.
func TestRepeatedEventsAreSentOnce(t *testing.T) {
	rec := record.NewFakeRecorder(100)
	now := testNow
	r := &Reconciler{Recorder: rec, Now: func() time.Time { return now }}
	a, b := cluster("a").obj(), cluster("b").obj()
	send := func(rc *rayv1.RayCluster, msg string) {
		s := newState(rc, rc, children{})
		s.warn("WorkersToDeleteIgnored", "%s", msg)
		r.emit(s)
	}
	send(a, "x")
	send(a, "x") // repeated
	send(a, "y")
	send(b, "x")
	now = now.Add(eventRepeatWindow)
	send(a, "x")
	close(rec.Events)
	var got []string
	for e := range rec.Events {
		got = append(got, e)
	}
	want := []string{"Warning WorkersToDeleteIgnored x", "Warning WorkersToDeleteIgnored y", "Warning WorkersToDeleteIgnored x", "Warning WorkersToDeleteIgnored x"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}
