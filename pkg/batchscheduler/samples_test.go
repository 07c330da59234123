package batchscheduler

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/internal/kuberayref"
)

// sampleObject decodes the object of kind from one of KubeRay v1.7's samples.
func sampleObject(t *testing.T, file, kind string, into any) {
	t.Helper()
	if err := kuberayref.Sample(file, kind, into); err != nil {
		t.Fatal(err)
	}
}

// podMeta is what a scheduler reads from a pod.
type podMeta struct {
	SchedulerName string            `json:"schedulerName,omitempty"`
	Labels        map[string]string `json:"labels,omitempty"`
	Annotations   map[string]string `json:"annotations,omitempty"`
}

func metaOf(s Scheduling, rc *rayv1.RayCluster, tmpl corev1.PodTemplateSpec, group string) podMeta {
	tmpl = *tmpl.DeepCopy()
	s.ApplyPod(&tmpl, rc, group)
	return podMeta{tmpl.Spec.SchedulerName, tmpl.Labels, tmpl.Annotations}
}

// TestKubeRaysSchedulerSamples checks, for each of KubeRay v1.7's batch scheduler samples of a RayCluster,
// the metadata its head and worker pods get and the PodGroup's size, as KubeRay's scheduler plugins make them
// (batchscheduler/*/ in ray-operator v1.7.0).
func TestKubeRaysSchedulerSamples(t *testing.T) {
	yunikornGroups := `[{"minResource":{"cpu":"1","memory":"2Gi"},"name":"headgroup","minMember":1},` +
		`{"minResource":{"cpu":"1","memory":"1Gi"},"name":"worker","minMember":2}]`
	for _, tt := range []struct {
		file, scheduler string
		head, worker    podMeta
		podGroup        string
		members         int32
		resources       corev1.ResourceList
	}{
		{
			file: "ray-cluster.scheduler-plugins.yaml", scheduler: SchedulerPlugins,
			head:     podMeta{SchedulerPluginsName, map[string]string{LabelPodGroup: "test-podgroup-0"}, nil},
			worker:   podMeta{SchedulerPluginsName, map[string]string{LabelPodGroup: "test-podgroup-0"}, nil},
			podGroup: "test-podgroup-0", members: 3, resources: list("cpu", "3", "memory", "4Gi"),
		},
		{
			file: "ray-cluster.volcano-scheduler.yaml", scheduler: Volcano,
			head:     podMeta{VolcanoName, nil, map[string]string{AnnotationVolcanoGroupName: "ray-test-cluster-0-pg", AnnotationVolcanoTaskSpec: GroupHead}},
			podGroup: "ray-test-cluster-0-pg", members: 1, resources: list("cpu", "1", "memory", "2Gi"),
		},
		{
			file: "ray-cluster.volcano-scheduler-queue.yaml", scheduler: Volcano,
			head: podMeta{VolcanoName, map[string]string{LabelVolcanoQueue: "kuberay-test-queue"},
				map[string]string{AnnotationVolcanoGroupName: "ray-test-cluster-0-pg", AnnotationVolcanoTaskSpec: GroupHead}},
			worker: podMeta{VolcanoName, map[string]string{LabelVolcanoQueue: "kuberay-test-queue"},
				map[string]string{AnnotationVolcanoGroupName: "ray-test-cluster-0-pg", AnnotationVolcanoTaskSpec: "worker"}},
			podGroup: "ray-test-cluster-0-pg", members: 3, resources: list("cpu", "3", "memory", "4Gi"),
		},
		{
			file: "ray-cluster.yunikorn-scheduler.yaml", scheduler: YuniKorn,
			head: podMeta{YuniKornName, map[string]string{LabelPodApplicationID: "test-yunikorn-0", LabelPodQueue: "root.test"},
				map[string]string{AnnotationTaskGroups: yunikornGroups, AnnotationTaskGroupName: GroupHead}},
			worker: podMeta{YuniKornName, map[string]string{LabelPodApplicationID: "test-yunikorn-0", LabelPodQueue: "root.test"},
				map[string]string{AnnotationTaskGroups: yunikornGroups, AnnotationTaskGroupName: "worker"}},
		},
		{
			file: "ray-cluster.kai-scheduler.yaml", scheduler: KAI,
			head:   podMeta{KAIName, map[string]string{LabelKAIQueue: "team-a"}, nil},
			worker: podMeta{KAIName, map[string]string{LabelKAIQueue: "team-a"}, nil},
		},
	} {
		t.Run(tt.file, func(t *testing.T) {
			rc := &rayv1.RayCluster{}
			sampleObject(t, tt.file, "RayCluster", rc)
			s := Decide(rc, tt.scheduler)
			if diff := cmp.Diff(tt.head, metaOf(s, rc, rc.Spec.HeadGroupSpec.Template, GroupHead)); diff != "" {
				t.Errorf("head pod (-KubeRay +kray):\n%s", diff)
			}
			for i := range rc.Spec.WorkerGroupSpecs {
				g := &rc.Spec.WorkerGroupSpecs[i]
				if diff := cmp.Diff(tt.worker, metaOf(s, rc, g.Template, g.GroupName)); diff != "" {
					t.Errorf("worker pod of %s (-KubeRay +kray):\n%s", g.GroupName, diff)
				}
			}
			if got := s.PodGroupName(rc); got != tt.podGroup {
				t.Fatalf("PodGroup %q, want %q", got, tt.podGroup)
			}
			if tt.podGroup == "" {
				return
			}
			members, resources := MinMember(rc), MinResources(rc)
			if tt.scheduler == Volcano {
				members, resources = VolcanoSize(rc)
			}
			if members != tt.members {
				t.Errorf("minMember %d, want %d", members, tt.members)
			}
			equalQuantities(t, resources, tt.resources)
		})
	}
}
