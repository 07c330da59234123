package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Ray's job statuses (ray.dashboard.modules.job.common.JobStatus).
const (
	jobPending   = "PENDING"
	jobRunning   = "RUNNING"
	jobStopped   = "STOPPED"
	jobSucceeded = "SUCCEEDED"
	jobFailed    = "FAILED"
)

func terminal(status string) bool {
	return status == jobStopped || status == jobSucceeded || status == jobFailed
}

// dashboard is the head's dashboard: GET /api/gcs_healthz, GET /api/version, the Job API and the fake's task
// API (pathTasks). Each submitted
// job's entrypoint runs with /bin/sh -c; its output is the job's logs.
type dashboard struct {
	mu    sync.Mutex
	jobs  map[string]*job
	serve *serve
	tasks *taskTable
	// padServe, when above 0, makes the Serve details answer a hostile head's: the same object, padded with a
	// string field of that many bytes (FAKERAY_SERVE_ANSWER_PADDING), streamed as it is written.
	padServe int
}

type job struct {
	id         string
	entrypoint string
	metadata   map[string]string
	status     string
	message    string
	start, end time.Time
	exitCode   *int
	logs       bytes.Buffer
	cmd        *exec.Cmd
}

func newDashboard(s *serve, t *taskTable) *dashboard {
	pad, _ := strconv.Atoi(os.Getenv(envServeAnswerPadding))
	return &dashboard{jobs: map[string]*job{}, serve: s, tasks: t, padServe: pad}
}

// envServeAnswerPadding names the environment variable of dashboard.padServe, read from the head's container.
const envServeAnswerPadding = "FAKERAY_SERVE_ANSWER_PADDING"

