package raycluster

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	kruisev1beta1 "github.com/openkruise/kruise-api/apps/v1beta1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/internal/controller/shared"
	"github.com/kray-project/kray/internal/writetest"
	"github.com/kray-project/kray/pkg/builder"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/imageref"
	"github.com/kray-project/kray/pkg/nodeimage"
	"github.com/kray-project/kray/pkg/ray"
)

var (
	errOutage   = apierrors.NewInternalError(errors.New("etcd is down"))
	errConflict = apierrors.NewConflict(schema.GroupResource{Group: "apps.kruise.io", Resource: "clonesets"}, "x", errors.New("the object has been modified"))
)

// A failing phase skips only the phases that need it; every other phase runs and the errors are joined.
func TestAFailingPhaseSkipsOnlyThePhasesThatNeedIt(t *testing.T) {
	base := cluster("c").group("a", 1).group("b", 1)
	cases := []struct {
		name      string
		rc        *rayv1.RayCluster
		verb      string
		kind      string
		object    string
		errPhase  string
		written   []string
		unwritten []string
	}{
		{name: "head Service", rc: base.obj(), verb: writetest.Create, kind: "Service", errPhase: phaseHeadService,
			written: []string{"create StatefulSet/c-head", "create CloneSet/c-a-worker", "create CloneSet/c-b-worker"}},
		{name: "head StatefulSet", rc: base.obj(), verb: writetest.Create, kind: "StatefulSet", object: "c-head", errPhase: phaseHeadStatefulSet,
			written: []string{"create Service/c-head-svc", "create CloneSet/c-a-worker", "create CloneSet/c-b-worker"}},
		{name: "one CloneSet", rc: base.obj(), verb: writetest.Create, kind: "CloneSet", object: "c-a-worker", errPhase: phaseWorkerCloneSets,
			written: []string{"create StatefulSet/c-head", "create CloneSet/c-b-worker"}},
		{name: "auth Secret", rc: cluster("c").group("a", 1).with(func(rc *rayv1.RayCluster) {
			rc.Spec.RayVersion = "2.52.0"
			rc.Spec.AuthOptions = &rayv1.AuthOptions{Mode: rayv1.AuthModeToken}
		}).obj(), verb: writetest.Create, kind: "Secret", errPhase: phaseAuthSecret,
			written: []string{"create Service/c-head-svc"}, unwritten: []string{"create StatefulSet/c-head", "create CloneSet/c-a-worker"}},
		{name: "autoscaler ServiceAccount", rc: cluster("c").group("a", 1).with(func(rc *rayv1.RayCluster) {
			rc.Spec.EnableInTreeAutoscaling = ptr.To(true)
		}).obj(), verb: writetest.Create, kind: "ServiceAccount", errPhase: phaseAutoscalerRBAC,
			written: []string{"create Service/c-head-svc", "create CloneSet/c-a-worker"}, unwritten: []string{"create StatefulSet/c-head", "create Role/c"}},
		{name: "preflight outage", rc: base.obj(), verb: writetest.CreateDryRun, kind: "StatefulSet", object: "c-head", errPhase: phasePreflight,
			unwritten: []string{"create Service/c-head-svc", "create StatefulSet/c-head", "create CloneSet/c-a-worker"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.rc)
			e.writer.Fail(tc.verb, tc.kind, tc.object, errOutage)
			writes, _, err := e.reconcile(tc.rc)
			if err == nil || !strings.Contains(err.Error(), "phase "+tc.errPhase+":") {
				t.Fatalf("error %v, want one from phase %s", err, tc.errPhase)
			}
			for _, w := range tc.written {
				if !slices.Contains(writes, w) {
					t.Errorf("%q missing from %v", w, writes)
				}
			}
			for _, w := range tc.unwritten {
				if slices.Contains(writes, w) {
					t.Errorf("%q written although a phase it needs failed: %v", w, writes)
				}
			}
			if !slices.Contains(writes, "status RayCluster/c") {
				t.Errorf("the status was not written: %v", writes)
			}
		})
	}
}

// A template that admission refuses creates nothing at all, not even a Service, and is reported as an invalid
// spec, not retried.
func TestPreflightRefusalCreatesNothing(t *testing.T) {
	rc := cluster("c").group("a", 1).obj()
	e := newEnv(t, rc)
	invalid := apierrors.NewInvalid(schema.GroupKind{Group: "apps.kruise.io", Kind: "CloneSet"}, "c-a-worker", field.ErrorList{field.Invalid(field.NewPath("spec"), "x", "bad")})
	e.writer.Fail(writetest.CreateDryRun, "CloneSet", "c-a-worker", invalid)
	writes, res, err := e.reconcile(rc)
	if err != nil || res != (ctrl.Result{}) {
		t.Fatalf("got %+v, %v; want no error and no requeue", res, err)
	}
	for _, w := range writes {
		if strings.HasPrefix(w, "create ") && !strings.HasSuffix(w, "(dry run)") {
			t.Errorf("%s although a template is refused", w)
		}
	}
	if !slices.Contains(reasons(e.takeEvents()), EventInvalidSpec) {
		t.Errorf("no %s event for a refused template", EventInvalidSpec)
	}
}

// Another writer (a second operator instance) created the workloads after this instance's cache was read:
// the lost create race is neither an error nor a warning, and no creation is announced.
func TestLostCreateRaceIsNotAFailure(t *testing.T) {
	rc := cluster("c").group("g", 2).obj()
	e := newEnv(t, rc)
	e.converge(rc)
	e.takeEvents()
	stale := e.get(&rayv1.RayCluster{}, "c")
	e.r.Cache = withIndexes(fake.NewClientBuilder().WithScheme(testScheme())).WithObjects(stale).WithStatusSubresource(&rayv1.RayCluster{}).Build()

	writes, _, err := e.reconcile(rc)
	if err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	if !containsAll(writes, "create StatefulSet/c-head", "create CloneSet/c-g-worker") {
		t.Fatalf("writes %v: the stale cache did not lead to the creates this test is about", writes)
	}
	for _, r := range reasons(e.takeEvents()) {
		switch r {
		case EventFailedToWriteWorkload, EventCreatedHeadStatefulSet, EventCreatedWorkerCloneSet:
			t.Errorf("event %s after a lost create race", r)
		}
	}
}

