package rayjob

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/internal/cachetest"
	"github.com/kray-project/kray/internal/controller/raycluster"
	"github.com/kray-project/kray/internal/controller/shared"
	"github.com/kray-project/kray/internal/fixture"
	"github.com/kray-project/kray/internal/writetest"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/dashboard"
	"github.com/kray-project/kray/pkg/names"
)

// fakeDashboard is an in-memory Job API: submissions are recorded and refused when their id is taken, as
// Ray's dashboard does.
type fakeDashboard struct {
	mu        sync.Mutex
	jobs      map[string]*dashboard.JobInfo
	accepted  int
	refused   int
	stopped   []string
	lastToken string
	// bases are the dashboard addresses the calls went to.
	bases map[string]bool
	// down, when set, is the error of every read.
	down error
}

func newFakeDashboard() *fakeDashboard { return &fakeDashboard{jobs: map[string]*dashboard.JobInfo{}} }

func (f *fakeDashboard) Jobs(base, token string) dashboard.JobAPI {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lastToken = token
	if f.bases == nil {
		f.bases = map[string]bool{}
	}
	f.bases[base] = true
	return f
}

func (f *fakeDashboard) GetJob(_ context.Context, id string) (*dashboard.JobInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down != nil {
		return nil, f.down
	}
	j, ok := f.jobs[id]
	if !ok {
		return nil, dashboard.ErrNotFound
	}
	c := *j
	return &c, nil
}

func (f *fakeDashboard) Submit(_ context.Context, req dashboard.SubmitRequest) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.jobs[req.SubmissionID]; ok {
		f.refused++
		return dashboard.ErrAlreadySubmitted
	}
	f.accepted++
	f.jobs[req.SubmissionID] = &dashboard.JobInfo{SubmissionID: req.SubmissionID, Status: rayv1.JobStatusPending}
	return nil
}

func (f *fakeDashboard) Stop(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	j, ok := f.jobs[id]
	if !ok {
		return dashboard.ErrNotFound
	}
	f.stopped = append(f.stopped, id)
	j.Status = rayv1.JobStatusStopped
	return nil
}

// forget drops every job, as a Ray head restarted without GCS fault tolerance does.
func (f *fakeDashboard) forget() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.jobs = map[string]*dashboard.JobInfo{}
}

// set moves a submitted job to status.
func (f *fakeDashboard) set(id string, status rayv1.JobStatus) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.jobs[id].Status = status
}

// env is a reconciler against a fake API server that assigns UIDs, with the recording writer.
type env struct {
	t   *testing.T
	api client.Client
	// cache is the reconcilers' informer cache: the real label filters, synced before each reconcile
	// unless lagging is set.
	cache   *cachetest.Cache
	lagging bool
	writer  *writetest.Writer
	dash    *fakeDashboard
	rec     *record.FakeRecorder
	now     time.Time
	n       int
}

func newEnv(t *testing.T, objs ...client.Object) *env {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := rayv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	uids := 0
	api := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).
		WithStatusSubresource(&rayv1.RayJob{}, &rayv1.RayCluster{}, &batchv1.Job{}).
		WithInterceptorFuncs(interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			uids++
			obj.SetUID(types.UID(fmt.Sprintf("uid-%d", uids)))
			return c.Create(ctx, obj, opts...)
		}}).Build()
	cache, err := cachetest.New(api, scheme, raycluster.CacheOptions(nil),
		&rayv1.RayJobList{}, &rayv1.RayClusterList{}, &batchv1.JobList{}, &corev1.PodList{}, &corev1.ServiceList{})
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, api: api, cache: cache, writer: writetest.New(api), dash: newFakeDashboard(), rec: record.NewFakeRecorder(100), now: t0}
}

// envClock is the env's clock, which a test moves by setting e.now.
type envClock struct{ e *env }

func (c envClock) Now() time.Time                  { return c.e.now }
func (c envClock) Since(t time.Time) time.Duration { return c.e.now.Sub(t) }

// reconciler is a fresh Reconciler, as after an operator restart; each names attempts with its own suffixes.
func (e *env) reconciler() *Reconciler {
	e.n++
	instance := e.n
	calls := 0
	return &Reconciler{Cache: e.cache, APIReader: e.api, Writer: e.writer, Events: shared.Events{Recorder: e.rec}, Dashboards: e.dash,
		Clock: envClock{e},
		Suffix: func() string {
			calls++
			return fmt.Sprintf("r%dc%d", instance, calls)
		}}
}

// newEnvWithJob is an env holding job as a user creates it: no UID (the fake API assigns one), no finalizer.
func newEnvWithJob(t *testing.T, job *rayv1.RayJob) *env {
	t.Helper()
	job.Finalizers = nil
	job.UID = ""
	return newEnv(t, job)
}

