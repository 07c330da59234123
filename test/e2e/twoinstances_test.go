package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/kray-project/kray/internal/controller/raycluster"
)

// Two operator instances without leader election reconcile the same ten clusters at once, each losing some
// create and update races to the other: every pod is still created exactly once, and a lost race is neither
// a "Reconciler error" in either log nor a FailedToWriteWorkload event.
func TestTwoOperatorInstancesCreateEachPodOnce(t *testing.T) {
	if !localCluster() {
		t.Skip("needs operators run by hack/operator.sh")
	}
	g := NewWithT(t)
	logs := []string{filepath.Join(repoRoot, ".local", "logs", "kray-operator.log"), filepath.Join(repoRoot, ".local", "logs", "kray-operator-twin.log")}
	offsets := make([]int64, len(logs))
	for i, l := range logs {
		if st, err := os.Stat(l); err == nil {
			offsets[i] = st.Size()
		}
	}
	twin := []string{"KRAY_OPERATOR_INSTANCE=twin", "KRAY_OPERATOR_PROBE_PORT=28094"}
	hackEnv(t, twin, "operator.sh", "start")
	t.Cleanup(func() { hackEnv(t, twin, "operator.sh", "stop") })

	ns := namespace(t)
	clusters := sampleBurst(t, ns, "twin", 10, 3)
	createAtOnce(t, clusters)
	expectEachPodCreatedOnce(t, clusters, 3)
	for _, rc := range clusters {
		g.Expect(eventCount(g, rc, raycluster.EventFailedToWriteWorkload)).To(BeZero(), "cluster %s", rc.Name)
	}
	var lostRaces, errors int
	for i, l := range logs {
		data, err := os.ReadFile(l)
		g.Expect(err).NotTo(HaveOccurred())
		for _, line := range strings.Split(string(data[min(offsets[i], int64(len(data))):]), "\n") {
			if !strings.Contains(line, "Reconciler error") || !strings.Contains(line, `"namespace":"`+ns+`"`) {
				continue
			}
			errors++
			if strings.Contains(line, "already exists") || strings.Contains(line, "%!w(<nil>)") {
				lostRaces++
				t.Logf("%s: %s", filepath.Base(l), line)
			}
		}
	}
	t.Logf("Reconciler errors about these clusters in both logs: %d", errors)
	g.Expect(lostRaces).To(BeZero(), "a lost create race was reported as a Reconciler error")
}
