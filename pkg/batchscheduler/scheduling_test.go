package batchscheduler

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/constants"
)

func container(requests, limits corev1.ResourceList) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "ray",
		Resources: corev1.ResourceRequirements{Requests: requests, Limits: limits}}}}}
}

func list(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

// KubeRay's own test cluster for its scheduler-plugins PodGroup (scheduler_plugins_test.go).
func kubeRayTestCluster(hosts int32) *rayv1.RayCluster {
	return &rayv1.RayCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "c", Labels: map[string]string{LabelGangScheduling: "true"}},
		Spec: rayv1.RayClusterSpec{
			HeadGroupSpec: rayv1.HeadGroupSpec{Template: container(list("cpu", "256m", "memory", "256Mi"), nil)},
			WorkerGroupSpecs: []rayv1.WorkerGroupSpec{{GroupName: "w", Replicas: ptr.To[int32](2), MinReplicas: ptr.To[int32](1), MaxReplicas: ptr.To[int32](4),
				NumOfHosts: hosts, Template: container(list("cpu", "256m", "memory", "256Mi"), list("nvidia.com/gpu", "1"))}},
		},
	}
}

func equalQuantities(t *testing.T, got, want corev1.ResourceList) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("resources %v, want %v", got, want)
	}
	for name, q := range want {
		if g, ok := got[name]; !ok || g.Cmp(q) != 0 {
			t.Errorf("%s = %v, want %v (all: %v)", name, got[name], q.String(), got)
		}
	}
}

func TestGangSizeAsKubeRayCountsIt(t *testing.T) {
	for _, tt := range []struct {
		name      string
		rc        *rayv1.RayCluster
		member    int32
		resources corev1.ResourceList
	}{
		{"KubeRay's test cluster", kubeRayTestCluster(1), 3, list("cpu", "768m", "memory", "768Mi", "nvidia.com/gpu", "2")},
		{"two hosts per replica", kubeRayTestCluster(2), 5, list("cpu", "1280m", "memory", "1280Mi", "nvidia.com/gpu", "4")},
		{"replicas above max: the pods kray makes", func() *rayv1.RayCluster {
			rc := kubeRayTestCluster(1)
			rc.Spec.WorkerGroupSpecs[0].Replicas = ptr.To[int32](5)
			return rc
		}(), 5, list("cpu", "1280m", "memory", "1280Mi", "nvidia.com/gpu", "4")},
		{"a suspended group counts nothing", func() *rayv1.RayCluster {
			rc := kubeRayTestCluster(1)
			rc.Spec.WorkerGroupSpecs[0].Suspend = ptr.To(true)
			return rc
		}(), 1, list("cpu", "256m", "memory", "256Mi")},
		{"no replicas: min", func() *rayv1.RayCluster {
			rc := kubeRayTestCluster(1)
			rc.Spec.WorkerGroupSpecs[0].Replicas = nil
			return rc
		}(), 2, list("cpu", "512m", "memory", "512Mi", "nvidia.com/gpu", "1")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := MinMember(tt.rc); got != tt.member {
				t.Errorf("MinMember = %d, want %d", got, tt.member)
			}
			equalQuantities(t, MinResources(tt.rc), tt.resources)
		})
	}
}

func TestPodResourcesTakeALimitWithoutARequest(t *testing.T) {
	pod := corev1.PodSpec{Containers: []corev1.Container{
		{Resources: corev1.ResourceRequirements{Requests: list("cpu", "1"), Limits: list("cpu", "2", "memory", "1Gi")}},
		{Resources: corev1.ResourceRequirements{Limits: list("cpu", "500m")}},
	}, InitContainers: []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: list("cpu", "8")}}}}
	equalQuantities(t, PodResources(&pod), list("cpu", "1500m", "memory", "1Gi"))
}

func TestVolcanoSizesAnAutoscalingClusterByItsMinimum(t *testing.T) {
	rc := kubeRayTestCluster(2)
	rc.Spec.EnableInTreeAutoscaling = ptr.To(true)
	members, resources := VolcanoSize(rc)
	if members != 3 {
		t.Errorf("members = %d, want the head and 1 minReplica times 2 hosts", members)
	}
	equalQuantities(t, resources, list("cpu", "768m", "memory", "768Mi", "nvidia.com/gpu", "2"))

	rc.Spec.EnableInTreeAutoscaling = nil
	if members, _ := VolcanoSize(rc); members != 5 {
		t.Errorf("without autoscaling members = %d, want MinMember's 5", members)
	}
}

