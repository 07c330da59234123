package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/procfs"
)

// Ports of the operator under test (metrics, health); both operators use the same ones, one at a time.
// Below the ephemeral range, like benchPorts.
const (
	operatorMetricsPort = "30880"
	operatorProbePort   = "30881"
)

// Names of the operators under test, as -operators spells them (kruiseAlone is the third).
const (
	operatorKray    = "kray"
	operatorKubeRay = "kuberay"
)

// operator describes how to start one operator under test.
type operator struct {
	name   string
	binary string
	// args are the operator's flags; "{kubeconfig}" is replaced by the cluster's admin kubeconfig.
	args []string
	// crdDir holds the RayCluster CRD (and, for KubeRay, its other CRDs) installed before the start.
	crdDir string
}

func newOperator(cfg config, name string) (*operator, error) {
	metrics := "127.0.0.1:" + operatorMetricsPort
	probe := "127.0.0.1:" + operatorProbePort
	switch name {
	case operatorKray:
		return &operator{
			name:   name,
			binary: cfg.KrayBinary,
			args: append([]string{"--kubeconfig={kubeconfig}", "--metrics-bind-address=" + metrics, "--metrics-secure=false",
				"--health-probe-bind-address=" + probe, "--zap-log-level=info"}, cfg.KrayArgs...),
			crdDir: filepath.Join(cfg.Root, "config/crd/bases"),
		}, nil
	case operatorKubeRay:
		if cfg.KubeRayCRDs == "" {
			return nil, fmt.Errorf("kuberay needs -kuberay-crds (its module's config/crd/bases)")
		}
		return &operator{
			name:   name,
			binary: cfg.KubeRayBinary,
			args: append([]string{"--kubeconfig={kubeconfig}", "--metrics-addr=" + metrics,
				"--health-probe-bind-address=" + probe, "--enable-leader-election=false",
				"--log-stdout-encoder=console"}, cfg.KubeRayArgs...),
			crdDir: cfg.KubeRayCRDs,
		}, nil
	case kruiseAlone:
		// No process: the harness applies kray's built objects itself (kruisealone.go). kray's CRD is
		// installed only for the recorder's RayCluster informer.
		return &operator{name: name, crdDir: filepath.Join(cfg.Root, "config/crd/bases")}, nil
	}
	return nil, fmt.Errorf("unknown operator %q (want kray, kuberay or %s)", name, kruiseAlone)
}

// process is a started operator.
type process struct {
	cmd *exec.Cmd
	log *os.File
}

// start runs op against kubeconfig with its output in logFile and waits until its /readyz answers.
func (op *operator) start(ctx context.Context, kubeconfig, logFile string) (*process, error) {
	f, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	args := make([]string, len(op.args))
	for i, a := range op.args {
		args[i] = strings.ReplaceAll(a, "{kubeconfig}", kubeconfig)
	}
	cmd := exec.Command(op.binary, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, err
	}
	p := &process{cmd: cmd, log: f}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	deadline := time.Now().Add(60 * time.Second)
	for !httpOK("http://127.0.0.1:" + operatorProbePort + "/readyz") {
		select {
		case <-exited:
			f.Close()
			return nil, fmt.Errorf("%s exited during start; see %s", op.name, logFile)
		case <-ctx.Done():
			p.stop()
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.stop()
			return nil, fmt.Errorf("%s not ready after 60 s; see %s", op.name, logFile)
		}
	}
	return p, nil
}

func (p *process) pid() int { return p.cmd.Process.Pid }

// stop sends SIGTERM to the operator (only its PID), then SIGKILL after 10 s.
func (p *process) stop() {
	defer p.log.Close()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	for i := 0; i < 100; i++ {
		if p.cmd.ProcessState != nil || syscall.Kill(p.pid(), 0) != nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	_ = p.cmd.Process.Kill()
}

func httpOK(url string) bool {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode == http.StatusOK
}

// procSample is one reading of a process's counters.
type procSample struct {
	CPUSeconds float64 `json:"cpuSeconds"` // utime+stime since the process started
	PeakRSSMiB float64 `json:"peakRSSMiB"` // VmHWM: the process's peak resident set so far
	// Requests are rest_client_requests_total summed per HTTP method (all codes, all hosts).
	Requests map[string]float64 `json:"requests"`
	// Errors are the requests above answered with a code outside 2xx (throttling shows here as 429).
	Errors map[string]float64 `json:"errors"`
	// Reconciles are controller_runtime_reconcile_total of the RayCluster controller (every result).
	Reconciles float64 `json:"rayclusterReconciles"`
}

// sampleProcess reads pid's CPU time and peak RSS from /proc and its request counters from metricsURL.
func sampleProcess(pid int, metricsURL string) (procSample, error) {
	var s procSample
	proc, err := procfs.NewProc(pid)
	if err != nil {
		return s, err
	}
	stat, err := proc.Stat()
	if err != nil {
		return s, err
	}
	s.CPUSeconds = stat.CPUTime()
	status, err := proc.NewStatus()
	if err != nil {
		return s, err
	}
	s.PeakRSSMiB = float64(status.VmHWM) / (1 << 20)
	s.Requests, s.Errors, s.Reconciles, err = scrapeMetrics(metricsURL)
	return s, err
}

// scrapeMetrics reads a Prometheus text endpoint: controller-runtime's rest_client_requests_total{code,host,method}
// summed per method, separately the non-2xx part, and the RayCluster controller's reconciles
// (controller_runtime_reconcile_total of the controller whose name contains "raycluster": kray's
// "raycluster", KubeRay's "raycluster-controller").
func scrapeMetrics(url string) (all, errs map[string]float64, reconciles float64, err error) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return nil, nil, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, nil, 0, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("parse the metrics of %s: %w", url, err)
	}
	all, errs = map[string]float64{}, map[string]float64{}
	for _, m := range families["rest_client_requests_total"].GetMetric() {
		labels := labelsOf(m)
		all[labels["method"]] += m.GetCounter().GetValue()
		if !strings.HasPrefix(labels["code"], "2") {
			errs[labels["method"]] += m.GetCounter().GetValue()
		}
	}
	for _, m := range families["controller_runtime_reconcile_total"].GetMetric() {
		if strings.Contains(strings.ToLower(labelsOf(m)["controller"]), "raycluster") {
			reconciles += m.GetCounter().GetValue()
		}
	}
	return all, errs, reconciles, nil
}

// labelsOf is m's labels by name.
func labelsOf(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// delta is after minus before, per counter; the peak RSS is after's (a high-water mark).
func delta(before, after procSample) procSample {
	d := procSample{CPUSeconds: after.CPUSeconds - before.CPUSeconds, PeakRSSMiB: after.PeakRSSMiB, Reconciles: after.Reconciles - before.Reconciles,
		Requests: map[string]float64{}, Errors: map[string]float64{}}
	for k, v := range after.Requests {
		if x := v - before.Requests[k]; x != 0 {
			d.Requests[k] = x
		}
	}
	for k, v := range after.Errors {
		if x := v - before.Errors[k]; x != 0 {
			d.Errors[k] = x
		}
	}
	return d
}

func (s procSample) totalRequests() float64 {
	var t float64
	for _, v := range s.Requests {
		t += v
	}
	return t
}
