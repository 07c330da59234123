package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	rayv1 "github.com/kray-project/kray/api/v1"
)

// answer is one canned dashboard response.
type answer struct {
	status int
	body   string
}

// serve starts a dashboard that answers each "METHOD path" from answers and records the requests.
func serve(t *testing.T, answers map[string]answer) (*Client, *[]*http.Request, *[]string) {
	t.Helper()
	var reqs []*http.Request
	var bodies []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		reqs = append(reqs, r)
		bodies = append(bodies, string(b))
		a, ok := answers[r.Method+" "+r.URL.Path]
		if !ok {
			// Ray's answer for a job it does not hold.
			id := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, JobsPath), "/stop")
			http.Error(w, fmt.Sprintf("Job %s does not exist", id), http.StatusNotFound)
			return
		}
		w.WriteHeader(a.status)
		_, _ = io.WriteString(w, a.body)
	}))
	t.Cleanup(srv.Close)
	return HTTPDialer{HTTP: srv.Client()}.Jobs(srv.URL+"/", "tok").(*Client), &reqs, &bodies
}

func TestGetJob(t *testing.T) {
	c, reqs, _ := serve(t, map[string]answer{
		"GET /api/jobs/known": {200, `{"type":"SUBMISSION","job_id":"02000000","submission_id":"known","status":"RUNNING",
			"message":"running","start_time":1700000000000,"end_time":0,"metadata":{"a":"b"},"driver_info":{"id":"x"},"some_new_field":1}`},
		"GET /api/jobs/broken": {200, `<html>`},
		"GET /api/jobs/fails":  {500, `boom`},
		// What an ingress or proxy in front of the dashboard answers for a path it does not route.
		"GET /api/jobs/proxied": {404, `<html><head><title>404 Not Found</title></head><body><center><h1>404 Not Found</h1></center><hr><center>nginx</center></body></html>`},
	})
	info, err := c.GetJob(context.Background(), "known")
	if err != nil {
		t.Fatal(err)
	}
	want := &JobInfo{Type: "SUBMISSION", JobID: "02000000", SubmissionID: "known", Status: rayv1.JobStatusRunning,
		Message: "running", StartTime: 1700000000000, Metadata: map[string]string{"a": "b"}}
	if diff := cmp.Diff(want, info); diff != "" {
		t.Errorf("job info (-want +got):\n%s", diff)
	}
	if got := (*reqs)[0].Header.Get("Authorization"); got != "Bearer tok" {
		t.Errorf("Authorization = %q, want the bearer token", got)
	}
	if _, err := c.GetJob(context.Background(), "unknown"); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown job: err = %v, want ErrNotFound", err)
	}
	if _, err := c.GetJob(context.Background(), "proxied"); err == nil || errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "404") {
		t.Errorf("a proxy's 404: err = %v, want an error with the status, not ErrNotFound", err)
	}
	if _, err := c.GetJob(context.Background(), "broken"); err == nil || errors.Is(err, ErrNotFound) {
		t.Errorf("a non-JSON answer: err = %v, want a decode error", err)
	}
	if _, err := c.GetJob(context.Background(), "fails"); err == nil || !strings.Contains(err.Error(), "500") {
		t.Errorf("a 500: err = %v, want it reported with the status", err)
	}
}

func TestSubmit(t *testing.T) {
	req := SubmitRequest{Entrypoint: "python x.py", SubmissionID: "job-abcde", RuntimeEnv: map[string]any{"pip": []any{"numpy"}},
		Metadata: map[string]string{"k": "v"}, EntrypointNumCPUs: 1.5, EntrypointResources: map[string]float32{"TPU": 4}}
	for _, tt := range []struct {
		name    string
		answer  answer
		wantErr error
		anyErr  bool
	}{
		{"accepted", answer{200, `{"submission_id":"job-abcde","job_id":null}`}, nil, false},
		{"duplicate, 400", answer{400, `Job with submission_id job-abcde already exists. Please use a different submission_id.`}, ErrAlreadySubmitted, true},
		{"duplicate through the agent, 500", answer{500, `Traceback ... Please use a different submission_id.`}, ErrAlreadySubmitted, true},
		{"other failure", answer{500, `Traceback: runtime_env invalid`}, nil, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, reqs, bodies := serve(t, map[string]answer{"POST /api/jobs/": tt.answer})
			err := c.Submit(context.Background(), req)
			if (err != nil) != tt.anyErr || (tt.wantErr != nil && !errors.Is(err, tt.wantErr)) ||
				(tt.wantErr == nil && errors.Is(err, ErrAlreadySubmitted)) {
				t.Fatalf("err = %v, want %v (any error: %t)", err, tt.wantErr, tt.anyErr)
			}
			var got map[string]any
			if err := json.Unmarshal([]byte((*bodies)[0]), &got); err != nil {
				t.Fatal(err)
			}
			want := map[string]any{"entrypoint": "python x.py", "submission_id": "job-abcde", "runtime_env": map[string]any{"pip": []any{"numpy"}},
				"metadata": map[string]any{"k": "v"}, "entrypoint_num_cpus": 1.5, "entrypoint_resources": map[string]any{"TPU": 4.0}}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("request body (-want +got):\n%s", diff)
			}
			if ct := (*reqs)[0].Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type = %q", ct)
			}
		})
	}
}