// steps reconciles the RayJob n times, each time with a new operator instance, marking clusters ready.
func (e *env) steps(n int) {
	e.t.Helper()
	for i := 0; i < n; i++ {
		e.reconcile(e.reconciler(), "train")
		e.playRayCluster()
	}
}

func (e *env) reconcile(r *Reconciler, name string) reconcile.Result {
	e.t.Helper()
	if !e.lagging {
		if err := e.cache.Sync(context.Background()); err != nil {
			e.t.Fatal(err)
		}
	}
	res, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: name}})
	if err != nil && !apierrors.IsConflict(err) {
		e.t.Fatalf("reconcile: %v", err)
	}
	return res
}

func (e *env) job(name string) *rayv1.RayJob {
	e.t.Helper()
	job := &rayv1.RayJob{}
	if err := e.api.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: name}, job); err != nil {
		e.t.Fatal(err)
	}
	return job
}

// playRayCluster marks every RayCluster ready, with its head pod, as kray's RayCluster controller and Kruise
// would once its pods run.
func (e *env) playRayCluster() {
	e.t.Helper()
	var list rayv1.RayClusterList
	if err := e.api.List(context.Background(), &list); err != nil {
		e.t.Fatal(err)
	}
	for i := range list.Items {
		rc := &list.Items[i]
		if rc.Status.State != rayv1.Ready && rc.DeletionTimestamp == nil {
			head := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: names.HeadPod(rc.Name), Namespace: rc.Namespace,
				Labels: map[string]string{constants.LabelCluster: rc.Name}}}
			if err := e.api.Create(context.Background(), head); err != nil && !apierrors.IsAlreadyExists(err) {
				e.t.Fatal(err)
			}
			rc.Status.State = rayv1.Ready
			if err := e.api.Status().Update(context.Background(), rc); err != nil {
				e.t.Fatal(err)
			}
		}
	}
}

// count is how many writes of verb on kind were recorded.
func (e *env) count(verb, kind string) int {
	n := 0
	for _, w := range e.writer.Writes() {
		if w.Verb == verb && w.Kind == kind && !w.DryRun {
			n++
		}
	}
	return n
}

func TestHTTPModeOneClusterAndOneSubmissionAcrossRestartsAndConflicts(t *testing.T) {
	e := newEnvWithJob(t, newJob(mode(rayv1.HTTPMode)))
	// Every step runs with a new operator instance, and every status write fails once with a conflict
	// first: the retried reconcile must reuse the names already stored, not make new ones.
	step := func() {
		e.writer.ClearFaults()
		e.writer.FailOnce(writetest.Status, "RayJob", "train", apierrors.NewConflict(schema.GroupResource{Resource: "rayjobs"}, "train", nil))
		e.reconcile(e.reconciler(), "train")
		e.reconcile(e.reconciler(), "train")
		e.playRayCluster()
	}
	for i := 0; i < 8 && e.job("train").Status.JobDeploymentStatus != rayv1.JobDeploymentStatusRunning; i++ {
		step()
	}
	got := e.job("train")
	if got.Status.JobDeploymentStatus != rayv1.JobDeploymentStatusRunning {
		t.Fatalf("not Running after 8 steps: %+v", got.Status)
	}
	for i := 0; i < 3; i++ {
		step()
	}
	e.dash.set(got.Status.JobId, rayv1.JobStatusRunning)
	step()
	if s := e.job("train").Status; s.JobStatus != rayv1.JobStatusRunning {
		t.Fatalf("jobStatus = %s, want RUNNING", s.JobStatus)
	}
	e.dash.set(got.Status.JobId, rayv1.JobStatusSucceeded)
	step()
	final := e.job("train").Status
	if final.JobDeploymentStatus != rayv1.JobDeploymentStatusComplete || ptr.Deref(final.Succeeded, 0) != 1 || final.EndTime == nil {
		t.Fatalf("final status %+v, want Complete with one success", final)
	}
	if n := e.count(writetest.Create, "RayCluster"); n != 1 {
		t.Errorf("RayCluster creates = %d, want 1", n)
	}
	if e.dash.accepted != 1 {
		t.Errorf("submissions accepted = %d, want 1", e.dash.accepted)
	}
	var clusters rayv1.RayClusterList
	if err := e.api.List(context.Background(), &clusters); err != nil || len(clusters.Items) != 1 || clusters.Items[0].Name != final.RayClusterName {
		t.Errorf("RayClusters = %d (%v), want only %s", len(clusters.Items), err, final.RayClusterName)
	}
}

