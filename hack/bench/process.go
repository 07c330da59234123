package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
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

// clockTicks is USER_HZ, which is 100 on every Linux platform Go supports.
const clockTicks = 100

// sampleProcess reads pid's CPU time and peak RSS from /proc and its request counters from metricsURL.
func sampleProcess(pid int, metricsURL string) (procSample, error) {
	var s procSample
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return s, err
	}
	// The command name (field 2) may contain spaces; fields after its closing parenthesis are fixed.
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	utime, _ := strconv.ParseFloat(fields[11], 64) // field 14 of stat
	stime, _ := strconv.ParseFloat(fields[12], 64) // field 15 of stat
	s.CPUSeconds = (utime + stime) / clockTicks
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			s.PeakRSSMiB = kb / 1024
		}
	}
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
	all, errs = map[string]float64{}, map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), "{")
		if !ok || (name != "rest_client_requests_total" && name != "controller_runtime_reconcile_total") {
			continue
		}
		labelText, valueText, ok := strings.Cut(rest, "} ")
		if !ok {
			continue
		}
		v, perr := strconv.ParseFloat(strings.Fields(valueText)[0], 64)
		if perr != nil {
			continue
		}
		labels := parseLabels(labelText)
		if name == "controller_runtime_reconcile_total" {
			if strings.Contains(strings.ToLower(labels["controller"]), "raycluster") {
				reconciles += v
			}
			continue
		}
		all[labels["method"]] += v
		if !strings.HasPrefix(labels["code"], "2") {
			errs[labels["method"]] += v
		}
	}
	return all, errs, reconciles, sc.Err()
}

// parseLabels parses `a="x",b="y"`; label values here never contain quotes or commas.
func parseLabels(s string) map[string]string {
	out := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if ok {
			out[k] = strings.Trim(v, `"`)
		}
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
