// Package dashboard is a client of the Ray dashboard's Job REST API (/api/jobs/), through which the RayJob
// controller submits, follows and stops Ray jobs, and of its Serve REST API (/api/serve/applications/),
// through which the RayService controller applies and follows Serve applications.
package dashboard

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	rayv1 "github.com/kray-project/kray/api/v1"
)

// JobsPath is the Job REST API's collection path on the dashboard.
const JobsPath = "/api/jobs/"

// callTimeout bounds one dashboard call, so a silent dashboard holds a reconcile worker at most this long;
// a healthy dashboard answers a job's details in milliseconds.
const callTimeout = 2 * time.Second

// maxBody bounds how much of an answer is read into memory; job details and errors are small. Serve's
// details, which list every replica, are decoded as they arrive instead (maxServeBody).
const maxBody = 1 << 20

// maxExcerpt bounds the excerpt of a peer's answer an error carries into a status or an event.
const maxExcerpt = 200

// ErrNotFound is returned when Ray's dashboard says it does not know the job.
var ErrNotFound = errors.New("the Ray job does not exist on the cluster")

// ErrAlreadySubmitted is returned by Submit when the dashboard already holds a job with the submission id.
var ErrAlreadySubmitted = errors.New("a Ray job with this submission id was already submitted")

// JobInfo is the part of the dashboard's JobDetails that kray reads; unknown fields are ignored.
type JobInfo struct {
	Type         string            `json:"type,omitempty"`
	JobID        string            `json:"job_id,omitempty"`
	SubmissionID string            `json:"submission_id,omitempty"`
	Status       rayv1.JobStatus   `json:"status"`
	Entrypoint   string            `json:"entrypoint,omitempty"`
	Message      string            `json:"message,omitempty"`
	ErrorType    string            `json:"error_type,omitempty"`
	StartTime    uint64            `json:"start_time,omitempty"`
	EndTime      uint64            `json:"end_time,omitempty"`
	Metadata     map[string]string `json:"metadata,omitempty"`
}

// SubmitRequest is the body of a job submission.
type SubmitRequest struct {
	Entrypoint          string             `json:"entrypoint"`
	SubmissionID        string             `json:"submission_id,omitempty"`
	RuntimeEnv          map[string]any     `json:"runtime_env,omitempty"`
	Metadata            map[string]string  `json:"metadata,omitempty"`
	EntrypointNumCPUs   float32            `json:"entrypoint_num_cpus,omitempty"`
	EntrypointNumGPUs   float32            `json:"entrypoint_num_gpus,omitempty"`
	EntrypointResources map[string]float32 `json:"entrypoint_resources,omitempty"`
}

// JobAPI is what the RayJob controller asks of one cluster's dashboard.
type JobAPI interface {
	// GetJob returns the job's details, or ErrNotFound.
	GetJob(ctx context.Context, submissionID string) (*JobInfo, error)
	// Submit submits a job, or returns ErrAlreadySubmitted when its submission id is taken.
	Submit(ctx context.Context, req SubmitRequest) error
	// Stop asks the job to stop; a job that already ended is not an error.
	Stop(ctx context.Context, submissionID string) error
}

// Dialer returns the JobAPI of the dashboard at a base URL, sending token (when not empty) with each call.
type Dialer interface {
	Jobs(baseURL, token string) JobAPI
}

// HTTPDialer is the Dialer of real dashboards; its HTTP client is shared by every cluster.
type HTTPDialer struct {
	HTTP *http.Client
	// Proxied says that the calls go through a proxy that authenticates with the Authorization header (the
	// API server's service proxy): Ray's token then goes in X-Ray-Authorization, which Ray's dashboard reads
	// when Authorization is absent.
	Proxied bool
}

// Ray's dashboard reads its token from these headers, Authorization first.
const (
	headerAuthorization    = "Authorization"
	headerRayAuthorization = "X-Ray-Authorization"
)

// Jobs returns a Client for baseURL.
func (d HTTPDialer) Jobs(baseURL, token string) JobAPI {
	c := &Client{http: noRedirects(d.HTTP), base: strings.TrimSuffix(baseURL, "/"), token: token, tokenHeader: headerAuthorization}
	if d.Proxied {
		c.tokenHeader = headerRayAuthorization
	}
	return c
}

// noRedirects is hc (http.DefaultClient when nil) made never to follow a redirect: a head answers what its
// image makes it answer, and following would send kray's call, from the operator's address, to wherever the
// head names. The redirect itself is the answer.
func noRedirects(hc *http.Client) *http.Client {
	if hc == nil {
		hc = http.DefaultClient
	}
	c := *hc
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &c
}

// Client calls one dashboard's Job and Serve REST APIs.
type Client struct {
	http  *http.Client
	base  string
	token string
	// tokenHeader carries token, as "Bearer <token>".
	tokenHeader string
	// peer names what answers at base in errors; "Ray dashboard" when empty.
	peer string
}

var _ JobAPI = (*Client)(nil)

// GetJob returns the job's details, or ErrNotFound when Ray says it does not know the job.
func (c *Client) GetJob(ctx context.Context, submissionID string) (*JobInfo, error) {
	status, body, err := c.do(ctx, http.MethodGet, JobsPath+url.PathEscape(submissionID), nil)
	if err != nil {
		return nil, err
	}
	switch {
	case rayJobUnknown(status, body, submissionID):
		return nil, ErrNotFound
	case status != http.StatusOK:
		return nil, c.httpError("get job "+submissionID, status, body)
	}
	info := &JobInfo{}
	if err := json.Unmarshal(body, info); err != nil {
		return nil, fmt.Errorf("get job %s: the dashboard's answer is not job details: %w", submissionID, err)
	}
	return info, nil
}