func TestK8sJobModeCreatesOneSubmitter(t *testing.T) {
	e := newEnvWithJob(t, newJob())
	e.steps(6)
	st := e.job("train").Status
	if st.JobDeploymentStatus != rayv1.JobDeploymentStatusRunning {
		t.Fatalf("status %s, want Running", st.JobDeploymentStatus)
	}
	sub := &batchv1.Job{}
	if err := e.api.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "train"}, sub); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, v := range sub.Spec.Template.Spec.Containers[0].Env {
		env[v.Name] = v.Value
	}
	if env[EnvRayJobSubmissionID] != st.JobId || env[EnvRayDashboardAddress] != st.DashboardURL {
		t.Errorf("submitter env %v, want the job id %s and dashboard %s", env, st.JobId, st.DashboardURL)
	}
	if sub.Labels[constants.LabelCluster] != st.RayClusterName || sub.Spec.Template.Labels[constants.LabelCluster] != "" {
		t.Errorf("ray.io/cluster on the Job = %q, on its pods = %q; want the cluster on the Job only",
			sub.Labels[constants.LabelCluster], sub.Spec.Template.Labels[constants.LabelCluster])
	}
	// The submitter runs: it submits, the job succeeds, the submitter's Job completes.
	if err := e.dash.Submit(context.Background(), dashboard.SubmitRequest{SubmissionID: st.JobId}); err != nil {
		t.Fatal(err)
	}
	e.dash.set(st.JobId, rayv1.JobStatusSucceeded)
	e.reconcile(e.reconciler(), "train")
	if s := e.job("train").Status.JobDeploymentStatus; s != rayv1.JobDeploymentStatusRunning {
		t.Fatalf("before the submitter finished: %s, want Running", s)
	}
	sub.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(e.now)}}
	if err := e.api.Status().Update(context.Background(), sub); err != nil {
		t.Fatal(err)
	}
	e.reconcile(e.reconciler(), "train")
	if s := e.job("train").Status.JobDeploymentStatus; s != rayv1.JobDeploymentStatusComplete {
		t.Fatalf("after: %s, want Complete", s)
	}
	if n := e.count(writetest.Create, "Job"); n != 1 {
		t.Errorf("submitter creates = %d, want 1", n)
	}
	if e.dash.accepted != 1 {
		t.Errorf("submissions = %d, want 1", e.dash.accepted)
	}
}

func TestDeletingARunningRayJobStopsTheRayJob(t *testing.T) {
	e := newEnvWithJob(t, newJob(mode(rayv1.HTTPMode)))
	e.steps(6)
	id := e.job("train").Status.JobId
	if e.dash.accepted != 1 {
		t.Fatalf("not submitted: %+v", e.job("train").Status)
	}
	if err := e.api.Delete(context.Background(), e.job("train")); err != nil {
		t.Fatal(err)
	}
	e.reconcile(e.reconciler(), "train")
	if len(e.dash.stopped) != 1 || e.dash.stopped[0] != id {
		t.Errorf("stopped %v, want [%s]", e.dash.stopped, id)
	}
	err := e.api.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "train"}, &rayv1.RayJob{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("the RayJob is still held: %v", err)
	}
}

func TestTokenAuthClusterGetsTheTokenOnDashboardCalls(t *testing.T) {
	job := newJob(mode(rayv1.HTTPMode), func(j *rayv1.RayJob) {
		j.Spec.RayClusterSpec.AuthOptions = &rayv1.AuthOptions{Mode: rayv1.AuthModeToken}
		j.Spec.RayClusterSpec.RayVersion = "2.52.0"
	})
	e := newEnvWithJob(t, job)
	e.steps(3)
	name := e.job("train").Status.RayClusterName
	if name == "" {
		t.Fatalf("no cluster named: %+v", e.job("train").Status)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: names.AuthSecret(name), Namespace: "ns"}, Data: map[string][]byte{"auth_token": []byte("s3cret")}}
	if err := e.api.Create(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		e.reconcile(e.reconciler(), "train")
	}
	if e.dash.accepted != 1 || e.dash.lastToken != "s3cret" {
		t.Errorf("accepted %d with token %q, want one submission carrying the cluster's token", e.dash.accepted, e.dash.lastToken)
	}
}