// servePadded answers GET Serve details as Serve would, padded with a field of d.padServe bytes.
func (d *dashboard) servePadded(w http.ResponseWriter, r *http.Request) {
	rec := httptest.NewRecorder()
	d.serve.ServeHTTP(rec, r)
	body := bytes.TrimSpace(rec.Body.Bytes())
	if rec.Code != http.StatusOK || len(body) < 2 || body[len(body)-1] != '}' {
		w.WriteHeader(rec.Code)
		_, _ = w.Write(body)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(append(body[:len(body)-1:len(body)-1], `,"padding":"`...))
	chunk := bytes.Repeat([]byte("x"), 64<<10)
	for left := d.padServe; left > 0; left -= len(chunk) {
		if _, err := w.Write(chunk[:min(left, len(chunk))]); err != nil {
			return
		}
	}
	_, _ = w.Write([]byte(`"}`))
}

func (d *dashboard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Path
	id := strings.TrimPrefix(path, "/api/jobs/")
	switch {
	case path == "/api/serve/applications/" && r.Method == http.MethodGet && d.padServe > 0:
		d.servePadded(w, r)
	case path == "/api/serve/applications/":
		d.serve.ServeHTTP(w, r)
	case path == pathTasks:
		serveTasks(d.tasks, w, r)
	case path == "/api/gcs_healthz" && r.Method == http.MethodGet:
		_, _ = w.Write([]byte("success"))
	case path == "/api/version" && r.Method == http.MethodGet:
		writeJSON(w, http.StatusOK, map[string]any{"version": "4", "ray_version": "fake", "ray_commit": "fake"})
	case path == "/api/jobs/" && r.Method == http.MethodPost:
		d.submit(w, r)
	case path == "/api/jobs/" && r.Method == http.MethodGet:
		d.mu.Lock()
		list := []any{}
		for _, j := range d.jobs {
			list = append(list, j.details())
		}
		d.mu.Unlock()
		writeJSON(w, http.StatusOK, list)
	case !strings.HasPrefix(path, "/api/jobs/") || id == "":
		http.NotFound(w, r)
	case strings.HasSuffix(id, "/stop") && r.Method == http.MethodPost:
		d.withJob(w, strings.TrimSuffix(id, "/stop"), func(j *job) {
			if terminal(j.status) {
				writeJSON(w, http.StatusOK, map[string]any{"stopped": false})
				return
			}
			j.status, j.message = jobStopped, "Job was intentionally stopped."
			if j.cmd != nil && j.cmd.Process != nil {
				_ = syscall.Kill(-j.cmd.Process.Pid, syscall.SIGTERM)
			}
			writeJSON(w, http.StatusOK, map[string]any{"stopped": true})
		})
	case strings.HasSuffix(id, "/logs") && r.Method == http.MethodGet:
		d.withJob(w, strings.TrimSuffix(id, "/logs"), func(j *job) {
			writeJSON(w, http.StatusOK, map[string]any{"logs": j.logs.String()})
		})
	case r.Method == http.MethodGet:
		d.withJob(w, id, func(j *job) { writeJSON(w, http.StatusOK, j.details()) })
	case r.Method == http.MethodDelete:
		d.withJob(w, id, func(j *job) {
			if !terminal(j.status) {
				http.Error(w, fmt.Sprintf("Attempted to delete job with submission_id %s, but it is in a non-terminal state %s.", j.id, j.status), http.StatusBadRequest)
				return
			}
			delete(d.jobs, j.id)
			writeJSON(w, http.StatusOK, map[string]any{"deleted": true})
		})
	default:
		http.NotFound(w, r)
	}
}

// submit starts a job; like Ray's it refuses a submission id it already holds with a 400.
func (d *dashboard) submit(w http.ResponseWriter, r *http.Request) {
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
	d.mu.Lock()
	defer d.mu.Unlock()
	if req.SubmissionID == "" {
		req.SubmissionID = fmt.Sprintf("raysubmit_%d", time.Now().UnixNano())
	}
	if _, ok := d.jobs[req.SubmissionID]; ok {
		http.Error(w, fmt.Sprintf("Job with submission_id %s already exists. Please use a different submission_id.", req.SubmissionID), http.StatusBadRequest)
		return
	}
	j := &job{id: req.SubmissionID, entrypoint: req.Entrypoint, metadata: req.Metadata, status: jobPending,
		message: "Job has not started yet.", start: time.Now()}
	d.jobs[j.id] = j
	go d.runJob(j)
	writeJSON(w, http.StatusOK, map[string]any{"job_id": j.id, "submission_id": j.id})
}

// runJob runs the job's entrypoint to its end and records what it did.
func (d *dashboard) runJob(j *job) {
	cmd := exec.Command("/bin/sh", "-c", j.entrypoint)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var out lockedWriter
	out.mu, out.buf = &d.mu, &j.logs
	cmd.Stdout, cmd.Stderr = &out, &out
	d.mu.Lock()
	j.cmd = cmd
	err := cmd.Start()
	if err == nil && j.status == jobPending {
		j.status, j.message = jobRunning, "Job is currently running."
	}
	d.mu.Unlock()
	if err == nil {
		err = cmd.Wait()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	j.end = time.Now()
	code := 0
	if cmd.ProcessState != nil {
		code = cmd.ProcessState.ExitCode()
	} else if err != nil {
		code = 1
	}
	j.exitCode = &code
	switch {
	case j.status == jobStopped:
	case err == nil:
		j.status, j.message = jobSucceeded, "Job finished successfully."
	default:
		j.status, j.message = jobFailed, fmt.Sprintf("Job entrypoint command failed with exit code %d", code)
	}
}

type lockedWriter struct {
	mu  *sync.Mutex
	buf *bytes.Buffer
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

// details is the job's JobDetails as Ray's dashboard renders it.
func (j *job) details() map[string]any {
	d := map[string]any{
		"type": "SUBMISSION", "job_id": nil, "submission_id": j.id, "driver_info": nil, "status": j.status,
		"entrypoint": j.entrypoint, "message": j.message, "error_type": nil, "start_time": j.start.UnixMilli(),
		"end_time": nil, "metadata": j.metadata, "runtime_env": map[string]any{}, "driver_exit_code": nil,
	}
	if j.metadata == nil {
		d["metadata"] = map[string]string{}
	}
	if j.status != jobPending {
		d["job_id"] = "02000000"
	}
	if !j.end.IsZero() {
		d["end_time"] = j.end.UnixMilli()
	}
	if j.exitCode != nil {
		d["driver_exit_code"] = *j.exitCode
	}
	if j.status == jobFailed {
		d["error_type"] = "JOB_ENTRYPOINT_COMMAND_ERROR"
	}
	return d
}

// withJob runs fn on the job id, holding the lock, or answers 404 as Ray does.
func (d *dashboard) withJob(w http.ResponseWriter, id string, fn func(*job)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	j, ok := d.jobs[id]
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