// A status write that conflicts is retried soon without an error, and the transitions it would have
// announced are announced only by the write that succeeds.
func TestStatusConflictRequeuesAndAnnouncesNothingTwice(t *testing.T) {
	rc := cluster("c").group("g", 1).with(func(rc *rayv1.RayCluster) { rc.Spec.Suspend = ptr.To(true) }).obj()
	e := newEnv(t, rc)
	e.mustReconcile(rc) // creates the workloads and leaves the status to the next reconcile
	e.writer.FailOnce(writetest.Status, "RayCluster", "c", apierrors.NewConflict(schema.GroupResource{Group: "ray.io", Resource: "rayclusters"}, "c", errors.New("modified")))
	_, res, err := e.reconcile(rc)
	if err != nil || res.RequeueAfter != shared.ConflictRetry {
		t.Fatalf("got %+v, %v; want a requeue after %s and no error", res, err, shared.ConflictRetry)
	}
	if first := reasons(e.takeEvents()); slices.Contains(first, EventSuspended) {
		t.Errorf("events %v announce a suspension whose status write failed", first)
	}
	e.mustReconcile(rc)
	if got := reasons(e.takeEvents()); !slices.Contains(got, EventSuspended) {
		t.Errorf("events %v after the status write succeeded lack %s", got, EventSuspended)
	}
	e.mustReconcile(rc)
	if got := reasons(e.takeEvents()); slices.Contains(got, EventSuspended) {
		t.Errorf("%s announced twice", EventSuspended)
	}
}

// Events about writes that happened are emitted even when the status write fails.
func TestActionEventsSurviveAFailedStatusWrite(t *testing.T) {
	rc := cluster("c").group("g", 1).obj()
	e := newEnv(t, rc)
	e.converge(rc)
	e.takeEvents()
	e.updateSpec(rc, func(rc *rayv1.RayCluster) { rc.Spec.WorkerGroupSpecs[0].Replicas = ptr.To[int32](2) })
	e.writer.FailOnce(writetest.Status, "RayCluster", "c", errOutage)
	if _, _, err := e.reconcile(rc); err == nil || !strings.Contains(err.Error(), "write status") {
		t.Fatalf("Reconcile error %v, want the status write's", err)
	}
	if got := reasons(e.takeEvents()); !slices.Contains(got, EventScaledWorkerGroup) {
		t.Errorf("events %v lack the scale-up that did happen", got)
	}
}

// An update that conflicts is retried from a fresh read in the same reconcile.
func TestWorkloadUpdateConflictIsRetriedFromAFreshRead(t *testing.T) {
	rc := cluster("c").group("g", 2).obj()
	e := newEnv(t, rc)
	e.converge(rc)
	e.updateSpec(rc, func(rc *rayv1.RayCluster) { rc.Spec.WorkerGroupSpecs[0].Replicas = ptr.To[int32](4) })
	e.writer.FailOnce(writetest.Update, "CloneSet", "c-g-worker", errConflict)
	writes := e.mustReconcile(rc)
	if diff := cmp.Diff([]string{"update CloneSet/c-g-worker", "update CloneSet/c-g-worker", "status RayCluster/c"}, writes); diff != "" {
		t.Errorf("writes (-want +got):\n%s", diff)
	}
	if got := ptr.Deref(e.get(&kruisev1alpha1.CloneSet{}, "c-g-worker").(*kruisev1alpha1.CloneSet).Spec.Replicas, 0); got != 4 {
		t.Errorf("replicas %d, want 4", got)
	}
}

// The autoscaler's workersToDelete becomes podsToDelete, filtered to the group's live pods.
func TestWorkersToDeleteNamesExactlyTheGroupsPods(t *testing.T) {
	rc := cluster("c").group("g", 3).group("other", 1).with(func(rc *rayv1.RayCluster) { rc.Spec.EnableInTreeAutoscaling = ptr.To(true) }).obj()
	e := newEnv(t, rc)
	e.converge(rc)
	e.takeEvents()
	e.updateSpec(rc, func(rc *rayv1.RayCluster) {
		rc.Spec.WorkerGroupSpecs[0].Replicas = ptr.To[int32](2)
		rc.Spec.WorkerGroupSpecs[0].ScaleStrategy.WorkersToDelete = []string{"c-g-worker-00001", "c-other-worker-00000", "gone"}
	})
	e.mustReconcile(rc)
	cs := e.get(&kruisev1alpha1.CloneSet{}, "c-g-worker").(*kruisev1alpha1.CloneSet)
	if diff := cmp.Diff([]string{"c-g-worker-00001"}, cs.Spec.ScaleStrategy.PodsToDelete); diff != "" || ptr.Deref(cs.Spec.Replicas, 0) != 2 {
		t.Errorf("replicas %d, podsToDelete diff (-want +got):\n%s", ptr.Deref(cs.Spec.Replicas, 0), diff)
	}
	if other := e.get(&kruisev1alpha1.CloneSet{}, "c-other-worker").(*kruisev1alpha1.CloneSet); len(other.Spec.ScaleStrategy.PodsToDelete) != 0 {
		t.Errorf("another group's CloneSet was asked to delete %v", other.Spec.ScaleStrategy.PodsToDelete)
	}
	if got := reasons(e.takeEvents()); !slices.Contains(got, EventWorkersToDeleteIgnored) {
		t.Errorf("events %v lack %s for names outside the group", got, EventWorkersToDeleteIgnored)
	}
	e.playKruise(rc)
	if diff := cmp.Diff([]string{"c-g-worker-00000", "c-g-worker-00002", "c-head-0", "c-other-worker-00000"}, e.pods(rc)); diff != "" {
		t.Errorf("pods (-want +got):\n%s", diff)
	}
}