// kray calls the dashboard of the RayJob's cluster at the address it derives from the cluster, never at the
// one the status holds: whoever may write a status must not steer kray's calls to another namespace.
func TestDashboardCallsGoToTheClustersAddressNotTheStatus(t *testing.T) {
	e := newEnvWithJob(t, newJob(mode(rayv1.HTTPMode)))
	e.steps(6)
	job := e.job("train")
	if job.Status.JobDeploymentStatus != rayv1.JobDeploymentStatusRunning {
		t.Fatalf("status %s, want Running", job.Status.JobDeploymentStatus)
	}
	want := "http://" + job.Status.DashboardURL
	job.Status.DashboardURL = "dashboard.other-team.svc.cluster.local:8265"
	if err := e.api.Status().Update(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	e.dash.bases = nil
	e.reconcile(e.reconciler(), "train")
	if len(e.dash.bases) != 1 || !e.dash.bases[want] {
		t.Errorf("calls went to %v, want only %s", e.dash.bases, want)
	}
}

// The event of a write that happened is recorded even when the status write after it loses a conflict.
func TestActionEventsSurviveAFailedStatusWrite(t *testing.T) {
	e := newEnvWithJob(t, newJob(mode(rayv1.HTTPMode)))
	e.steps(2) // the finalizer, then the names
	if st := e.job("train").Status; st.JobDeploymentStatus != rayv1.JobDeploymentStatusInitializing {
		t.Fatalf("status %s, want Initializing", st.JobDeploymentStatus)
	}
	e.reconcile(e.reconciler(), "train") // creates the cluster
	e.playRayCluster()
	e.writer.FailOnce(writetest.Status, "RayJob", "train", apierrors.NewConflict(schema.GroupResource{Resource: "rayjobs"}, "train", nil))
	e.reconcile(e.reconciler(), "train") // the cluster is ready: the head Service, then Running, whose status write conflicts
	var reasons []string
	for len(e.rec.Events) > 0 {
		reasons = append(reasons, strings.Fields(<-e.rec.Events)[1])
	}
	if !slices.Contains(reasons, shared.EventCreatedRayCluster) || !slices.Contains(reasons, shared.EventCreatedService) {
		t.Errorf("events %v, want CreatedRayCluster and CreatedService although the status write conflicted", reasons)
	}
	if st := e.job("train").Status; st.JobDeploymentStatus != rayv1.JobDeploymentStatusInitializing {
		t.Errorf("status %s: the conflicting write must not have landed", st.JobDeploymentStatus)
	}
}

// The write that stores a job's end can be lost (a conflict, a server error, an operator stopped between the
// decision and the write). Nothing may be cleaned up before it is stored: otherwise the next reconcile sees
// a Running job without its cluster, counts a failure and, with backoffLimit, runs the succeeded job again.
func TestTerminalStatusIsStoredBeforeCleanup(t *testing.T) {
	faults := map[string]error{
		"conflict":     apierrors.NewConflict(schema.GroupResource{Resource: "rayjobs"}, "train", nil),
		"server error": apierrors.NewInternalError(errors.New("etcd timeout")),
	}
	for name, fault := range faults {
		t.Run(name, func(t *testing.T) {
			e := newEnvWithJob(t, newJob(mode(rayv1.HTTPMode), func(j *rayv1.RayJob) {
				j.Spec.BackoffLimit = ptr.To[int32](2)
				j.Spec.ShutdownAfterJobFinishes = true
			}))
			e.steps(6)
			st := e.job("train").Status
			if st.JobDeploymentStatus != rayv1.JobDeploymentStatusRunning || e.dash.accepted != 1 {
				t.Fatalf("not running with one submission: %+v, accepted %d", st, e.dash.accepted)
			}
			e.dash.set(st.JobId, rayv1.JobStatusSucceeded)
			e.writer.FailOnce(writetest.Status, "RayJob", "train", fault)
			r := e.reconciler()
			if _, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "train"}}); err != nil && !errors.Is(err, fault) {
				t.Fatalf("reconcile: %v", err)
			}
			if n := e.count(writetest.Delete, "RayCluster"); n != 0 {
				t.Fatalf("the cluster was deleted (%d deletes) before the job's end was stored", n)
			}
			e.steps(4)
			final := e.job("train").Status
			if final.JobDeploymentStatus != rayv1.JobDeploymentStatusComplete || ptr.Deref(final.Succeeded, 0) != 1 || ptr.Deref(final.Failed, 0) != 0 {
				t.Errorf("final status %s, succeeded %d, failed %d; want Complete, 1, 0",
					final.JobDeploymentStatus, ptr.Deref(final.Succeeded, 0), ptr.Deref(final.Failed, 0))
			}
			if n := e.count(writetest.Create, "RayCluster"); n != 1 {
				t.Errorf("RayCluster creates = %d, want 1", n)
			}
			if n := e.count(writetest.Delete, "RayCluster"); n != 1 {
				t.Errorf("RayCluster deletes = %d, want 1 (shutdownAfterJobFinishes, once the end is stored)", n)
			}
			if e.dash.accepted != 1 {
				t.Errorf("submissions accepted = %d, want 1", e.dash.accepted)
			}
		})
	}
}

