package validation

import (
	"strings"
	"testing"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/batchscheduler"
)

// KAI cannot gang a submitter made after its cluster: every K8sJobMode RayJob is refused under it, once, as a
// spec error (KubeRay v1.7 returns the same words from each reconcile and requeues).
func TestKAIRefusesK8sJobMode(t *testing.T) {
	kai := RayJobOptions{Cluster: ClusterOptions{BatchScheduler: batchscheduler.KAI}}
	for _, mode := range []rayv1.JobSubmissionMode{rayv1.K8sJobMode, ""} {
		err := RayJobSpec(rayJob(func(j *rayv1.RayJob) { j.Spec.SubmissionMode = mode }), kai)
		if err == nil || !strings.HasPrefix(err.Error(), "KAI-Scheduler does not support RayJob with K8sJobMode") {
			t.Errorf("mode %q: %v", mode, err)
		}
	}
	if err := RayJobSpec(rayJob(func(j *rayv1.RayJob) { j.Spec.SubmissionMode = rayv1.SidecarMode }), kai); err != nil {
		t.Errorf("SidecarMode under KAI: %v", err)
	}
	if err := RayJobSpec(rayJob(), RayJobOptions{}); err != nil {
		t.Errorf("K8sJobMode without KAI: %v", err)
	}
}

// Volcano's network topology tier is an integer; other schedulers do not read the label.
func TestVolcanoNetworkTopologyTier(t *testing.T) {
	rc := cluster()
	rc.Labels = map[string]string{batchscheduler.LabelNetworkTopologyMode: "hard", batchscheduler.LabelNetworkTopologyHighestTier: "two"}
	err := SpecWith(rc, ClusterOptions{BatchScheduler: batchscheduler.Volcano})
	if err == nil || err.Error() != `label volcano.sh/network-topology-highest-tier-allowed must be an integer, got "two"` {
		t.Errorf("under Volcano: %v", err)
	}
	if err := SpecWith(rc, ClusterOptions{}); err != nil {
		t.Errorf("without Volcano: %v", err)
	}
	rc.Labels[batchscheduler.LabelNetworkTopologyHighestTier] = "2"
	if err := SpecWith(rc, ClusterOptions{BatchScheduler: batchscheduler.Volcano}); err != nil {
		t.Errorf("tier 2: %v", err)
	}
}