// A group removed from the spec loses its CloneSet; with workerDrain it is first scaled to 0 so that its
// workers drain, and deleted once they are gone.
func TestRemovedGroup(t *testing.T) {
	for _, drain := range []bool{false, true} {
		t.Run(map[bool]string{false: "no drain", true: "drain"}[drain], func(t *testing.T) {
			rc := cluster("c").group("keep", 1).group("drop", 2).with(func(rc *rayv1.RayCluster) {
				if drain {
					rc.Spec.WorkerDrain = &rayv1.WorkerDrainOptions{}
				}
			}).obj()
			e := newEnv(t, rc)
			e.converge(rc)
			e.updateSpec(rc, func(rc *rayv1.RayCluster) { rc.Spec.WorkerGroupSpecs = rc.Spec.WorkerGroupSpecs[:1] })
			writes := e.mustReconcile(rc)
			if !drain {
				if !slices.Contains(writes, "delete CloneSet/c-drop-worker") {
					t.Fatalf("writes %v lack the CloneSet's deletion", writes)
				}
				return
			}
			if !slices.Contains(writes, "update CloneSet/c-drop-worker") || slices.Contains(writes, "delete CloneSet/c-drop-worker") {
				t.Fatalf("writes %v: want the CloneSet scaled to 0 and kept", writes)
			}
			e.playKruise(rc)
			if writes := e.mustReconcile(rc); !slices.Contains(writes, "delete CloneSet/c-drop-worker") {
				t.Fatalf("writes %v lack the deletion once the workers are gone", writes)
			}
		})
	}
}

func TestDeadPodsAreDeletedAndLivePodsAreNot(t *testing.T) {
	rc := cluster("c").group("g", 2).obj()
	e := newEnv(t, rc)
	e.converge(rc)
	failed := e.get(&corev1.Pod{}, "c-g-worker-00000").(*corev1.Pod)
	failed.Status.Phase = corev1.PodFailed
	if err := e.api.Status().Update(context.Background(), failed); err != nil {
		t.Fatal(err)
	}
	foreign := failed.DeepCopy()
	foreign.ResourceVersion, foreign.Name, foreign.UID = "", "c-g-worker-foreign", "uid-foreign"
	foreign.OwnerReferences[0].UID = "uid-someone-else"
	if err := e.api.Create(context.Background(), foreign); err != nil {
		t.Fatal(err)
	}
	writes := e.mustReconcile(rc)
	if !slices.Contains(writes, "delete Pod/c-g-worker-00000") || slices.Contains(writes, "delete Pod/c-g-worker-foreign") || slices.Contains(writes, "delete Pod/c-g-worker-00001") {
		t.Errorf("writes %v: want exactly the failed pod of kray's CloneSet deleted", writes)
	}
}

// fakeRay is a GCS whose nodes the test sets; it records drain requests.
type fakeRay struct {
	nodes []ray.Node
	// clusterID is what GetClusterId answers; nil answers Unimplemented.
	clusterID []byte
	// dials are the address and authority of each Dial, "<address> as <authority>".
	dials   []string
	drained []string
	tokens  []string        // the token of each Dial
	tls     []*ray.TLSFiles // the TLS material of each Dial
}

func (f *fakeRay) Dial(address string, creds ray.Credentials) (ray.Client, error) {
	f.dials = append(f.dials, address+" as "+creds.Authority)
	f.tokens = append(f.tokens, creds.Token)
	f.tls = append(f.tls, creds.TLS)
	return f, nil
}
func (f *fakeRay) Nodes(context.Context) ([]ray.Node, error) {
	return f.nodes, nil
}
func (f *fakeRay) Drain(_ context.Context, id []byte, _ string, _ time.Time) (ray.DrainReply, error) {
	f.drained = append(f.drained, string(id))
	return ray.DrainReply{Accepted: true}, nil
}
func (f *fakeRay) ClusterID(context.Context) ([]byte, error) {
	if f.clusterID == nil {
		return nil, status.Error(codes.Unimplemented, "GetClusterId")
	}
	return f.clusterID, nil
}

// drainingEnv converges cluster "c" with one worker, c-g-worker-00000, workerDrain's timeout 60 s and mutate
// applied, against a GCS that lists the worker's node n1 with status.
func drainingEnv(t *testing.T, status ray.NodeStatus, mutate ...func(*rayv1.RayCluster)) (*env, *fakeRay, *rayv1.RayCluster) {
	t.Helper()
	rc := cluster("c").group("g", 1).with(func(rc *rayv1.RayCluster) {
		rc.Spec.WorkerDrain = &rayv1.WorkerDrainOptions{TimeoutSeconds: ptr.To[int32](60)}
		for _, m := range mutate {
			m(rc)
		}
	}).obj()
	e := newEnv(t, rc)
	gcs := &fakeRay{nodes: []ray.Node{{ID: []byte("n1"), InstanceID: "c-g-worker-00000", Status: status}}}
	e.r.Ray = gcs
	e.converge(rc)
	return e, gcs, rc
}