func TestStop(t *testing.T) {
	c, _, _ := serve(t, map[string]answer{
		"POST /api/jobs/running/stop": {200, `{"stopped":true}`},
		"POST /api/jobs/ended/stop":   {200, `{"stopped":false}`},
		"GET /api/jobs/ended":         {200, `{"status":"SUCCEEDED"}`},
		"POST /api/jobs/stuck/stop":   {200, `{"stopped":false}`},
		"GET /api/jobs/stuck":         {200, `{"status":"RUNNING"}`},
	})
	ctx := context.Background()
	if err := c.Stop(ctx, "running"); err != nil {
		t.Errorf("stopped job: %v", err)
	}
	if err := c.Stop(ctx, "ended"); err != nil {
		t.Errorf("a job that already ended: %v, want no error", err)
	}
	if err := c.Stop(ctx, "stuck"); err == nil {
		t.Error("a job that did not stop and still runs: no error")
	}
	if err := c.Stop(ctx, "unknown"); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown job: %v, want ErrNotFound", err)
	}
}

func TestNoTokenNoHeader(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Header.Values("Authorization")...)
		_, _ = io.WriteString(w, `{"status":"PENDING"}`)
	}))
	defer srv.Close()
	if _, err := (HTTPDialer{}).Jobs(srv.URL, "").GetJob(context.Background(), "x"); err != nil {
		t.Fatal(err)
	}
	if len(got) != 0 {
		t.Errorf("Authorization sent without a token: %v", got)
	}
}

func TestUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	_, err := (HTTPDialer{}).Jobs(url, "").GetJob(context.Background(), "x")
	if err == nil || errors.Is(err, ErrNotFound) {
		t.Errorf("closed dashboard: err = %v, want a transport error distinct from ErrNotFound", err)
	}
}

func TestAddress(t *testing.T) {
	vars := map[string]string{"namespace": "ns", "cluster": "c"}
	for template, want := range map[string]string{
		"http://127.0.0.1:8265/":                        "http://127.0.0.1:8265",
		"http://127.0.0.1:8265/c/{namespace}/{cluster}": "http://127.0.0.1:8265/c/ns/c",
		"http://{cluster}-head-svc.{namespace}:8265":    "http://c-head-svc.ns:8265",
	} {
		if got := Address(template, vars); got != want {
			t.Errorf("Address(%q) = %q, want %q", template, got, want)
		}
	}
}

// A job answer over maxBody is an error saying so, not a truncated body read as malformed JSON.
func TestAnswerOverTheBound(t *testing.T) {
	huge := `{"status":"RUNNING","message":"` + strings.Repeat("x", maxBody) + `"}`
	c, _, _ := serve(t, map[string]answer{"GET /api/jobs/j": {200, huge}})
	_, err := c.GetJob(context.Background(), "j")
	if err == nil || !strings.Contains(err.Error(), "is larger than 1048576 bytes") {
		t.Fatalf("error %v, want one saying the answer is too large", err)
	}
}

