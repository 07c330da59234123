package dashboard

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// ServeApplicationsPath is the Serve REST API's path on the dashboard: GET reports the applications, PUT
// replaces them with a multi-application config.
const ServeApplicationsPath = "/api/serve/applications/"

// ServeHealthPath is the Serve proxy's health check path on the serve port.
const ServeHealthPath = "/-/healthz"

// ServeDetails is the part of Serve's declarative details that kray reads; unknown fields are ignored.
type ServeDetails struct {
	// Applications are the Serve applications by name; empty before any config was applied, and after a head
	// restart without GCS fault tolerance.
	Applications map[string]ServeApplication `json:"applications"`
	// TargetCapacity is the target_capacity of the config Serve runs, nil when it has none (100%).
	TargetCapacity *float64 `json:"target_capacity,omitempty"`
	// Proxies are Serve's proxies by node ID: where traffic enters Serve. With Serve's default proxy location
	// (EveryNode) that is the head and every node that runs a replica and is not draining.
	Proxies map[string]ServeProxy `json:"proxies,omitempty"`
}

// ServeProxy is one Serve proxy: the Ray node it runs on and its status.
type ServeProxy struct {
	NodeID string `json:"node_id"`
	NodeIP string `json:"node_ip"`
	// NodeInstanceID is the node's instance ID: the pod name, which RAY_CLOUD_INSTANCE_ID gives each pod.
	NodeInstanceID string `json:"node_instance_id"`
	// Status is one of ProxyStarting, ProxyHealthy, ProxyUnhealthy, ProxyDraining and ProxyDrained.
	Status string `json:"status"`
}

// The statuses of a Serve proxy (Ray's ProxyStatus).
const (
	ProxyStarting  = "STARTING"
	ProxyHealthy   = "HEALTHY"
	ProxyUnhealthy = "UNHEALTHY"
	ProxyDraining  = "DRAINING"
	ProxyDrained   = "DRAINED"
)

// Leaving reports whether the proxy is on its way out (draining or drained): Serve takes no new traffic in
// through it.
func (p ServeProxy) Leaving() bool {
	return p.Status == ProxyDraining || p.Status == ProxyDrained
}

// ServeApplication is one Serve application's status and its deployments'.
type ServeApplication struct {
	Status      string                     `json:"status"`
	Message     string                     `json:"message,omitempty"`
	Deployments map[string]ServeDeployment `json:"deployments,omitempty"`
}

// ServeDeployment is one Serve deployment's status.
type ServeDeployment struct {
	Status  string `json:"status"`
	Message string `json:"message,omitempty"`
}

// ServeAPI is what the RayService controller asks of one cluster's dashboard.
type ServeAPI interface {
	// Applications returns Serve's applications and their statuses.
	Applications(ctx context.Context) (*ServeDetails, error)
	// Apply replaces Serve's applications with config, a multi-application config as JSON.
	Apply(ctx context.Context, config []byte) error
}

// ServeDialer returns the ServeAPI of the dashboard at a base URL, sending token (when not empty) with each
// call.
type ServeDialer interface {
	Serve(baseURL, token string) ServeAPI
}

var _ ServeAPI = (*Client)(nil)

// Serve returns a Client for baseURL.
func (d HTTPDialer) Serve(baseURL, token string) ServeAPI {
	return d.Jobs(baseURL, token).(*Client)
}

// maxServeBody bounds the bytes of Serve's details, which list every replica of every deployment (about 400
// bytes each: 64 MiB holds 150,000 replicas); decodeServeDetails bounds the memory they take. The bound also
// bounds the work a head answering without end makes kray do per call.
var maxServeBody int64 = 64 << 20 // a variable for the test of an answer over it

// serveCallTimeout bounds the Serve details call, whose answer grows with the replicas.
const serveCallTimeout = 10 * time.Second

// Applications reads Serve's declarative details. Anything but 200 with a JSON object is an error: a 503
// says Serve's controller cannot be reached, and an answer cut at maxServeBody says so.
func (c *Client) Applications(ctx context.Context) (*ServeDetails, error) {
	ctx, cancel := context.WithTimeout(ctx, serveCallTimeout)
	defer cancel()
	path := ServeApplicationsPath + "?api_type=declarative"
	resp, err := c.send(ctx, http.MethodGet, path, nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxBody))
		return nil, c.httpError("get Serve applications", resp.StatusCode, body)
	}
	body := &io.LimitedReader{R: resp.Body, N: maxServeBody + 1}
	details, err := decodeServeDetails(body)
	switch {
	case body.N == 0:
		return nil, c.tooLarge(http.MethodGet, path, maxServeBody)
	case err != nil:
		return nil, fmt.Errorf("get Serve applications: the dashboard's answer is not Serve details: %w", err)
	}
	return details, nil
}

// Apply puts config; Serve answers 200 once it has accepted the config (the applications then deploy), 400
// with the reason when the config is invalid.
func (c *Client) Apply(ctx context.Context, config []byte) error {
	status, body, err := c.do(ctx, http.MethodPut, ServeApplicationsPath, config)
	if err != nil {
		return err
	}
	if status != http.StatusOK {
		return c.httpError("apply the Serve config", status, body)
	}
	return nil
}

// ServeConfigJSON is a RayService's serveConfigV2, YAML, as the JSON object the Serve API takes.
func ServeConfigJSON(serveConfigV2 string) ([]byte, error) {
	data, err := yaml.YAMLToJSON([]byte(serveConfigV2))
	if err != nil {
		return nil, fmt.Errorf("serveConfigV2 is not valid YAML: %w", err)
	}
	if s := strings.TrimSpace(string(data)); s == "null" {
		return []byte("{}"), nil
	} else if !strings.HasPrefix(s, "{") {
		return nil, fmt.Errorf("serveConfigV2 must be a YAML mapping (a Serve config with applications), got %s", s)
	}
	return data, nil
}

// ProbeServeProxy reports whether the Serve proxy at baseURL (http://host:port) answers its health check
// with 200; any other answer or none is unhealthy, with the reason.
func ProbeServeProxy(ctx context.Context, hc *http.Client, baseURL string) (bool, error) {
	c := &Client{http: noRedirects(hc), base: strings.TrimSuffix(baseURL, "/"), peer: "Serve proxy"}
	status, body, err := c.do(ctx, http.MethodGet, ServeHealthPath, nil)
	if err != nil {
		return false, err
	}
	if status != http.StatusOK {
		return false, c.httpError("Serve proxy health check at "+redacted(c.base), status, body)
	}
	return true, nil
}

// WithTargetCapacity is config (a Serve config as JSON) with its top-level target_capacity set to percent:
// Serve then runs each deployment at that share of its replicas (an incremental upgrade's step).
func WithTargetCapacity(config []byte, percent int32) ([]byte, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(config, &fields); err != nil {
		return nil, fmt.Errorf("the Serve config is not a JSON object: %w", err)
	}
	if fields == nil {
		fields = map[string]json.RawMessage{}
	}
	fields["target_capacity"] = json.RawMessage(fmt.Sprint(percent))
	return json.Marshal(fields)
}