// A worker held behind the drain hook (before its deletion, or before an in-place update) is drained once,
// then released when its node is idle or after the timeout; without workerDrain it is released at once.
func TestDrainPhase(t *testing.T) {
	cases := []struct {
		name     string
		drain    bool
		state    string // the pod's Kruise lifecycle state; "": PreparingDelete
		status   ray.NodeStatus
		started  time.Duration // since the drain started; 0: not started
		record   string        // how the drain start was recorded: "" this hold and node n1, "legacy" without either, "stale" for an earlier hold, "none" without a node
		metadata bool          // the in-place update changes only labels
		noIP     bool          // the pod never started
		nodes    []ray.Node    // the GCS's nodes when not the pod's node n1 in status
		// pull, when set, turns kray.io/image-prepull on and is the new image's phase in the NodeImage of the
		// pod's node ("no tag": queued, no status yet; "not queued": in neither spec nor status; "no NodeImage":
		// the node has none); holdAge is how long Kruise has
		// held the pod (default 5 minutes, past the 60 s timeout).
		pull        string
		holdAge     time.Duration
		wantDrain   bool
		wantRelease bool
	}{
		{name: "workerDrain off", drain: false, wantRelease: true},
		{name: "busy node: drain requested, pod kept", drain: true, status: ray.NodeStatusRunning, wantDrain: true},
		{name: "drain started, node still busy", drain: true, status: ray.NodeStatusRunning, started: time.Second},
		{name: "idle node released", drain: true, status: ray.NodeStatusIdle, started: time.Second, wantRelease: true},
		{name: "timeout passed", drain: true, status: ray.NodeStatusRunning, started: time.Hour, wantRelease: true},
		{name: "in-place update: drain requested, pod kept", drain: true, state: constants.KruiseStatePreparingUpdate, status: ray.NodeStatusRunning, wantDrain: true},
		{name: "in-place update: drain started, node still busy", drain: true, state: constants.KruiseStatePreparingUpdate, status: ray.NodeStatusRunning, started: time.Second},
		{name: "in-place update: idle node released", drain: true, state: constants.KruiseStatePreparingUpdate, status: ray.NodeStatusIdle, started: time.Second, wantRelease: true},
		{name: "in-place update without workerDrain", drain: false, state: constants.KruiseStatePreparingUpdate, wantRelease: true},
		{name: "in-place update of labels only: released, no drain", drain: true, state: constants.KruiseStatePreparingUpdate, metadata: true, status: ray.NodeStatusRunning, wantRelease: true},
		{name: "start of an earlier hold: a drain of its own", drain: true, status: ray.NodeStatusRunning, started: time.Hour, record: "stale", wantDrain: true},
		{name: "start of an earlier in-place hold: a drain of its own", drain: true, state: constants.KruiseStatePreparingUpdate, status: ray.NodeStatusRunning, started: 30 * time.Second, record: "stale", wantDrain: true},
		{name: "older kray's start: node asked now", drain: true, status: ray.NodeStatusRunning, started: time.Second, record: "legacy", wantDrain: true},
		{name: "no request reached the GCS: asked once it answers", drain: true, status: ray.NodeStatusRunning, started: time.Second, record: "none", wantDrain: true},
		{name: "a pod that never started: released, no drain", drain: true, status: ray.NodeStatusRunning, noIP: true, wantRelease: true},
		{name: "image-prepull: the new image still pulling on the node: no drain yet", drain: true, state: constants.KruiseStatePreparingUpdate, status: ray.NodeStatusRunning,
			pull: string(kruisev1alpha1.ImagePhasePulling), holdAge: 30 * time.Second},
		{name: "image-prepull: the new image not yet asked of the node: no drain yet", drain: true, state: constants.KruiseStatePreparingUpdate, status: ray.NodeStatusRunning,
			pull: "no tag", holdAge: 30 * time.Second},
		{name: "image-prepull: the new image asked of the node, never answered (no kruise-daemon): drain requested", drain: true, state: constants.KruiseStatePreparingUpdate, status: ray.NodeStatusRunning,
			pull: "no tag, unanswered", holdAge: 30 * time.Second, wantDrain: true},
		{name: "image-prepull: no pull of the new image queued on the node, nor to come: drain requested, the kubelet pulls", drain: true, state: constants.KruiseStatePreparingUpdate, status: ray.NodeStatusRunning,
			pull: "not queued", holdAge: 30 * time.Second, wantDrain: true},
		{name: "image-prepull: no pull queued yet, the cluster's ImagePullJob running: no drain yet", drain: true, state: constants.KruiseStatePreparingUpdate, status: ray.NodeStatusRunning,
			pull: "not queued, job running", holdAge: 30 * time.Second},
		{name: "image-prepull: NodeImages forbidden (a single-namespace install): drain requested, a Warning", drain: true, state: constants.KruiseStatePreparingUpdate, status: ray.NodeStatusRunning,
			pull: "forbidden", holdAge: 30 * time.Second, wantDrain: true},
		{name: "image-prepull: the new image pulled: drain requested", drain: true, state: constants.KruiseStatePreparingUpdate, status: ray.NodeStatusRunning,
			pull: string(kruisev1alpha1.ImagePhaseSucceeded), holdAge: 30 * time.Second, wantDrain: true},
		{name: "image-prepull: the pull failed: drain requested, the kubelet pulls", drain: true, state: constants.KruiseStatePreparingUpdate, status: ray.NodeStatusRunning,
			pull: string(kruisev1alpha1.ImagePhaseFailed), holdAge: 30 * time.Second, wantDrain: true},
		{name: "image-prepull: a node no daemon pulls on: drain requested", drain: true, state: constants.KruiseStatePreparingUpdate, status: ray.NodeStatusRunning,
			pull: "no NodeImage", holdAge: 30 * time.Second, wantDrain: true},
		{name: "image-prepull: still pulling when the timeout has passed: drain requested", drain: true, state: constants.KruiseStatePreparingUpdate, status: ray.NodeStatusRunning,
			pull: string(kruisev1alpha1.ImagePhasePulling), wantDrain: true},
		{name: "image-prepull: a deletion waits for no image", drain: true, status: ray.NodeStatusRunning,
			pull: string(kruisev1alpha1.ImagePhasePulling), holdAge: 30 * time.Second, wantDrain: true},
		{name: "drained node gone, its restarted raylet a new node", drain: true, started: time.Second,
			nodes: []ray.Node{{ID: []byte("n2"), InstanceID: "c-g-worker-00000", Status: ray.NodeStatusRunning}}, wantRelease: true},
		{name: "drained node dead, its restarted raylet a new node", drain: true, started: time.Second,
			nodes: []ray.Node{{ID: []byte("n2"), InstanceID: "c-g-worker-00000", Status: ray.NodeStatusRunning}, {ID: []byte("n1"), InstanceID: "c-g-worker-00000", Status: ray.NodeStatusDead}}, wantRelease: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e, gcs, rc := drainingEnv(t, tc.status)
			if tc.nodes != nil {
				gcs.nodes = tc.nodes
			}
			pod := e.get(&corev1.Pod{}, "c-g-worker-00000").(*corev1.Pod)
			pod.Labels[constants.LabelKruiseLifecycleState] = constants.KruiseStatePreparingDelete
			if tc.state != "" {
				pod.Labels[constants.LabelKruiseLifecycleState] = tc.state
			}
			if tc.noIP {
				pod.Status.PodIP = ""
				if err := e.api.Status().Update(context.Background(), pod); err != nil {
					t.Fatal(err)
				}
				pod = e.get(&corev1.Pod{}, "c-g-worker-00000").(*corev1.Pod)
				pod.Labels[constants.LabelKruiseLifecycleState] = constants.KruiseStatePreparingDelete
			}
			if tc.state == constants.KruiseStatePreparingUpdate && !tc.metadata {
				pod.Spec.Containers[0].Image = "rayproject/ray:2.9.0" // the template moved on from it
			}
			// Kruise entered the hold 5 minutes ago, unless the case says otherwise.
			holdAge := tc.holdAge
			if holdAge == 0 {
				holdAge = 5 * time.Minute
			}
			pod.Annotations = map[string]string{constants.AnnotationKruiseLifecycleTimestamp: testNow.Add(-holdAge).Format(time.RFC3339)}
			if tc.pull != "" {
				pod.Spec.NodeName = "node-a"
				e.updateSpec(rc, func(rc *rayv1.RayCluster) {
					metav1.SetMetaDataAnnotation(&rc.ObjectMeta, constants.AnnotationImagePrepull, "true")
				})
				cs := e.get(&kruisev1alpha1.CloneSet{}, "c-g-worker").(*kruisev1alpha1.CloneSet)
				name, tag, _ := imageref.NameTag(cs.Spec.Template.Spec.Containers[0].Image)
				ni := &kruisev1alpha1.NodeImage{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}, Status: kruisev1alpha1.NodeImageStatus{
					ImageStatuses: map[string]kruisev1alpha1.ImageStatus{name: {Tags: []kruisev1alpha1.ImageTagStatus{{Tag: "older", Phase: kruisev1alpha1.ImagePhaseSucceeded}}}}}}
				ni.Spec.Images = map[string]kruisev1alpha1.ImageSpec{name: {Tags: []kruisev1alpha1.ImageTagSpec{{Tag: "older"}}}}
				if !strings.HasPrefix(tc.pull, "not queued") {
					queued := &metav1.Time{Time: testNow.Add(-5 * time.Second)}
					if tc.pull == "no tag, unanswered" {
						queued = &metav1.Time{Time: testNow.Add(-nodeimage.Unanswered)}
					}
					ni.Spec.Images[name] = kruisev1alpha1.ImageSpec{Tags: []kruisev1alpha1.ImageTagSpec{{Tag: "older"}, {Tag: tag, CreatedAt: queued}}}
				}
				if !strings.HasPrefix(tc.pull, "no tag") && !strings.HasPrefix(tc.pull, "not queued") {
					ni.Status.ImageStatuses[name] = kruisev1alpha1.ImageStatus{Tags: []kruisev1alpha1.ImageTagStatus{{Tag: tag, Phase: kruisev1alpha1.ImagePullPhase(tc.pull)}}}
				}
				if tc.pull != "no NodeImage" {
					if err := e.api.Create(context.Background(), ni); err != nil {
						t.Fatal(err)
					}
				}
				if tc.pull == "not queued" {
					// The ImagePullJobs kray asks for ran, and completed without this node.
					for _, job := range builder.ImagePullJobs(e.get(&rayv1.RayCluster{}, "c").(*rayv1.RayCluster)) {
						job.Status.CompletionTime = ptr.To(metav1.NewTime(testNow))
						if err := e.api.Create(context.Background(), job); err != nil {
							t.Fatal(err)
						}
					}
				}
			}
			if tc.started > 0 {
				pod.Annotations[constants.AnnotationDrainStarted] = testNow.Add(-tc.started).Format(time.RFC3339)
				hold := pod.Labels[constants.LabelKruiseLifecycleState] + "@" + pod.Annotations[constants.AnnotationKruiseLifecycleTimestamp]
				switch tc.record {
				case "":
					pod.Annotations[constants.AnnotationDrainHold] = hold
					pod.Annotations[constants.AnnotationDrainNode] = hex.EncodeToString([]byte("n1"))
				case "none":
					pod.Annotations[constants.AnnotationDrainHold] = hold
				case "stale":
					pod.Annotations[constants.AnnotationDrainHold] = constants.KruiseStatePreparingDelete + "@" + testNow.Add(-2*time.Hour).Format(time.RFC3339)
					pod.Annotations[constants.AnnotationDrainNode] = hex.EncodeToString([]byte("n1"))
				}
			}
			if err := e.api.Update(context.Background(), pod); err != nil {
				t.Fatal(err)
			}
			if !tc.drain {
				// Off takes removing the field and kray's annotation copy of it.
				e.updateSpec(rc, func(rc *rayv1.RayCluster) {
					rc.Spec.WorkerDrain = nil
					delete(rc.Annotations, constants.AnnotationWorkerDrain)
				})
			}
			if tc.pull == "forbidden" {
				e.r.APIReader = forbiddingNodeImages{e.api}
			}
			writes := e.mustReconcile(rc)
			if events := strings.Join(e.takeEvents(), "\n"); tc.pull == "forbidden" && !strings.Contains(events, EventNodeImagesForbidden) {
				t.Errorf("no %s Warning; events:\n%s", EventNodeImagesForbidden, events)
			}
			pod = e.get(&corev1.Pod{}, "c-g-worker-00000").(*corev1.Pod)
			_, hooked := pod.Labels[constants.LabelDrainHook]
			if hooked == tc.wantRelease {
				t.Errorf("drain hook on the pod: %v, want %v (writes %v)", hooked, !tc.wantRelease, writes)
			}
			if got := len(gcs.drained) > 0; got != tc.wantDrain {
				t.Errorf("drain requested: %v, want %v", got, tc.wantDrain)
			}
			if tc.wantDrain && pod.Annotations[constants.AnnotationDrainStarted] == "" {
				t.Error("the drain start was not recorded in the pod")
			}
			if tc.wantDrain && pod.Annotations[constants.AnnotationDrainNode] != hex.EncodeToString([]byte("n1")) {
				t.Errorf("drained node recorded as %q, want n1's ID", pod.Annotations[constants.AnnotationDrainNode])
			}
			if len(gcs.drained) > 1 {
				t.Errorf("%d drain requests, want at most one", len(gcs.drained))
			}
		})
	}
}