// Submit posts req. A submission id the dashboard already holds is ErrAlreadySubmitted, so a submission
// repeated after an operator restart is recognised rather than counted as a failure; Ray answers it with 400
// or, through the job agent, 500, both saying "Please use a different submission_id".
func (c *Client) Submit(ctx context.Context, req SubmitRequest) error {
	payload, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("encode job submission: %w", err)
	}
	status, body, err := c.do(ctx, http.MethodPost, JobsPath, payload)
	if err != nil {
		return err
	}
	switch {
	case status >= 200 && status < 300:
		return nil
	case (status == http.StatusBadRequest || status == http.StatusInternalServerError) &&
		bytes.Contains(body, []byte("Please use a different submission_id")):
		return ErrAlreadySubmitted
	}
	return c.httpError("submit job "+req.SubmissionID, status, body)
}

// Stop asks the job to stop. An answer of "not stopped" is an error only while the job has not ended.
func (c *Client) Stop(ctx context.Context, submissionID string) error {
	status, body, err := c.do(ctx, http.MethodPost, JobsPath+url.PathEscape(submissionID)+"/stop", nil)
	if err != nil {
		return err
	}
	switch {
	case rayJobUnknown(status, body, submissionID):
		return ErrNotFound
	case status != http.StatusOK:
		return c.httpError("stop job "+submissionID, status, body)
	}
	var answer struct {
		Stopped bool `json:"stopped"`
	}
	if err := json.Unmarshal(body, &answer); err != nil {
		return fmt.Errorf("stop job %s: the dashboard's answer is not a stop result: %w", submissionID, err)
	}
	if answer.Stopped {
		return nil
	}
	info, err := c.GetJob(ctx, submissionID)
	if err != nil {
		return err
	}
	if !rayv1.IsJobTerminal(info.Status) {
		return fmt.Errorf("stop job %s: the dashboard did not stop it and it is %s", submissionID, info.Status)
	}
	return nil
}

// rayJobUnknown reports whether an answer is Ray's own for a job it does not hold: 404 with "Job <id> does
// not exist". Any other 404 (a proxy's, a dashboard without the Job API) says nothing about the job, and
// reading it as "not found" would fail a running job as lost.
func rayJobUnknown(status int, body []byte, submissionID string) bool {
	return status == http.StatusNotFound && bytes.Contains(body, []byte("Job "+submissionID+" does not exist"))
}

// do sends one request and returns the answer's status and body; a body over maxBody is an error saying so.
func (c *Client) do(ctx context.Context, method, path string, payload []byte) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	resp, err := c.send(ctx, method, path, payload)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		return 0, nil, fmt.Errorf("%s: read the answer to %s %s: %w", c.where(), method, path, err)
	}
	if len(data) > maxBody {
		return 0, nil, c.tooLarge(method, path, maxBody)
	}
	return resp.StatusCode, data, nil
}

// tooLarge is the error of an answer cut at limit bytes.
func (c *Client) tooLarge(method, path string, limit int64) error {
	return fmt.Errorf("%s: the answer to %s %s is larger than %d bytes, the most kray reads; it was not used", c.where(), method, path, limit)
}

// send sends one request under ctx; the caller closes the answer's body.
func (c *Client) send(ctx context.Context, method, path string, payload []byte) (*http.Response, error) {
	var body io.Reader
	if payload != nil {
		body = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return nil, err
	}
	if payload != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set(c.tokenHeader, "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.where(), err)
	}
	return resp, nil
}

// httpError describes an unexpected answer, with an excerpt of its body.
func (c *Client) httpError(what string, status int, body []byte) error {
	if status >= 300 && status < 400 {
		return fmt.Errorf("%s: the %s answered %d %s, and kray follows no redirect: %s", what, c.peerName(), status, http.StatusText(status), Excerpt(body))
	}
	return fmt.Errorf("%s: the %s answered %d %s: %s", what, c.peerName(), status, http.StatusText(status), Excerpt(body))
}

// Excerpt is the start of a peer's answer as it may appear in a status or an event: valid UTF-8, every run
// of white space and control characters one space, at most maxExcerpt bytes (then ending "...").
func Excerpt(body []byte) string {
	text := strings.ToValidUTF8(string(body[:min(len(body), 4*maxExcerpt)]), "\uFFFD")
	text = strings.Join(strings.FieldsFunc(text, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }), " ")
	if len(text) <= maxExcerpt && len(body) <= 4*maxExcerpt {
		return text
	}
	cut := min(len(text), maxExcerpt)
	for cut > 0 && cut < len(text) && !utf8.RuneStart(text[cut]) {
		cut--
	}
	return text[:cut] + "..."
}

// where names what answers at the client's base URL, and the URL without its password, if any.
func (c *Client) where() string {
	return c.peerName() + " " + redacted(c.base)
}

// redacted is address with the password of its user info, if any, replaced.
func redacted(address string) string {
	if u, err := url.Parse(address); err == nil {
		return u.Redacted()
	}
	return address
}

// peerName names what answers at the client's base URL.
func (c *Client) peerName() string {
	if c.peer == "" {
		return "Ray dashboard"
	}
	return c.peer
}

// Address is an operator-level address template with its {namespace}, {cluster} and {pod} placeholders
// replaced by vars' values; a template without placeholders is the same address for every cluster.
func Address(template string, vars map[string]string) string {
	out := template
	for k, v := range vars {
		out = strings.ReplaceAll(out, "{"+k+"}", v)
	}
	return strings.TrimSuffix(out, "/")
}
