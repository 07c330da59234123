package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	rayv1 "github.com/kray-project/kray/api/v1"
)

// fakeDashboard stands in for the Ray dashboard of every cluster in the suite: it serves the Job REST API
// (/api/jobs/, the JSON of Ray's dashboard/modules/job) that the operator calls through
// --ray-dashboard-address, and that the suite calls where a submitter pod or a user would. A job's status
// follows a plan picked by its entrypoint: PENDING, then RUNNING, then its outcome, with Ray's start and end
// times; a stopped job is STOPPED. Submission ids are unique across the suite (the RayJob name and a random
// suffix), so one server holds the jobs of every cluster.
type fakeDashboard struct {
	mu    sync.Mutex
	jobs  map[string]*fakeJob
	plans map[string]jobPlan
	// submits counts accepted submissions per submission id; refused counts duplicates.
	submits map[string]int
	refused map[string]int
	stops   map[string]int
	down    bool
	// serve is Ray Serve on every cluster (fakeserve_test.go).
	serve *fakeServe
	// hostile are the heads that answer every call with an attack, by namespace (hostile_test.go); trapped
	// counts the calls that reached the address the redirecting ones name.
	hostile map[string]attack
	trapped int
}

// jobPlan is how a job with a given entrypoint runs: pending for a moment, running for runFor, then
// ending in outcome; outcome "" runs until stopped.
type jobPlan struct {
	runFor  time.Duration
	outcome rayv1.JobStatus
}

// defaultPlan is the plan of an entrypoint no test planned: a short successful run.
var defaultPlan = jobPlan{runFor: 2 * time.Second, outcome: rayv1.JobStatusSucceeded}

// pendingFor is how long a submitted job stays PENDING.
const pendingFor = 500 * time.Millisecond

type fakeJob struct {
	id, entrypoint string
	metadata       map[string]string
	submitted      time.Time
	plan           jobPlan
	stoppedAt      time.Time
}

var dash *fakeDashboard

// startFakeDashboard serves the fake dashboard at KRAY_E2E_DASHBOARD_ADDRESS, the address hack/e2e.sh gives
// the operator.
func startFakeDashboard(ctx context.Context) error {
	addr := os.Getenv("KRAY_E2E_DASHBOARD_ADDRESS")
	if addr == "" {
		return nil
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	dash = &fakeDashboard{jobs: map[string]*fakeJob{}, plans: map[string]jobPlan{}, submits: map[string]int{},
		refused: map[string]int{}, stops: map[string]int{}, serve: newFakeServe()}
	srv := &http.Server{Handler: dash, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(lis) }()
	go func() { <-ctx.Done(); _ = srv.Close() }()
	return nil
}

// plan makes jobs whose entrypoint is entrypoint follow p.
func (f *fakeDashboard) plan(entrypoint string, p jobPlan) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.plans[entrypoint] = p
}

// setDown makes the dashboard drop every connection unanswered (true) or serve again (false).
func (f *fakeDashboard) setDown(down bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down = down
}

// counts returns the accepted and refused submissions and the stop requests for a submission id.
func (f *fakeDashboard) counts(id string) (accepted, refused, stops int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.submits[id], f.refused[id], f.stops[id]
}

// acceptedWithPrefix counts the accepted submissions whose id starts with prefix (a RayJob's name and "-").
func (f *fakeDashboard) acceptedWithPrefix(prefix string) (ids []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for id, n := range f.submits {
		for i := 0; i < n && strings.HasPrefix(id, prefix); i++ {
			ids = append(ids, id)
		}
	}
	return ids
}

// status is the job's status and end time now.
func (j *fakeJob) status(now time.Time) (rayv1.JobStatus, time.Time) {
	if !j.stoppedAt.IsZero() {
		return rayv1.JobStatusStopped, j.stoppedAt
	}
	elapsed := now.Sub(j.submitted)
	switch {
	case elapsed < pendingFor:
		return rayv1.JobStatusPending, time.Time{}
	case j.plan.outcome == "" || elapsed < pendingFor+j.plan.runFor:
		return rayv1.JobStatusRunning, time.Time{}
	}
	return j.plan.outcome, j.submitted.Add(pendingFor + j.plan.runFor)
}

// details is the job's JobDetails JSON object as Ray's dashboard renders it.
func (j *fakeJob) details(now time.Time) map[string]any {
	st, end := j.status(now)
	d := map[string]any{
		"type": "SUBMISSION", "job_id": nil, "submission_id": j.id, "driver_info": nil, "status": st,
		"entrypoint": j.entrypoint, "message": fmt.Sprintf("Job %s.", strings.ToLower(string(st))), "error_type": nil,
		"start_time": j.submitted.UnixMilli(), "end_time": nil, "metadata": j.metadata, "runtime_env": map[string]any{},
		"driver_agent_http_address": nil, "driver_node_id": nil, "driver_exit_code": nil,
	}
	if st != rayv1.JobStatusPending {
		d["job_id"] = "02000000"
	}
	if !end.IsZero() {
		d["end_time"] = end.UnixMilli()
	}
	if st == rayv1.JobStatusFailed {
		d["message"] = "Job entrypoint command failed with exit code 1"
		d["error_type"] = "JOB_ENTRYPOINT_COMMAND_ERROR"
		d["driver_exit_code"] = 1
	}
	return d
}