// forbiddingNodeImages is an API server whose RBAC refuses the operator NodeImages, as a single-namespace
// install's does.
type forbiddingNodeImages struct{ client.Reader }

func (r forbiddingNodeImages) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*kruisev1alpha1.NodeImage); ok {
		return apierrors.NewForbidden(schema.GroupResource{Group: "apps.kruise.io", Resource: "nodeimages"}, key.Name, errors.New("no ClusterRole grants it"))
	}
	return r.Reader.Get(ctx, key, obj, opts...)
}

// A worker Kruise has updated in place after its drain (lifecycle Updated, its hook released) is hooked
// again, which lets Kruise return it to Normal, and its drain start is forgotten, so its next drain gets a
// timeout of its own.
func TestUpdatedWorkerIsHookedAgain(t *testing.T) {
	rc := cluster("c").group("g", 1).with(func(rc *rayv1.RayCluster) {
		rc.Spec.WorkerDrain = &rayv1.WorkerDrainOptions{TimeoutSeconds: ptr.To[int32](60)}
	}).obj()
	e := newEnv(t, rc)
	e.r.Ray = &fakeRay{}
	e.converge(rc)
	pod := e.get(&corev1.Pod{}, "c-g-worker-00000").(*corev1.Pod)
	pod.Labels[constants.LabelKruiseLifecycleState] = constants.KruiseStateUpdated
	delete(pod.Labels, constants.LabelDrainHook)
	pod.Annotations = map[string]string{constants.AnnotationDrainStarted: testNow.Add(-time.Minute).Format(time.RFC3339)}
	if err := e.api.Update(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	e.mustReconcile(rc)
	pod = e.get(&corev1.Pod{}, "c-g-worker-00000").(*corev1.Pod)
	if pod.Labels[constants.LabelDrainHook] != constants.DrainHookValue || pod.Annotations[constants.AnnotationDrainStarted] != "" {
		t.Errorf("labels %v annotations %v: want the hook back and no drain start", pod.Labels, pod.Annotations)
	}
}

// Multi-host replicas are always labelled (their labels keep them whole); single-host workers get their
// replica index only with ReplicaIndexing, as in KubeRay, where the gate is off by default.
func TestReplicaLabels(t *testing.T) {
	cases := []struct {
		name            string
		hosts           int32
		indexing        bool
		wantPods        int
		wantReplicas    int // distinct replica names; 0 for single-host groups
		wantIndexLabels bool
	}{
		{name: "multi-host, gate off", hosts: 2, wantPods: 4, wantReplicas: 2, wantIndexLabels: true},
		{name: "multi-host, gate on", hosts: 2, indexing: true, wantPods: 4, wantReplicas: 2, wantIndexLabels: true},
		{name: "single-host, gate off", hosts: 1, wantPods: 2},
		{name: "single-host, gate on", hosts: 1, indexing: true, wantPods: 2, wantIndexLabels: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rc := cluster("c").group("g", 2).with(func(rc *rayv1.RayCluster) { rc.Spec.WorkerGroupSpecs[0].NumOfHosts = tc.hosts }).obj()
			e := newEnv(t, rc)
			e.r.ReplicaIndexing = tc.indexing
			e.converge(rc)
			list := &corev1.PodList{}
			if err := e.api.List(context.Background(), list, client.MatchingLabels{constants.LabelGroup: "g"}); err != nil {
				t.Fatal(err)
			}
			replicas := map[string]bool{}
			for _, p := range list.Items {
				if _, labelled := p.Labels[constants.LabelReplicaIndex]; labelled != tc.wantIndexLabels {
					t.Errorf("pod %s has a replica index: %v, want %v", p.Name, labelled, tc.wantIndexLabels)
				}
				if n := p.Labels[constants.LabelReplicaName]; n != "" {
					replicas[n] = true
				}
			}
			if len(list.Items) != tc.wantPods || len(replicas) != tc.wantReplicas {
				t.Errorf("%d pods in %d named replicas, want %d in %d", len(list.Items), len(replicas), tc.wantPods, tc.wantReplicas)
			}
		})
	}
}