// A Ray head restarted without GCS fault tolerance forgets its jobs. A job kray submitted and the dashboard
// then no longer knows fails its attempt; it is never submitted a second time in that attempt, and
// backoffLimit runs a new attempt on a new cluster. The accepted submission is stored as PENDING at once, so
// even a head lost before the first poll is recognised.
func TestHTTPModeJobLostWithItsHeadFailsTheAttempt(t *testing.T) {
	job := newJob(mode(rayv1.HTTPMode), func(j *rayv1.RayJob) { j.Spec.BackoffLimit = ptr.To[int32](1) })
	job.Finalizers, job.UID = nil, "lost-uid" // its own UID: the metrics below are process-wide
	e := newEnv(t, job)
	e.steps(6)
	first := e.job("train").Status
	if e.dash.accepted != 1 || first.JobStatus != rayv1.JobStatusPending {
		t.Fatalf("after the submission: accepted %d, jobStatus %q; want 1 and PENDING stored", e.dash.accepted, first.JobStatus)
	}
	e.dash.forget()
	e.reconcile(e.reconciler(), "train")
	st := e.job("train").Status
	if st.JobDeploymentStatus != rayv1.JobDeploymentStatusRetrying || ptr.Deref(st.Failed, 0) != 1 || e.dash.accepted != 1 {
		t.Fatalf("after the loss: %s failed=%d accepted=%d, want Retrying, 1, and no new submission", st.JobDeploymentStatus, ptr.Deref(st.Failed, 0), e.dash.accepted)
	}
	e.steps(8)
	second := e.job("train").Status
	if second.JobDeploymentStatus != rayv1.JobDeploymentStatusRunning || second.RayClusterName == first.RayClusterName || second.JobId == first.JobId {
		t.Fatalf("retry: %s on %s as %s, want Running on a new cluster under a new id", second.JobDeploymentStatus, second.RayClusterName, second.JobId)
	}
	if e.dash.accepted != 2 || e.count(writetest.Create, "RayCluster") != 2 {
		t.Errorf("accepted %d, clusters %d: want one submission and one cluster per attempt", e.dash.accepted, e.count(writetest.Create, "RayCluster"))
	}
	e.dash.set(second.JobId, rayv1.JobStatusSucceeded)
	e.steps(2)
	uid := string(e.job("train").UID)
	want := map[string]bool{
		"kuberay_job_info{name=train,namespace=ns,uid=" + uid + "}":                                                                    true,
		"kuberay_job_deployment_status{deployment_status=Complete,name=train,namespace=ns,uid=" + uid + "}":                            true,
		"kuberay_job_execution_duration_seconds{job_deployment_status=Retrying,name=train,namespace=ns,retry_count=0,uid=" + uid + "}": true,
		"kuberay_job_execution_duration_seconds{job_deployment_status=Complete,name=train,namespace=ns,retry_count=1,uid=" + uid + "}": true,
	}
	got := jobSeries(t, uid)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("KubeRay's RayJob series (-want +got):\n%s", diff)
	}
	if err := e.api.Delete(context.Background(), e.job("train")); err != nil {
		t.Fatal(err)
	}
	e.steps(2)
	if got := jobSeries(t, uid); len(got) != 0 {
		t.Errorf("series of a deleted RayJob: %v", got)
	}
}

// jobSeries is every kuberay_job_* series labelled with uid, as "name{label=value,...}".
func jobSeries(t *testing.T, uid string) map[string]bool {
	t.Helper()
	families, err := crmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, f := range families {
		if !strings.HasPrefix(f.GetName(), "kuberay_job_") {
			continue
		}
		for _, m := range f.GetMetric() {
			var labels []string
			mine := false
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
				mine = mine || (l.GetName() == "uid" && l.GetValue() == uid)
			}
			if mine {
				out[f.GetName()+"{"+strings.Join(labels, ",")+"}"] = true
			}
		}
	}
	return out
}

// drainEvents returns the reasons of the events recorded so far.
func (e *env) drainEvents() []string {
	var reasons []string
	for len(e.rec.Events) > 0 {
		reasons = append(reasons, strings.Fields(<-e.rec.Events)[1])
	}
	return reasons
}