// A head that answers with a redirect cannot steer kray's calls elsewhere (another team's dashboard, from the
// operator's address): no redirect is followed, whatever HTTP client the dialer was given, and the error says
// so.
func TestRedirectsAreNotFollowed(t *testing.T) {
	reached := 0
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		reached++
		_, _ = io.WriteString(w, `{"status":"RUNNING","applications":{}}`)
	}))
	defer target.Close()
	hostile := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+r.URL.RequestURI(), http.StatusTemporaryRedirect)
	}))
	defer hostile.Close()
	jobs := HTTPDialer{HTTP: hostile.Client()}.Jobs(hostile.URL, "tok")
	serveAPI := HTTPDialer{HTTP: hostile.Client()}.Serve(hostile.URL, "tok")
	ctx := context.Background()
	for name, call := range map[string]func() error{
		"submit": func() error { return jobs.Submit(ctx, SubmitRequest{Entrypoint: "python x.py", SubmissionID: "s"}) },
		"get":    func() error { _, err := jobs.GetJob(ctx, "s"); return err },
		"stop":   func() error { return jobs.Stop(ctx, "s") },
		"serve":  func() error { _, err := serveAPI.Applications(ctx); return err },
		"apply":  func() error { return serveAPI.Apply(ctx, []byte(`{}`)) },
		"probe":  func() error { _, err := ProbeServeProxy(ctx, hostile.Client(), hostile.URL); return err },
	} {
		err := call()
		if err == nil || !strings.Contains(err.Error(), "307 Temporary Redirect") || !strings.Contains(err.Error(), "kray follows no redirect") {
			t.Errorf("%s: error %v, want one saying the redirect was not followed", name, err)
		}
	}
	if reached != 0 {
		t.Errorf("the redirect's target was called %d times", reached)
	}
}

// What a peer answers reaches a status only as a short excerpt of printable text.
func TestErrorExcerptIsShortAndPrintable(t *testing.T) {
	body := "line one\r\n\x1b[31mred\x1b[0m\ttab \xff" + strings.Repeat("é", 500)
	c, _, _ := serve(t, map[string]answer{"GET /api/jobs/x": {500, body}})
	_, err := c.GetJob(context.Background(), "x")
	if err == nil {
		t.Fatal("no error")
	}
	msg := err.Error()
	excerpt := msg[strings.Index(msg, "Internal Server Error: ")+len("Internal Server Error: "):]
	if want := "line one [31mred [0m tab \uFFFDéé"; !strings.HasPrefix(excerpt, want) {
		t.Errorf("excerpt %q, want it to start %q", excerpt, want)
	}
	if len(excerpt) > maxExcerpt+len("...") || !strings.HasSuffix(excerpt, "...") || !utf8.ValidString(excerpt) {
		t.Errorf("excerpt of %d bytes: %q", len(excerpt), excerpt)
	}
	for _, r := range excerpt {
		if unicode.IsControl(r) {
			t.Errorf("excerpt holds control character %U", r)
		}
	}
}

func TestExcerpt(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"  short\n", "short"},
		{strings.Repeat(" ", 1000) + "x", "..."},
		{strings.Repeat("a", maxExcerpt), strings.Repeat("a", maxExcerpt)},
		{strings.Repeat("a", maxExcerpt+1), strings.Repeat("a", maxExcerpt) + "..."},
		{"a" + strings.Repeat("é", maxExcerpt), "a" + strings.Repeat("é", (maxExcerpt-1)/2) + "..."},
	} {
		if got := Excerpt([]byte(tc.in)); got != tc.want {
			t.Errorf("Excerpt(%.20q...) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// A dashboard address that carries credentials (an operator's --ray-dashboard-address) never reaches an
// error, and so a status or a log, with its password.
func TestErrorsRedactTheAddressPassword(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, strings.Repeat("x", maxBody+1))
	}))
	base := strings.Replace(srv.URL, "http://", "http://kray:s3cret@", 1)
	jobs := HTTPDialer{HTTP: srv.Client()}.Jobs(base, "")
	_, tooLarge := jobs.GetJob(context.Background(), "a")
	srv.Close()
	_, unreachable := jobs.GetJob(context.Background(), "a")
	_, probe := ProbeServeProxy(context.Background(), srv.Client(), base)
	for name, err := range map[string]error{"too large": tooLarge, "unreachable": unreachable, "probe": probe} {
		if err == nil || strings.Contains(err.Error(), "s3cret") || !strings.Contains(err.Error(), "kray:") {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// Through the API server's service proxy, which authenticates kray with the Authorization header, Ray's
// token goes in X-Ray-Authorization, and Authorization is left to the proxy.
func TestProxiedTokenHeader(t *testing.T) {
	var got http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		w.WriteHeader(http.StatusNotFound)
	}))
	t.Cleanup(srv.Close)
	_, _ = HTTPDialer{HTTP: srv.Client(), Proxied: true}.Jobs(srv.URL, "tok").GetJob(context.Background(), "j")
	if got.Get("X-Ray-Authorization") != "Bearer tok" || got.Get("Authorization") != "" {
		t.Errorf("X-Ray-Authorization %q, Authorization %q: want the token in the first only", got.Get("X-Ray-Authorization"), got.Get("Authorization"))
	}
}