func TestDecideAndItsAnnotation(t *testing.T) {
	labelled := &rayv1.RayCluster{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{LabelGangScheduling: "false"}}}
	plain := &rayv1.RayCluster{}
	for _, tt := range []struct {
		name     string
		rc       *rayv1.RayCluster
		operator string
		want     Scheduling
		text     string
	}{
		{"no batch scheduler", labelled, "", Scheduling{}, ""},
		{"the label's presence asks for a gang, whatever its value", labelled, SchedulerPlugins, Scheduling{SchedulerPlugins, true}, "scheduler-plugins;gang"},
		{"no label: the scheduler only", plain, SchedulerPlugins, Scheduling{SchedulerPlugins, false}, "scheduler-plugins"},
		{"YuniKorn: a gang by the label", labelled, YuniKorn, Scheduling{YuniKorn, true}, "yunikorn;gang"},
		{"YuniKorn: no label, no gang", plain, YuniKorn, Scheduling{YuniKorn, false}, "yunikorn"},
		{"Volcano: every cluster is a gang", plain, Volcano, Scheduling{Volcano, true}, "volcano;gang"},
		{"KAI groups pods itself", labelled, KAI, Scheduling{KAI, false}, "kai-scheduler"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := Decide(tt.rc, tt.operator)
			if got != tt.want || got.String() != tt.text || Parse(got.String()) != got {
				t.Errorf("Decide = %+v (%q, parsed back %+v), want %+v (%q)", got, got.String(), Parse(got.String()), tt.want, tt.text)
			}
		})
	}
	if got := Parse("coscheduler;gang"); got != (Scheduling{}) {
		t.Errorf("Parse of an unknown scheduler = %+v, want the default scheduler", got)
	}
}

func TestSubmitterIsNeverAMemberOfACoschedulingGang(t *testing.T) {
	for _, tt := range []struct{ in, want Scheduling }{
		{Scheduling{SchedulerPlugins, true}, Scheduling{SchedulerPlugins, false}},
		{Scheduling{Volcano, true}, Scheduling{Volcano, true}},
		{Scheduling{YuniKorn, true}, Scheduling{YuniKorn, true}},
	} {
		if got := tt.in.Submitter(); got != tt.want {
			t.Errorf("%+v.Submitter() = %+v, want %+v", tt.in, got, tt.want)
		}
	}
}

func TestPodGroupName(t *testing.T) {
	rc := &rayv1.RayCluster{ObjectMeta: metav1.ObjectMeta{Name: "c"}}
	ofJob := &rayv1.RayCluster{ObjectMeta: metav1.ObjectMeta{Name: "job-x7k2p", Labels: map[string]string{
		constants.LabelOriginatedFromCRD: constants.OriginatedFromRayJob, constants.LabelOriginatedFromCRName: "job"}}}
	for _, tt := range []struct {
		s    Scheduling
		rc   *rayv1.RayCluster
		want string
	}{
		{Scheduling{SchedulerPlugins, true}, rc, "c"},
		{Scheduling{SchedulerPlugins, false}, rc, ""},
		{Scheduling{Volcano, true}, rc, "ray-c-pg"},
		{Scheduling{Volcano, true}, ofJob, "ray-job-pg"},
		{Scheduling{YuniKorn, true}, rc, ""},
		{Scheduling{KAI, false}, rc, ""},
		{Scheduling{}, rc, ""},
	} {
		if got := tt.s.PodGroupName(tt.rc); got != tt.want {
			t.Errorf("%+v.PodGroupName(%s) = %q, want %q", tt.s, tt.rc.Name, got, tt.want)
		}
	}
}

func TestTheDefaultSchedulerChangesNoTemplate(t *testing.T) {
	tmpl := corev1.PodTemplateSpec{Spec: corev1.PodSpec{SchedulerName: "custom"}}
	Scheduling{}.ApplyPod(&tmpl, kubeRayTestCluster(1), GroupHead)
	if tmpl.Spec.SchedulerName != "custom" || tmpl.Labels != nil || tmpl.Annotations != nil {
		t.Errorf("template changed: %+v", tmpl)
	}
}