// An Ingress kray owns is brought back to the spec; annotations others added are kept.
func TestIngressDriftIsCorrected(t *testing.T) {
	rc := cluster("c").with(func(rc *rayv1.RayCluster) { rc.Spec.HeadGroupSpec.EnableIngress = ptr.To(true) }).obj()
	e := newEnv(t, rc)
	e.converge(rc)
	ing := e.get(&networkingv1.Ingress{}, "c-head-ingress").(*networkingv1.Ingress)
	ing.Spec.Rules = nil
	ing.Annotations = map[string]string{"controller.example/added": "yes"}
	if err := e.api.Update(context.Background(), ing); err != nil {
		t.Fatal(err)
	}
	if writes := e.mustReconcile(rc); !slices.Contains(writes, "update Ingress/c-head-ingress") {
		t.Fatalf("writes %v lack the Ingress update", writes)
	}
	ing = e.get(&networkingv1.Ingress{}, "c-head-ingress").(*networkingv1.Ingress)
	if len(ing.Spec.Rules) == 0 || ing.Annotations["controller.example/added"] != "yes" {
		t.Errorf("Ingress %+v: want the rules back and the foreign annotation kept", ing)
	}
}

// A ServiceAccount the head template names must exist; kray reports it and does not create the head.
func TestMissingUserServiceAccount(t *testing.T) {
	rc := cluster("c").with(func(rc *rayv1.RayCluster) {
		rc.Spec.EnableInTreeAutoscaling = ptr.To(true)
		rc.Spec.HeadGroupSpec.Template.Spec.ServiceAccountName = "mine"
	}).obj()
	e := newEnv(t, rc)
	writes, _, err := e.reconcile(rc)
	if err == nil || slices.Contains(writes, "create StatefulSet/c-head") {
		t.Fatalf("error %v, writes %v: want an error and no head", err, writes)
	}
	if !slices.Contains(reasons(e.takeEvents()), EventAutoscalerSANotFound) {
		t.Errorf("no %s event", EventAutoscalerSANotFound)
	}
	if err := e.api.Create(context.Background(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "mine"}}); err != nil {
		t.Fatal(err)
	}
	if writes := e.mustReconcile(rc); !slices.Contains(writes, "create StatefulSet/c-head") {
		t.Errorf("writes %v: the head was not created once the ServiceAccount exists", writes)
	}
}

