package shared

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	rayv1 "github.com/kray-project/kray/api/v1"
)

// An event identical to one emitted for the same object within the window costs no request; another
// message, another object or the window's end sends it again.
func TestRepeatedEventsAreSentOnce(t *testing.T) {
	rec := record.NewFakeRecorder(100)
	e := &Events{Recorder: rec}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a := &rayv1.RayCluster{ObjectMeta: metav1.ObjectMeta{Name: "a", UID: "uid-a"}}
	b := &rayv1.RayCluster{ObjectMeta: metav1.ObjectMeta{Name: "b", UID: "uid-b"}}
	send := func(rc *rayv1.RayCluster, msg string) { e.Emit(rc, now, Warning("WorkersToDeleteIgnored", msg)) }
	send(a, "x")
	send(a, "x") // repeated
	send(a, "y")
	send(b, "x")
	now = now.Add(EventRepeatWindow)
	send(a, "x")
	close(rec.Events)
	var got []string
	for ev := range rec.Events {
		got = append(got, ev)
	}
	want := []string{"Warning WorkersToDeleteIgnored x", "Warning WorkersToDeleteIgnored y", "Warning WorkersToDeleteIgnored x", "Warning WorkersToDeleteIgnored x"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}
