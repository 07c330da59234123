package kuberaytypes

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	schedulerinterface "github.com/ray-project/kuberay/ray-operator/controllers/ray/batchscheduler/interface"
	kaischeduler "github.com/ray-project/kuberay/ray-operator/controllers/ray/batchscheduler/kai-scheduler"
	schedulerplugins "github.com/ray-project/kuberay/ray-operator/controllers/ray/batchscheduler/scheduler-plugins"
	"github.com/ray-project/kuberay/ray-operator/controllers/ray/batchscheduler/volcano"
	"github.com/ray-project/kuberay/ray-operator/controllers/ray/batchscheduler/yunikorn"
	"github.com/ray-project/kuberay/ray-operator/controllers/ray/utils"
	corev1 "k8s.io/api/core/v1"
)

// crossCheckFile is what kray makes of a set of clusters under each batch scheduler (written and checked by
// kray's pkg/batchscheduler tests).
var crossCheckFile = filepath.Join("..", "..", "pkg", "batchscheduler", "testdata", "kuberay-crosscheck.json")

type podMeta struct {
	SchedulerName string            `json:"schedulerName,omitempty"`
	Labels        map[string]string `json:"labels,omitempty"`
	Annotations   map[string]string `json:"annotations,omitempty"`
}

type crossCheckCase struct {
	Name      string             `json:"name"`
	Scheduler string             `json:"scheduler"`
	Cluster   *rayv1.RayCluster  `json:"cluster"`
	Pods      map[string]podMeta `json:"pods"`
	PodGroup  *struct {
		MinMember    int32               `json:"minMember"`
		MinResources corev1.ResourceList `json:"minResources"`
	} `json:"podGroup,omitempty"`
}

// schedulerKeys are the pod labels and annotations KubeRay's scheduler plugins set.
var schedulerKeys = []string{
	"scheduling.x-k8s.io/pod-group",
	"volcano.sh/queue-name", "ray.io/priority-class-name", "scheduling.k8s.io/group-name", "volcano.sh/task-spec",
	"applicationId", "queue", "yunikorn.apache.org/task-groups", "yunikorn.apache.org/task-group-name",
	"kai.scheduler/queue",
}

func pick(m map[string]string) map[string]string {
	var out map[string]string
	for _, k := range schedulerKeys {
		if v, ok := m[k]; ok {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
}

func kubeRayScheduler(name string) schedulerinterface.BatchScheduler {
	switch name {
	case "scheduler-plugins":
		return &schedulerplugins.KubeScheduler{}
	case "volcano":
		return &volcano.VolcanoBatchScheduler{}
	case "yunikorn":
		return &yunikorn.YuniKornScheduler{}
	case "kai-scheduler":
		return &kaischeduler.KaiScheduler{}
	}
	return nil
}

// TestKrayMatchesKubeRaysSchedulerPlugins holds what kray makes of each cluster of the cross-check file against
// KubeRay's own code for the same cluster: the metadata its scheduler plugin puts on each group's pod, and the
// PodGroup size its counting functions give (scheduler-plugins: the desired pods; Volcano: the desired or, when
// autoscaling, the minimum pods).
func TestKrayMatchesKubeRaysSchedulerPlugins(t *testing.T) {
	data, err := os.ReadFile(crossCheckFile)
	if err != nil {
		t.Fatal(err)
	}
	var cases []crossCheckCase
	if err := json.Unmarshal(data, &cases); err != nil {
		t.Fatal(err)
	}
	if len(cases) == 0 {
		t.Fatalf("%s holds no case", crossCheckFile)
	}
	ctx := context.Background()
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			sched := kubeRayScheduler(c.Scheduler)
			if sched == nil {
				t.Fatalf("unknown scheduler %q", c.Scheduler)
			}
			groups := []string{"headgroup"}
			for _, g := range c.Cluster.Spec.WorkerGroupSpecs {
				groups = append(groups, g.GroupName)
			}
			if len(groups) != len(c.Pods) {
				t.Errorf("kray has %d groups, the cluster %d", len(c.Pods), len(groups))
			}
			for _, group := range groups {
				pod := &corev1.Pod{}
				sched.AddMetadataToChildResource(ctx, c.Cluster, pod, group)
				got := podMeta{pod.Spec.SchedulerName, pick(pod.Labels), pick(pod.Annotations)}
				want := c.Pods[group]
				if got.SchedulerName != want.SchedulerName || !equal(got.Labels, want.Labels) || !equal(got.Annotations, want.Annotations) {
					t.Errorf("pod of %s:\nKubeRay %+v\n   kray %+v", group, got, want)
				}
			}
			if c.PodGroup == nil {
				return
			}
			members, resources := utils.CalculateDesiredReplicas(ctx, c.Cluster)+1, utils.CalculateDesiredResources(c.Cluster)
			if c.Scheduler == "volcano" && utils.IsAutoscalingEnabled(&c.Cluster.Spec) {
				members, resources = utils.CalculateMinReplicas(c.Cluster)+1, utils.CalculateMinResources(c.Cluster)
			}
			if members != c.PodGroup.MinMember {
				t.Errorf("minMember: KubeRay %d, kray %d", members, c.PodGroup.MinMember)
			}
			if len(resources) != len(c.PodGroup.MinResources) {
				t.Errorf("minResources: KubeRay %v, kray %v", resources, c.PodGroup.MinResources)
			}
			for name, q := range resources {
				if k, ok := c.PodGroup.MinResources[name]; !ok || k.Cmp(q) != 0 {
					t.Errorf("minResources %s: KubeRay %s, kray %s", name, q.String(), k.String())
				}
			}
		})
	}
}

func equal(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
