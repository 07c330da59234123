package batchscheduler

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	rayv1 "github.com/kray-project/kray/api/v1"
)

var update = flag.Bool("update", false, "rewrite testdata/kuberay-crosscheck.json from kray's output")

// crossCheckFile holds, for clusters on which kray and KubeRay agree by design, what kray makes of them: the
// pod metadata of each group and the PodGroup's size. test/kuberaytypes, which holds KubeRay's module,
// checks that KubeRay's own scheduler plugins and counting functions give the same.
const crossCheckFile = "testdata/kuberay-crosscheck.json"

// crossCheckCase is one cluster under one scheduler.
type crossCheckCase struct {
	Name      string                  `json:"name"`
	Scheduler string                  `json:"scheduler"`
	Cluster   *rayv1.RayCluster       `json:"cluster"`
	Pods      map[string]podMeta      `json:"pods"`
	PodGroup  *crossCheckPodGroupSize `json:"podGroup,omitempty"`
}

type crossCheckPodGroupSize struct {
	MinMember    int32               `json:"minMember"`
	MinResources corev1.ResourceList `json:"minResources"`
}

// crossCheckClusters are KubeRay's scheduler samples and KubeRay's own test vectors, with what kray does
// differently left out: suspended groups, replicas above maxReplicas (see docs/kuberay-compatibility.md).
func crossCheckClusters(t *testing.T) []crossCheckCase {
	var cases []crossCheckCase
	for _, s := range []struct{ file, scheduler string }{
		{"ray-cluster.scheduler-plugins.yaml", SchedulerPlugins},
		{"ray-cluster.volcano-scheduler.yaml", Volcano},
		{"ray-cluster.volcano-scheduler-queue.yaml", Volcano},
		{"ray-cluster.yunikorn-scheduler.yaml", YuniKorn},
		{"ray-cluster.kai-scheduler.yaml", KAI},
	} {
		rc := &rayv1.RayCluster{}
		sampleObject(t, s.file, "RayCluster", rc)
		cases = append(cases, crossCheckCase{Name: s.file, Scheduler: s.scheduler, Cluster: rc})
	}
	placed := kubeRayTestCluster(2)
	placed.Name = "placed"
	placed.Labels[LabelYuniKornAppID], placed.Labels[LabelYuniKornQueue] = "app", "root.q"
	placed.Labels[LabelVolcanoQueue], placed.Labels[LabelPriorityClassName] = "q", "high"
	placed.Labels[LabelKAIQueue] = "team"
	w := &placed.Spec.WorkerGroupSpecs[0].Template.Spec
	w.NodeSelector = map[string]string{"pool": "gpu"}
	w.Tolerations = []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	autoscaling := placed.DeepCopy()
	autoscaling.Name = "autoscaling"
	autoscaling.Spec.EnableInTreeAutoscaling = ptr.To(true)
	for _, scheduler := range []string{SchedulerPlugins, Volcano, YuniKorn, KAI} {
		cases = append(cases, crossCheckCase{Name: "placed/" + scheduler, Scheduler: scheduler, Cluster: placed})
	}
	cases = append(cases, crossCheckCase{Name: "autoscaling/" + Volcano, Scheduler: Volcano, Cluster: autoscaling})
	for i := range cases {
		c := &cases[i]
		// As the API server defaults it (KubeRay counts numOfHosts as it finds it).
		for j := range c.Cluster.Spec.WorkerGroupSpecs {
			if g := &c.Cluster.Spec.WorkerGroupSpecs[j]; g.NumOfHosts == 0 {
				g.NumOfHosts = 1
			}
		}
		s := Decide(c.Cluster, c.Scheduler)
		c.Pods = map[string]podMeta{GroupHead: metaOf(s, c.Cluster, corev1.PodTemplateSpec{}, GroupHead)}
		for _, g := range c.Cluster.Spec.WorkerGroupSpecs {
			c.Pods[g.GroupName] = metaOf(s, c.Cluster, corev1.PodTemplateSpec{}, g.GroupName)
		}
		switch {
		case s.Scheduler == Volcano:
			members, resources := VolcanoSize(c.Cluster)
			c.PodGroup = &crossCheckPodGroupSize{members, resources}
		case s.PodGroupName(c.Cluster) != "":
			c.PodGroup = &crossCheckPodGroupSize{MinMember(c.Cluster), MinResources(c.Cluster)}
		}
	}
	return cases
}

// TestKubeRayCrossCheckFile keeps testdata/kuberay-crosscheck.json what kray makes of its clusters; run
// `go test ./pkg/batchscheduler -update` after a deliberate change, and test/kuberaytypes to hold it against
// KubeRay's code.
func TestKubeRayCrossCheckFile(t *testing.T) {
	got, err := json.MarshalIndent(crossCheckClusters(t), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	if *update {
		if err := os.MkdirAll(filepath.Dir(crossCheckFile), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(crossCheckFile, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(crossCheckFile)
	if err != nil {
		t.Fatalf("read %s (run with -update to create it): %v", crossCheckFile, err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s is stale (-file +kray); run go test ./pkg/batchscheduler -update:\n%s", crossCheckFile, diff)
	}
}