// Suspending scales the head and every group to 0 and finishes once the pods are gone.
func TestSuspendAndResume(t *testing.T) {
	rc := cluster("c").group("g", 2).obj()
	e := newEnv(t, rc)
	e.converge(rc)
	e.updateSpec(rc, func(rc *rayv1.RayCluster) { rc.Spec.Suspend = ptr.To(true) })
	e.converge(rc)
	if pods := e.pods(rc); len(pods) != 0 {
		t.Fatalf("pods %v left after a suspension", pods)
	}
	if st := e.get(&rayv1.RayCluster{}, "c").(*rayv1.RayCluster).Status.State; st != rayv1.Suspended {
		t.Errorf("state %q, want suspended", st)
	}
	e.updateSpec(rc, func(rc *rayv1.RayCluster) { rc.Spec.Suspend = ptr.To(false) })
	e.converge(rc)
	if pods := e.pods(rc); len(pods) != 3 {
		t.Errorf("pods %v after resuming, want 3", pods)
	}
	if got := ptr.Deref(e.get(&kruisev1beta1.StatefulSet{}, "c-head").(*kruisev1beta1.StatefulSet).Spec.Replicas, 0); got != 1 {
		t.Errorf("head replicas %d after resuming", got)
	}
}

// On a cluster with token auth, the drain client sends the token of the cluster's Secret; without a readable
// token no drain is asked, the failure is reported, and the pod waits for the timeout.
func TestDrainSendsTheClusterToken(t *testing.T) {
	for _, secretGone := range []bool{false, true} {
		t.Run(map[bool]string{false: "token", true: "no Secret"}[secretGone], func(t *testing.T) {
			e, gcs, rc := drainingEnv(t, ray.NodeStatusRunning, func(rc *rayv1.RayCluster) {
				rc.Spec.RayVersion = "2.52.0"
				rc.Spec.AuthOptions = &rayv1.AuthOptions{Mode: rayv1.AuthModeToken}
			})
			secret := e.get(&corev1.Secret{}, "c").(*corev1.Secret)
			if secretGone {
				if err := e.api.Delete(context.Background(), secret); err != nil {
					t.Fatal(err)
				}
			}
			e.takeEvents()
			pod := e.get(&corev1.Pod{}, "c-g-worker-00000").(*corev1.Pod)
			pod.Labels[constants.LabelKruiseLifecycleState] = constants.KruiseStatePreparingDelete
			if err := e.api.Update(context.Background(), pod); err != nil {
				t.Fatal(err)
			}
			e.mustReconcile(rc)
			pod = e.get(&corev1.Pod{}, "c-g-worker-00000").(*corev1.Pod)
			if _, hooked := pod.Labels[constants.LabelDrainHook]; !hooked {
				t.Fatal("the pod was released at once; it must wait for its drain or the timeout")
			}
			if secretGone {
				if len(gcs.drained) != 0 {
					t.Errorf("a drain was asked without the token")
				}
				if got := reasons(e.takeEvents()); !slices.Contains(got, EventDrainFailed) {
					t.Errorf("events %v lack %s", got, EventDrainFailed)
				}
				return
			}
			want := string(secret.Data["auth_token"])
			if want == "" || len(gcs.drained) != 1 || !slices.Contains(gcs.tokens, want) || slices.Contains(gcs.tokens, "") {
				t.Errorf("drains %v with tokens %q, want one drain with the Secret's token", gcs.drained, gcs.tokens)
			}
		})
	}
}

