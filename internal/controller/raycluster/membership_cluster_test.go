package raycluster

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/internal/writetest"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/membership"
	"github.com/kray-project/kray/pkg/ray"
)

// These tests hold the fast path of worker healing: a worker run that a GCS of cluster ID X listed is restarted
// at the first answer of a head's new GCS whose ID is not X, in a cluster without fault tolerance, and only then.

// headReplacedBy runs a new head container at +d, ready, whose GCS reports cluster ID id and lists nodes.
func (e *env) headReplacedBy(rc *rayv1.RayCluster, d time.Duration, gcs *fakeRay, id string, nodes []ray.Node) {
	e.t.Helper()
	head := e.get(&corev1.Pod{}, "c-head-0").(*corev1.Pod)
	runContainer(e.t, e, head, testNow.Add(d), testNow.Add(d), true)
	gcs.clusterID, gcs.nodes = []byte(id), nodes
}

func TestARunBoundToTheOldClusterIDIsRestartedAtTheFirstAnswer(t *testing.T) {
	ft := func(rc *rayv1.RayCluster) {
		rc.Spec.GcsFaultToleranceOptions = &rayv1.GcsFaultToleranceOptions{RedisAddress: "redis:6379"}
	}
	cases := []struct {
		name string
		// bindAt is when the GCS is asked after the workers were first seen (at 0).
		bindAt time.Duration
		newID  string
		mutate func(*rayv1.RayCluster)
		// changed restarts worker 0's Ray container (a new run) before the head is replaced.
		changed bool
		want    []string
	}{
		{name: "another cluster ID", bindAt: membership.BindAfter, newID: "Y", want: workers},
		{name: "the same cluster ID", bindAt: membership.BindAfter, newID: "X"},
		{name: "fault tolerance", bindAt: membership.BindAfter, newID: "Y", mutate: ft},
		{name: "listed too soon after the run started", bindAt: membership.BindAfter - time.Second, newID: "Y"},
		{name: "a run that changed since", bindAt: membership.BindAfter, newID: "Y", changed: true, want: workers[1:]},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var mutate []func(*rayv1.RayCluster)
			if tc.mutate != nil {
				mutate = append(mutate, tc.mutate)
			}
			e, gcs, rc := membershipEnv(t, time.Hour, 10*time.Minute, bothNodes, mutate...)
			gcs.clusterID = []byte("X")
			e.reconcileAt(rc, 0)
			// The listing that binds each run, or a listing too soon to: a worker that lost its readiness is
			// asked about at once.
			for _, w := range workers {
				p := e.get(&corev1.Pod{}, w).(*corev1.Pod)
				runContainer(t, e, p, testNow.Add(-10*time.Minute), testNow.Add(tc.bindAt), false)
			}
			e.reconcileAt(rc, tc.bindAt)
			for _, w := range workers {
				p := e.get(&corev1.Pod{}, w).(*corev1.Pod)
				runContainer(t, e, p, testNow.Add(-10*time.Minute), testNow.Add(tc.bindAt), true)
			}
			if tc.changed {
				restartedRun(t, e, workers[0], testNow.Add(40*time.Second))
			}
			e.takeEvents()
			e.headReplacedBy(rc, 45*time.Second, gcs, tc.newID, []ray.Node{headNode})
			e.reconcileAt(rc, 50*time.Second)
			got := keys(e.restarts())
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("restarts at the new GCS's first answer: %v, want %v", got, tc.want)
			}
			for _, w := range tc.want {
				if r := e.restarts()[w].Annotations[constants.AnnotationRestartReason]; r != string(membership.ReasonHeadReplaced) {
					t.Errorf("restart of %s for %q, want %s", w, r, membership.ReasonHeadReplaced)
				}
			}
			if len(tc.want) > 0 {
				if events := strings.Join(e.takeEvents(), "\n"); !strings.Contains(events, "can never join") {
					t.Errorf("events do not say why the restart could not wait:\n%s", events)
				}
			}
		})
	}
}

// Kruise's webhook stamps the restart with the container it reads from kruise-manager's cache. When that is not
// the run kray judged (the cache lags, or leads), kray deletes the request by its UID before kruise-daemon's
// hold ends, counts no restart, and asks again once the stamp and the judged run agree.
func TestARestartStampedWithAnotherRunIsWithdrawn(t *testing.T) {
	for _, name := range []string{"lagging", "leading"} {
		t.Run(name, func(t *testing.T) {
			e, _, rc := membershipEnv(t, 20*time.Second, 10*time.Minute, []ray.Node{headNode})
			e.r.Writer = kruiseWebhook{Writer: e.writer, from: otherRun{Reader: e.api, id: "containerd://" + name}}
			writes := e.pastHeadReplacedGrace(rc)
			if n := len(e.restarts()); n != 0 {
				t.Fatalf("%d restarts left stamped with another run, want none (writes %v)", n, writes)
			}
			deleted := 0
			for _, w := range e.writer.Writes() {
				if w.Verb == writetest.Delete && w.Kind == "ContainerRecreateRequest" {
					deleted++
				}
			}
			if deleted != 2 {
				t.Errorf("%d restarts deleted, want 2 (writes %v)", deleted, writes)
			}
			if events := strings.Join(e.takeEvents(), "\n"); strings.Contains(events, EventRestartedWorker) {
				t.Errorf("a restart withdrawn is reported as made:\n%s", events)
			}
			e.r.Writer = kruiseWebhook{Writer: e.writer, from: e.api}
			e.reconcileAt(rc, membership.DefaultHeadReplacedGrace+restartPoll)
			if n := len(e.restarts()); n != 2 {
				t.Errorf("%d restarts once the stamp is the judged run, want 2", n)
			}
		})
	}
}

// otherRun reads pods with their Ray container's ID replaced by id: kruise-manager's cache behind or ahead.
type otherRun struct {
	client.Reader
	id string
}

func (r otherRun) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := r.Reader.Get(ctx, key, obj, opts...); err != nil {
		return err
	}
	if p, ok := obj.(*corev1.Pod); ok && len(p.Status.ContainerStatuses) > 0 {
		p.Status.ContainerStatuses[0].ContainerID = r.id
	}
	return nil
}

// kray dials the head pod's IP, by the head Service's name (its TLS certificate's), so that a replaced head is
// reached at once, not once a resolver that kept the old pod's IP resolves the headless Service again; a GCS
// address of the operator's own is dialed as it is.
func TestTheGCSIsDialedAtTheHeadPodsIP(t *testing.T) {
	for _, tc := range []struct {
		name, override, want string
	}{
		{name: "the head's GCS", want: headIP + ":6379 as c-head-svc.ns.svc.cluster.local:6379"},
		{name: "--ray-gcs-address", override: "gcs.example:6379", want: "gcs.example:6379 as "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, gcs, rc := membershipEnv(t, 20*time.Second, 10*time.Minute, []ray.Node{headNode})
			e.r.RayGCSAddress = tc.override
			gcs.dials = nil
			e.reconcileAt(rc, 0)
			if len(gcs.dials) == 0 || gcs.dials[0] != tc.want {
				t.Errorf("dials %q, want %q", gcs.dials, tc.want)
			}
		})
	}
}
