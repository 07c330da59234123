package main

import (
	"context"
	"fmt"
	"log"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// benchPorts are the benchmark cluster's ports: every KRAY_*_PORT variable of hack/cluster.sh, moved off
// the default instance's. They stay below 32768, the start of Linux's ephemeral range: a port up there can
// be the local end of any outgoing connection (the other cluster's traffic included), and a listener then
// fails with address-in-use. A variable already set in the environment wins.
var benchPorts = [][2]string{
	{"KRAY_ETCD_PORT", "24791"},
	{"KRAY_ETCD_PEER_PORT", "24801"},
	{"KRAY_APISERVER_PORT", "27443"},
	{"KRAY_CONTROLLER_MANAGER_PORT", "27257"},
	{"KRAY_SCHEDULER_PORT", "27259"},
	{"KRAY_KWOK_PORT", "27247"},
	{"KRAY_KRUISE_WEBHOOK_PORT", "30876"},
	{"KRAY_KRUISE_HEALTH_PORT", "30877"},
	{"KRAY_KRUISE_METRICS_PORT", "30878"},
}

// Pod capacity per kwok node; the node count is derived from the pods a run needs.
const nodePods = 1000

// localCluster drives hack/cluster.sh with the benchmark's state directory, ports and node sizes.
type localCluster struct {
	root string
	env  map[string]string
}

// clusterInfo is what the report records about the cluster an operator ran on.
type clusterInfo struct {
	Env map[string]string `json:"env"`
}

// newLocalCluster returns the cluster of one operator, with its state in <local-dir>/<operator> so that
// the next operator's purge keeps this one's logs.
func newLocalCluster(cfg config, operator string) *localCluster {
	env := map[string]string{"KRAY_LOCAL_DIR": filepath.Join(cfg.LocalDir, operator)}
	for _, p := range benchPorts {
		env[p[0]] = envOr(p[0], p[1])
	}
	env["KRAY_NODES"] = envOr("KRAY_NODES", strconv.Itoa(nodesFor(cfg)))
	env["KRAY_NODE_CPU"] = envOr("KRAY_NODE_CPU", "1000")
	env["KRAY_NODE_MEMORY"] = envOr("KRAY_NODE_MEMORY", "2000Gi")
	env["KRAY_NODE_PODS"] = envOr("KRAY_NODE_PODS", strconv.Itoa(nodePods))
	env["KRAY_WAIT_TIMEOUT"] = envOr("KRAY_WAIT_TIMEOUT", "120")
	env["KRAY_KRUISE_PROFILE"] = cfg.KruiseProfile
	env["KRAY_KRUISE_POD_WEBHOOK"] = strconv.FormatBool(cfg.KruisePodWebhook)
	env["KRAY_KRUISE_IMAGE_PULLING"] = "false" // no scenario pulls images; kept off as in every earlier run
	env["KRAY_POD_START_DELAY_MS"] = strconv.FormatInt(cfg.PodStartDelay.Milliseconds(), 10)
	env["KRAY_POD_START_JITTER_MS"] = strconv.FormatInt(cfg.PodStartJitter.Milliseconds(), 10)
	return &localCluster{root: cfg.Root, env: env}
}

// nodesFor returns enough kwok nodes for every pod of every scenario (nothing is deleted between
// scenarios) with half a node's room to spare, and at least 4.
func nodesFor(cfg config) int {
	pods := cfg.Clusters*4 + 1 + cfg.ScaleTo + cfg.SmallClusters*4 +
		cfg.DownClusters*(1+3+cfg.DownPerClust) + 2*cfg.Evictions
	return max(4, (pods+nodePods/2)/nodePods+1)
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func (c *localCluster) describe() clusterInfo {
	env := make(map[string]string, len(c.env))
	for k, v := range c.env {
		if k != "KRAY_LOCAL_DIR" {
			env[k] = v
		}
	}
	return clusterInfo{Env: env}
}

func (c *localCluster) kubeconfig() string {
	return filepath.Join(c.env["KRAY_LOCAL_DIR"], "kubeconfig")
}

func (c *localCluster) kruiseMetricsURL() string {
	return "http://127.0.0.1:" + c.env["KRAY_KRUISE_METRICS_PORT"] + "/metrics"
}

// kruisePID returns the PID that cluster.sh recorded for kruise-manager.
func (c *localCluster) kruisePID() (int, error) {
	b, err := os.ReadFile(filepath.Join(c.env["KRAY_LOCAL_DIR"], "run", "kruise-manager.pid"))
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// kruiseFlags returns kruise-manager's command line (flags and the WEBHOOK_* environment are as
// cluster.sh started it), read from /proc so the record cannot drift from the script.
func (c *localCluster) kruiseFlags() ([]string, error) {
	pid, err := c.kruisePID()
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return nil, err
	}
	args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
	return args[1:], nil
}

// up starts the cluster and waits until it is ready.
func (c *localCluster) up(ctx context.Context) error { return c.script(ctx, "up") }

// down stops the cluster (purge also deletes its state directory) and waits until its ports are free:
// cluster.sh returns once the processes are gone, which can be just before the kernel releases a port, and
// the next `up` would fail with address-in-use.
func (c *localCluster) down(purge bool) error {
	args := []string{"down"}
	if purge {
		args = append(args, "--purge")
	}
	if err := c.script(context.Background(), args...); err != nil {
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, p := range benchPorts {
		for listening("127.0.0.1:" + c.env[p[0]]) {
			if time.Now().After(deadline) {
				return fmt.Errorf("port %s (%s) still in use 30 s after cluster.sh down", c.env[p[0]], p[0])
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return nil
}

// listening reports whether something accepts TCP connections on addr.
func listening(addr string) bool {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	conn.Close()
	return true
}

func (c *localCluster) script(ctx context.Context, args ...string) error {
	log.Printf("hack/cluster.sh %s", strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, filepath.Join(c.root, "hack/cluster.sh"), args...)
	cmd.Env = c.environ()
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("hack/cluster.sh %s: %w", strings.Join(args, " "), err)
	}
	return nil
}

// kubectl runs kubectl against the benchmark cluster.
func (c *localCluster) kubectl(ctx context.Context, args ...string) error {
	cmd := exec.CommandContext(ctx, "kubectl", append([]string{"--kubeconfig", c.kubeconfig()}, args...)...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("kubectl %s: %w", strings.Join(args, " "), err)
	}
	return nil
}

// environ is the process environment with the benchmark's KRAY_* variables and without KUBECONFIG.
func (c *localCluster) environ() []string {
	var out []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); k != "KUBECONFIG" && c.env[k] == "" {
			out = append(out, kv)
		}
	}
	for k, v := range c.env {
		out = append(out, k+"="+v)
	}
	return out
}
