package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The kubelet's word on probes in the kind suite: every failed probe is an Unhealthy event of the pod, and
// every container it kills for a failed liveness or startup probe a Killing event that says so. No kind test
// makes a probe fail on purpose, so a kill in a test's namespace is the suite's load or a defect, never what
// the test asked for: the test fails. Failures alone are counted and printed (a readiness probe that failed
// once while a container started is the kubelet's normal way).

// Event reasons the kubelet gives probe results (pkg/kubelet/events).
const (
	eventUnhealthy = "Unhealthy"
	eventKilling   = "Killing"
)

// probeCount is what the kubelets reported of probes in one namespace.
type probeCount struct {
	// Failures counts failed probes, TimedOut those of them that ran out of time, Kills the containers
	// killed for a failed probe.
	Failures, TimedOut, Kills int32
	// Killed names each container killed, with the kubelet's message.
	Killed []string
}

func (c *probeCount) add(o probeCount) {
	c.Failures += o.Failures
	c.TimedOut += o.TimedOut
	c.Kills += o.Kills
	c.Killed = append(c.Killed, o.Killed...)
}

func (c probeCount) String() string {
	return fmt.Sprintf("%d probe failures (%d timed out), %d containers killed by a probe", c.Failures, c.TimedOut, c.Kills)
}

// probeCounts reads the probe events of ns ("" for every namespace). An event the kubelet repeated counts as
// many times as it happened.
func probeCounts(ctx context.Context, ns string) (probeCount, error) {
	var out probeCount
	list, err := clientset.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return out, err
	}
	for i := range list.Items {
		e := &list.Items[i]
		n := max(e.Count, 1)
		if e.Series != nil {
			n = max(n, e.Series.Count)
		}
		switch {
		case e.Reason == eventUnhealthy:
			out.Failures += n
			if strings.Contains(e.Message, "timed out") || strings.Contains(e.Message, "DeadlineExceeded") {
				out.TimedOut += n
			}
		case e.Reason == eventKilling && probeKill(e.Message):
			out.Kills += n
			out.Killed = append(out.Killed, fmt.Sprintf("%s/%s: %s (%d times)", e.InvolvedObject.Namespace, e.InvolvedObject.Name, e.Message, n))
		}
	}
	return out, nil
}

// probeKill reports whether a Killing event's message is the kubelet's for a container that failed a
// liveness or startup probe ("Container ray-worker failed liveness probe, will be restarted").
func probeKill(message string) bool {
	return strings.Contains(message, "failed liveness probe") || strings.Contains(message, "failed startup probe")
}

// kindProbes is the kind suite's tally of probe events in the tests' namespaces, printed at its end.
var kindProbes = struct {
	sync.Mutex
	tests  probeCount
	byTest map[string]probeCount
}{byTest: map[string]probeCount{}}

// auditProbes reads the probe events of the test's namespace ns as the test ends, logs them, adds them to
// the suite's tally and fails the test when the kubelet killed a container of it for a failed probe.
func auditProbes(t *testing.T, ns string) {
	t.Helper()
	got, err := probeCounts(context.Background(), ns)
	if err != nil {
		t.Errorf("reading the probe events of %s: %v", ns, err)
		return
	}
	kindProbes.Lock()
	kindProbes.tests.add(got)
	if got.Failures > 0 || got.Kills > 0 {
		kindProbes.byTest[t.Name()] = got
	}
	kindProbes.Unlock()
	if got.Failures == 0 && got.Kills == 0 {
		return
	}
	t.Logf("probes in %s: %s", ns, got)
	if got.Kills > 0 {
		t.Errorf("the kubelet killed containers of this test for a failed probe, which no kind test causes on purpose:\n%s",
			strings.Join(got.Killed, "\n"))
	}
}

// reportKindProbes prints the suite's tally: the tests' namespaces, and the namespaces that outlive them (the
// operator's, Kruise's, the system's).
func reportKindProbes(ctx context.Context) {
	kindProbes.Lock()
	defer kindProbes.Unlock()
	fmt.Printf("kind suite probes: in the tests' namespaces %s\n", kindProbes.tests)
	for _, name := range slices.Sorted(maps.Keys(kindProbes.byTest)) {
		fmt.Printf("  %s: %s\n", name, kindProbes.byTest[name])
	}
	rest, err := probeCounts(ctx, corev1.NamespaceAll)
	if err != nil {
		fmt.Printf("kind suite probes: reading the remaining events: %v\n", err)
		return
	}
	fmt.Printf("kind suite probes: in the namespaces still there %s\n", rest)
	for _, k := range rest.Killed {
		fmt.Printf("  %s\n", k)
	}
}