// A Service or submitter Job of the name a RayJob needs, made by someone else, is never taken as the job's
// own nor changed: the RayJob's message says whose it is, one Warning event says it once, and once it is
// gone kray makes its own.
func TestObjectsOfOthersAreReportedNotTaken(t *testing.T) {
	foreignSvc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "train-head-svc", Namespace: "ns"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "theirs"}}}
	foreignJob := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ns"}}
	for _, tt := range []struct {
		name   string
		obj    client.Object
		reason string
	}{
		{"Service", foreignSvc, shared.EventFailedToCreateService},
		{"Job", foreignJob, EventFailedToCreateRayJobSubmitter},
	} {
		t.Run(tt.name, func(t *testing.T) {
			job := newJob()
			job.Finalizers, job.UID = nil, ""
			e := newEnv(t, job, tt.obj.DeepCopyObject().(client.Object))
			e.steps(8)
			st := e.job("train").Status
			if want := tt.name + " ns/" + tt.obj.GetName() + " exists and is not controlled by RayJob ns/train"; !strings.Contains(st.Message, want) {
				t.Errorf("message %q, want it to say %q", st.Message, want)
			}
			var warned int
			for _, r := range e.drainEvents() {
				if r == tt.reason {
					warned++
				}
			}
			if warned != 1 {
				t.Errorf("%s events = %d, want 1", tt.reason, warned)
			}
			for _, w := range e.writer.Writes() {
				if w.Name == tt.obj.GetName() && w.Kind == tt.name && (w.Verb == writetest.Update || w.Verb == writetest.Delete || w.Verb == writetest.Patch) {
					t.Errorf("kray wrote to the other's %s: %s", tt.name, w)
				}
			}
			if err := e.api.Delete(context.Background(), tt.obj.DeepCopyObject().(client.Object)); err != nil {
				t.Fatal(err)
			}
			e.steps(2)
			switch tt.name {
			case "Service":
				svc := &corev1.Service{}
				if err := e.api.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "train-head-svc"}, svc); err != nil || metav1.GetControllerOf(svc) == nil {
					t.Errorf("once the other's Service is gone: %v %+v, want the RayJob's own", err, svc.OwnerReferences)
				}
			case "Job":
				if n := e.count(writetest.Create, "Job"); n < 2 {
					t.Errorf("submitter creates = %d: the RayJob's own was never created after the other's went", n)
				}
			}
		})
	}
}

// A running job's head Service deleted or re-pointed by someone is put back by the next reconcile.
func TestRunningJobKeepsItsHeadService(t *testing.T) {
	e := newEnvWithJob(t, newJob(mode(rayv1.HTTPMode)))
	e.steps(6)
	st := e.job("train").Status
	if st.JobDeploymentStatus != rayv1.JobDeploymentStatusRunning {
		t.Fatalf("status %s, want Running", st.JobDeploymentStatus)
	}
	key := types.NamespacedName{Namespace: "ns", Name: "train-head-svc"}
	svc := &corev1.Service{}
	if err := e.api.Get(context.Background(), key, svc); err != nil {
		t.Fatal(err)
	}
	svc.Spec.Selector = map[string]string{"app": "elsewhere"}
	if err := e.api.Update(context.Background(), svc); err != nil {
		t.Fatal(err)
	}
	e.reconcile(e.reconciler(), "train")
	if err := e.api.Get(context.Background(), key, svc); err != nil || svc.Spec.Selector[constants.LabelCluster] != st.RayClusterName {
		t.Fatalf("re-pointed Service: %v selector %v, want %s's head", err, svc.Spec.Selector, st.RayClusterName)
	}
	if err := e.api.Delete(context.Background(), svc); err != nil {
		t.Fatal(err)
	}
	e.reconcile(e.reconciler(), "train")
	if err := e.api.Get(context.Background(), key, svc); err != nil {
		t.Errorf("deleted Service not recreated: %v", err)
	}
}

// Each failed read of the dashboard in a row doubles the wait before the next, per RayJob; a read that
// answers brings the poll back to PollInterval.
func TestFailingDashboardBacksOffPerRayJob(t *testing.T) {
	e := newEnvWithJob(t, newJob(mode(rayv1.HTTPMode)))
	e.steps(6)
	if st := e.job("train").Status; st.JobDeploymentStatus != rayv1.JobDeploymentStatusRunning {
		t.Fatalf("status %s, want Running", st.JobDeploymentStatus)
	}
	r := e.reconciler()
	e.dash.mu.Lock()
	e.dash.down = errors.New("context deadline exceeded")
	e.dash.mu.Unlock()
	var got []time.Duration
	for i := 0; i < 4; i++ {
		got = append(got, e.reconcile(r, "train").RequeueAfter)
	}
	if want := []time.Duration{3 * time.Second, 6 * time.Second, 12 * time.Second, 24 * time.Second}; !slices.Equal(got, want) {
		t.Errorf("requeues while the dashboard fails: %v, want %v", got, want)
	}
	if st := e.job("train").Status; st.JobDeploymentStatus != rayv1.JobDeploymentStatusRunning || !strings.Contains(st.Message, "deadline exceeded") {
		t.Errorf("status %s %q, want Running with the reason in the message", st.JobDeploymentStatus, st.Message)
	}
	e.dash.mu.Lock()
	e.dash.down = nil
	e.dash.mu.Unlock()
	if res := e.reconcile(r, "train"); res.RequeueAfter != PollInterval {
		t.Errorf("dashboard back: requeue %s, want %s", res.RequeueAfter, PollInterval)
	}
}