func (f *fakeDashboard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	down := f.down
	f.mu.Unlock()
	if down {
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				_ = conn.Close()
				return
			}
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	kind, key, full := route(r.URL.Path)
	if f.attacked(w, r, kind, key) {
		return
	}
	switch {
	case kind == "p" && full == "/-/healthz":
		f.serve.probe(w, key)
		return
	case kind == "c" && full == "/api/serve/applications/":
		f.serve.serveAPI(w, r, key)
		return
	}
	path := strings.TrimPrefix(full, "/api/jobs/")
	switch {
	case full == "/api/version" && r.Method == http.MethodGet:
		writeJSON(w, http.StatusOK, map[string]any{"version": "4", "ray_version": "2.52.0", "ray_commit": "fake"})
	case full == "/api/jobs/" && r.Method == http.MethodPost:
		f.submit(w, r)
	case full == "/api/jobs/" && r.Method == http.MethodGet:
		f.mu.Lock()
		list := []any{}
		for _, j := range f.jobs {
			list = append(list, j.details(time.Now()))
		}
		f.mu.Unlock()
		writeJSON(w, http.StatusOK, list)
	case strings.HasSuffix(path, "/stop") && r.Method == http.MethodPost:
		f.stop(w, strings.TrimSuffix(path, "/stop"))
	case strings.HasSuffix(path, "/logs") && r.Method == http.MethodGet:
		f.withJob(w, strings.TrimSuffix(path, "/logs"), func(j *fakeJob) {
			writeJSON(w, http.StatusOK, map[string]any{"logs": "hello from " + j.entrypoint + "\n"})
		})
	case r.Method == http.MethodGet && path != "":
		f.withJob(w, path, func(j *fakeJob) { writeJSON(w, http.StatusOK, j.details(time.Now())) })
	case r.Method == http.MethodDelete && path != "":
		f.withJob(w, path, func(j *fakeJob) {
			st, _ := j.status(time.Now())
			if !rayv1.IsJobTerminal(st) {
				http.Error(w, fmt.Sprintf("Attempted to delete job with submission_id %s, but it is in a non-terminal state %s.", j.id, st), http.StatusBadRequest)
				return
			}
			delete(f.jobs, j.id)
			writeJSON(w, http.StatusOK, map[string]any{"deleted": true})
		})
	default:
		http.NotFound(w, r)
	}
}

// submit records a submission; like Ray's, it refuses a submission id it already holds with a 400 whose
// text asks for a different submission_id.
func (f *fakeDashboard) submit(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Entrypoint   string            `json:"entrypoint"`
		SubmissionID string            `json:"submission_id"`
		Metadata     map[string]string `json:"metadata"`
	}
	body, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(body, &req); err != nil || req.Entrypoint == "" {
		http.Error(w, fmt.Sprintf("Failed to parse request body: %v", err), http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if req.SubmissionID == "" {
		req.SubmissionID = fmt.Sprintf("raysubmit_%d", time.Now().UnixNano())
	}
	if _, ok := f.jobs[req.SubmissionID]; ok {
		f.refused[req.SubmissionID]++
		http.Error(w, fmt.Sprintf("Traceback (most recent call last):\nValueError: Job with submission_id %s already exists. Please use a different submission_id.", req.SubmissionID), http.StatusBadRequest)
		return
	}
	p, ok := f.plans[req.Entrypoint]
	if !ok {
		p = defaultPlan
	}
	f.jobs[req.SubmissionID] = &fakeJob{id: req.SubmissionID, entrypoint: req.Entrypoint, metadata: req.Metadata, submitted: time.Now(), plan: p}
	f.submits[req.SubmissionID]++
	writeJSON(w, http.StatusOK, map[string]any{"job_id": req.SubmissionID, "submission_id": req.SubmissionID})
}

// stop stops a job that has not ended; like Ray's it answers stopped=false for one that has.
func (f *fakeDashboard) stop(w http.ResponseWriter, id string) {
	f.withJob(w, id, func(j *fakeJob) {
		f.stops[id]++
		st, _ := j.status(time.Now())
		if rayv1.IsJobTerminal(st) {
			writeJSON(w, http.StatusOK, map[string]any{"stopped": false})
			return
		}
		j.stoppedAt = time.Now()
		writeJSON(w, http.StatusOK, map[string]any{"stopped": true})
	})
}

// withJob runs fn on the job with submission id id, holding the lock, or answers 404 as Ray does.
func (f *fakeDashboard) withJob(w http.ResponseWriter, id string, fn func(*fakeJob)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	j, ok := f.jobs[id]
	if !ok {
		http.Error(w, fmt.Sprintf("Job %s does not exist", id), http.StatusNotFound)
		return
	}
	fn(j)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// submitAs submits a job to the fake dashboard as `ray job submit` would (a submitter pod, or a user in
// InteractiveMode), through its HTTP API.
func (f *fakeDashboard) submitAs(id, entrypoint string) error {
	body, _ := json.Marshal(map[string]any{"entrypoint": entrypoint, "submission_id": id})
	resp, err := http.Post("http://"+os.Getenv("KRAY_E2E_DASHBOARD_ADDRESS")+"/api/jobs/", "application/json", strings.NewReader(string(body)))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	text, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK && !strings.Contains(string(text), "Please use a different submission_id") {
		return fmt.Errorf("submit %s: %d %s", id, resp.StatusCode, text)
	}
	return nil
}

// terminal reports whether the job with submission id id has ended, and how.
func (f *fakeDashboard) terminal(id string) (rayv1.JobStatus, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	j, ok := f.jobs[id]
	if !ok {
		return "", false
	}
	st, _ := j.status(time.Now())
	return st, rayv1.IsJobTerminal(st)
}

// forget drops the job with submission id id, as a Ray head restarted without GCS fault tolerance forgets
// every job; the counts of its submissions stay.
func (f *fakeDashboard) forget(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.jobs, id)
}

// has reports whether the dashboard holds a job with submission id id (what `ray job status` checks).
func (f *fakeDashboard) has(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.jobs[id]
	return ok
}