// A new cluster's CloneSets and Services are created at once, after the head StatefulSet, itself after what
// the head needs (the autoscaler's RBAC); the dry runs before them.
func TestNewClusterCreationsGoOutTogether(t *testing.T) {
	rc := cluster("c").group("a", 1).group("b", 1).with(func(rc *rayv1.RayCluster) {
		rc.Spec.EnableInTreeAutoscaling = ptr.To(true)
	}).obj()
	e := newEnv(t, rc)
	together := []string{"CloneSet/c-a-worker", "CloneSet/c-b-worker", "Service/c-head-svc"}
	w := &overlapWriter{Writer: e.writer, hold: together, started: map[string]int{}, done: map[string]int{}}
	e.r.Writer = w
	if _, _, err := e.reconcile(rc); err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	if w.most != len(together) {
		t.Errorf("at most %d creations in flight at once, want %d: started %v, done %v", w.most, len(together), w.started, w.done)
	}
	if head := w.started["StatefulSet/c-head"]; head == 0 || head < w.done["RoleBinding/c"] {
		t.Errorf("the head StatefulSet started before the autoscaler's RBAC was in place: %v, %v", w.started, w.done)
	}
	for _, obj := range together {
		if w.started[obj] == 0 {
			t.Fatalf("%s was not created: %v", obj, w.started)
		}
		if w.started[obj] < w.done["StatefulSet/c-head"] {
			t.Errorf("%s started before the head StatefulSet was created", obj)
		}
	}
}

// overlapWriter records when each creation starts and ends, and how many are in flight at most. Each of the
// creations in hold waits, up to a second, until as many creations are in flight, so that creations sent at
// once are seen together however the goroutines are scheduled.
type overlapWriter struct {
	shared.Writer
	hold []string

	mu       sync.Mutex
	step     int
	inFlight int
	most     int
	started  map[string]int
	done     map[string]int
}

func (w *overlapWriter) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if slices.ContainsFunc(opts, func(o client.CreateOption) bool { return o == client.DryRunAll }) {
		return w.Writer.Create(ctx, obj, opts...)
	}
	// The kind is set by the builders on every object kray creates.
	key := obj.GetObjectKind().GroupVersionKind().Kind + "/" + obj.GetName()
	w.mu.Lock()
	w.step++
	w.started[key] = w.step
	w.inFlight++
	w.most = max(w.most, w.inFlight)
	w.mu.Unlock()
	for deadline := time.Now().Add(time.Second); slices.Contains(w.hold, key) && time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		w.mu.Lock()
		n := w.most
		w.mu.Unlock()
		if n >= len(w.hold) {
			break
		}
	}
	err := w.Writer.Create(ctx, obj, opts...)
	w.mu.Lock()
	w.step++
	w.done[key] = w.step
	w.inFlight--
	w.mu.Unlock()
	return err
}

// A spec made invalid while Kruise holds a worker for its drain (an unreadable kray.io/worker-drain copy)
// does not leave the pod held for ever: kray drains it with the default timeout and looks at it again.
func TestDrainWhileSpecInvalid(t *testing.T) {
	e, gcs, rc := drainingEnv(t, ray.NodeStatusRunning)
	pod := e.get(&corev1.Pod{}, "c-g-worker-00000").(*corev1.Pod)
	pod.Labels[constants.LabelKruiseLifecycleState] = constants.KruiseStatePreparingUpdate
	pod.Spec.Containers[0].Image = "rayproject/ray:2.9.0"
	if err := e.api.Update(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	e.updateSpec(rc, func(rc *rayv1.RayCluster) {
		rc.Spec.WorkerDrain = nil
		rc.Annotations[constants.AnnotationWorkerDrain] = `{"timeoutSeconds": "soon"}`
	})
	_, res, err := e.reconcile(rc)
	if err != nil {
		t.Fatal(err)
	}
	if len(gcs.drained) != 1 || res.RequeueAfter == 0 {
		t.Errorf("%d drain requests, requeue after %s: want the held pod drained and looked at again", len(gcs.drained), res.RequeueAfter)
	}
	cur := &rayv1.RayCluster{}
	if err := e.api.Get(context.Background(), client.ObjectKeyFromObject(rc), cur); err != nil {
		t.Fatal(err)
	}
	if c := meta.FindStatusCondition(cur.Status.Conditions, "RayClusterSpecValid"); c == nil || c.Status != metav1.ConditionFalse {
		t.Errorf("conditions %+v: want the spec reported invalid", cur.Status.Conditions)
	}
}

// A worker held while the head pod is replaced (a Recreate upgrade replaces both at once) is released without a
// drain when the cluster has no GCS fault tolerance, since its Ray node goes with the head's GCS; with GCS
// fault tolerance the node outlives the head, so it is drained.
func TestDrainWhileHeadIsReplaced(t *testing.T) {
	for _, ft := range []bool{false, true} {
		t.Run(fmt.Sprintf("ft=%v", ft), func(t *testing.T) {
			e, gcs, rc := drainingEnv(t, ray.NodeStatusRunning, func(rc *rayv1.RayCluster) {
				if ft {
					rc.Annotations = map[string]string{constants.AnnotationFTEnabled: "true"}
				}
			})
			head := e.get(&corev1.Pod{}, "c-head-0").(*corev1.Pod)
			if err := e.api.Delete(context.Background(), head); err != nil {
				t.Fatal(err)
			}
			pod := e.get(&corev1.Pod{}, "c-g-worker-00000").(*corev1.Pod)
			pod.Labels[constants.LabelKruiseLifecycleState] = constants.KruiseStatePreparingDelete
			if err := e.api.Update(context.Background(), pod); err != nil {
				t.Fatal(err)
			}
			e.mustReconcile(rc)
			pod = e.get(&corev1.Pod{}, "c-g-worker-00000").(*corev1.Pod)
			_, hooked := pod.Labels[constants.LabelDrainHook]
			if drained := len(gcs.drained) > 0; drained != ft || hooked != ft {
				t.Errorf("drain requested %v, still held %v; want both %v", drained, hooked, ft)
			}
		})
	}
}