// A RayJob whose namespace is being deleted goes with it: a create refused for that reason is neither an
// error nor a status change.
func TestNamespaceGoingAwayIsNotAFailure(t *testing.T) {
	e := newEnvWithJob(t, newJob(mode(rayv1.HTTPMode)))
	e.steps(2) // the finalizer, then the names
	terminating := &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: 403, Reason: metav1.StatusReasonForbidden,
		Message: "unable to create new content in namespace ns because it is being terminated",
		Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{Type: corev1.NamespaceTerminatingCause}}}}}
	e.writer.Fail(writetest.Create, "RayCluster", "", terminating)
	before, writes := e.job("train").Status, e.count(writetest.Status, "RayJob")
	if err := e.cache.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	res, err := e.reconciler().Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "train"}})
	if err != nil || res.RequeueAfter != 0 {
		t.Fatalf("Reconcile: %+v, %v; want no error and no retry", res, err)
	}
	if e.count(writetest.Create, "RayCluster") != 1 {
		t.Fatalf("the create this test is about was not tried")
	}
	if after := e.job("train").Status; after.JobDeploymentStatus != before.JobDeploymentStatus || e.count(writetest.Status, "RayJob") != writes {
		t.Errorf("status %s after %d status writes; want %s and no new write", after.JobDeploymentStatus, e.count(writetest.Status, "RayJob")-writes, before.JobDeploymentStatus)
	}
}

// A teardown clears the attempt's names only once the API server, not just the cache, shows neither its
// cluster nor its submitter: a cluster another instance created, which this one's cache has not seen yet,
// is deleted instead of forgotten.
func TestTeardownConfirmsAbsenceOnTheServer(t *testing.T) {
	ctx := context.Background()
	e := newEnvWithJob(t, newJob(mode(rayv1.HTTPMode), func(j *rayv1.RayJob) { j.Spec.ShutdownAfterJobFinishes = true }))
	e.steps(2) // the finalizer, then the names
	job := e.job("train")
	name := job.Status.RayClusterName
	if name == "" || e.count(writetest.Create, "RayCluster") != 0 {
		t.Fatalf("want a named attempt with no cluster yet: %+v", job.Status)
	}
	job.Spec.Suspend = true
	if err := e.api.Update(ctx, job); err != nil {
		t.Fatal(err)
	}
	job.Status.JobDeploymentStatus = rayv1.JobDeploymentStatusSuspending
	if err := e.api.Status().Update(ctx, job); err != nil {
		t.Fatal(err)
	}
	if err := e.cache.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.api.Create(ctx, Cluster(e.job("train"), name)); err != nil { // another instance's create
		t.Fatal(err)
	}
	e.lagging = true
	e.reconcile(e.reconciler(), "train")
	if st := e.job("train").Status; st.RayClusterName != name {
		t.Fatalf("the attempt was cleared (%s, cluster %q) while its cluster %s exists", st.JobDeploymentStatus, st.RayClusterName, name)
	}
	if n := e.count(writetest.Delete, "RayCluster"); n != 1 {
		t.Fatalf("RayCluster deletes = %d, want the unseen cluster deleted", n)
	}
	e.lagging = false
	e.steps(2)
	if st := e.job("train").Status; st.JobDeploymentStatus != rayv1.JobDeploymentStatusSuspended || st.RayClusterName != "" {
		t.Fatalf("once the cluster is gone: %s, cluster %q; want Suspended with no cluster", st.JobDeploymentStatus, st.RayClusterName)
	}
}

// A submitter Job of an earlier submission (the cache, or the API server, still holds it when the next
// attempt starts) is never taken as this attempt's: it is deleted, the attempt stays Initializing, and this
// attempt's submitter is created once it is gone. Its failure fails nothing.
func TestK8sJobModeReplacesAnEarlierSubmissionsSubmitter(t *testing.T) {
	ctx := context.Background()
	e := newEnvWithJob(t, newJob())
	e.steps(6)
	job := e.job("train")
	if job.Status.JobDeploymentStatus != rayv1.JobDeploymentStatusRunning {
		t.Fatalf("status %s, want Running", job.Status.JobDeploymentStatus)
	}
	old := &batchv1.Job{}
	if err := e.api.Get(ctx, types.NamespacedName{Namespace: "ns", Name: "train"}, old); err != nil {
		t.Fatal(err)
	}
	old.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(e.now)}}
	if err := e.api.Status().Update(ctx, old); err != nil {
		t.Fatal(err)
	}
	// The next attempt, on the same cluster, as if the earlier one's teardown had missed the submitter.
	job.Status.JobDeploymentStatus, job.Status.JobId, job.Status.JobStatus = rayv1.JobDeploymentStatusInitializing, "train-second", rayv1.JobStatusNew
	if err := e.api.Status().Update(ctx, job); err != nil {
		t.Fatal(err)
	}
	e.drainEvents()
	e.reconcile(e.reconciler(), "train")
	if st := e.job("train").Status; st.JobDeploymentStatus != rayv1.JobDeploymentStatusInitializing {
		t.Fatalf("status %s (%s), want Initializing until this attempt's submitter exists", st.JobDeploymentStatus, st.Message)
	}
	if n := e.count(writetest.Delete, "Job"); n != 1 {
		t.Fatalf("submitter deletes = %d, want the earlier submission's deleted", n)
	}
	if got := e.drainEvents(); !slices.Contains(got, EventDeletedRayJobSubmitter) {
		t.Errorf("events %v, want %s", got, EventDeletedRayJobSubmitter)
	}
	e.steps(2)
	st := e.job("train").Status
	sub := &batchv1.Job{}
	if err := e.api.Get(ctx, types.NamespacedName{Namespace: "ns", Name: "train"}, sub); err != nil {
		t.Fatal(err)
	}
	if st.JobDeploymentStatus != rayv1.JobDeploymentStatusRunning || SubmissionID(sub) != "train-second" {
		t.Fatalf("status %s, submitter of %q; want Running with train-second's submitter", st.JobDeploymentStatus, SubmissionID(sub))
	}
}

// A K8sJobMode attempt whose submitter create is refused stays Initializing, as KubeRay's does.
func TestK8sJobModeRefusedSubmitterStaysInitializing(t *testing.T) {
	e := newEnvWithJob(t, newJob())
	e.writer.Fail(writetest.Create, "Job", "", apierrors.NewForbidden(schema.GroupResource{Group: "batch", Resource: "jobs"}, "train", errors.New("exceeded quota")))
	for range 6 {
		if err := e.cache.Sync(context.Background()); err != nil {
			t.Fatal(err)
		}
		_, err := e.reconciler().Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "train"}})
		if err != nil && !apierrors.IsForbidden(errors.Unwrap(err)) && !strings.Contains(err.Error(), "exceeded quota") {
			t.Fatalf("reconcile: %v", err)
		}
		e.playRayCluster()
	}
	if n := e.count(writetest.Create, "Job"); n == 0 {
		t.Fatal("the submitter create this test is about was never tried")
	}
	if st := e.job("train").Status; st.JobDeploymentStatus != rayv1.JobDeploymentStatusInitializing {
		t.Fatalf("status %s, want Initializing while the submitter cannot be created", st.JobDeploymentStatus)
	}
}

// A RayCluster of the name a RayJob drew, made by someone else, is never used nor changed: the job draws
// another name (stored before its cluster is created), says so once, and runs on its own cluster.
func TestClusterOfTheDrawnNameMadeBySomeoneElse(t *testing.T) {
	foreign := fixture.Cluster("ns", "train-r2c1") // the name the second instance draws
	job := newJob(mode(rayv1.HTTPMode))
	job.Finalizers, job.UID = nil, ""
	e := newEnv(t, job, foreign)
	e.steps(6)
	st := e.job("train").Status
	if st.JobDeploymentStatus != rayv1.JobDeploymentStatusRunning || st.RayClusterName == foreign.Name || st.RayClusterName == "" {
		t.Fatalf("status %s on cluster %q, want Running on a cluster of its own", st.JobDeploymentStatus, st.RayClusterName)
	}
	for _, w := range e.writer.Writes() {
		if w.Kind == "RayCluster" && w.Name == foreign.Name {
			t.Errorf("kray wrote to the other's cluster: %s", w)
		}
	}
	rc := &rayv1.RayCluster{}
	if err := e.api.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: st.RayClusterName}, rc); err != nil || !ownedBy(rc, e.job("train")) {
		t.Errorf("the job's cluster %s: %v, owners %+v", st.RayClusterName, err, rc.OwnerReferences)
	}
	if got := e.drainEvents(); !slices.Contains(got, shared.EventFailedToCreateRayCluster) {
		t.Errorf("events %v, want %s saying the name is taken", got, shared.EventFailedToCreateRayCluster)
	}
}
