package raycluster

import (
	"context"
	"slices"
	"strings"
	"testing"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	kruisev1beta1 "github.com/openkruise/kruise-api/apps/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rayv1 "github.com/kray-project/kray/api/v1"
	volcanov1beta1 "github.com/kray-project/kray/api/volcano/v1beta1"
	"github.com/kray-project/kray/pkg/batchscheduler"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/names"
)

func (e *env) volcanoPodGroup(name string) *volcanov1beta1.PodGroup {
	e.t.Helper()
	pg := &volcanov1beta1.PodGroup{}
	if err := e.api.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: name}, pg); err != nil {
		return nil
	}
	return pg
}

// Under Volcano every cluster, labelled or not, is a gang: its PodGroup ray-<name>-pg comes first, with the
// queue, priority and network topology of the cluster's labels, and its pods name it and their group.
func TestVolcanoClusterGetsItsPodGroupFirst(t *testing.T) {
	rc := cluster("v").group("small", 2).with(func(rc *rayv1.RayCluster) {
		rc.Labels = map[string]string{batchscheduler.LabelVolcanoQueue: "q", batchscheduler.LabelPriorityClassName: "high",
			batchscheduler.LabelNetworkTopologyMode: "hard", batchscheduler.LabelNetworkTopologyHighestTier: "2"}
	}).obj()
	e := newEnv(t, rc)
	e.r.BatchScheduler = batchscheduler.Volcano
	writes := e.mustReconcile(rc)
	pg := slices.Index(writes, "create PodGroup/ray-v-pg")
	head := slices.Index(writes, "create StatefulSet/"+names.HeadStatefulSet("v"))
	if pg < 0 || head < 0 || pg > head {
		t.Fatalf("writes %v: want the PodGroup created before the head StatefulSet", writes)
	}
	got := e.volcanoPodGroup("ray-v-pg")
	if got.Spec.MinMember != 3 || got.Spec.Queue != "q" || got.Spec.PriorityClassName != "high" || !metav1.IsControlledBy(got, rc) {
		t.Errorf("PodGroup %+v", got.Spec)
	}
	if nt := got.Spec.NetworkTopology; nt == nil || nt.Mode != "hard" || nt.HighestTierAllowed == nil || *nt.HighestTierAllowed != 2 {
		t.Errorf("network topology %+v", nt)
	}
	sts := e.get(&kruisev1beta1.StatefulSet{}, names.HeadStatefulSet("v")).(*kruisev1beta1.StatefulSet)
	cs := e.get(&kruisev1alpha1.CloneSet{}, names.WorkerCloneSet("v", "small")).(*kruisev1alpha1.CloneSet)
	for _, tmpl := range []struct {
		group  string
		sched  string
		labels map[string]string
		annot  map[string]string
	}{
		{constants.HeadGroupName, sts.Spec.Template.Spec.SchedulerName, sts.Spec.Template.Labels, sts.Spec.Template.Annotations},
		{"small", cs.Spec.Template.Spec.SchedulerName, cs.Spec.Template.Labels, cs.Spec.Template.Annotations},
	} {
		if tmpl.sched != batchscheduler.VolcanoName || tmpl.labels[batchscheduler.LabelVolcanoQueue] != "q" ||
			tmpl.labels[batchscheduler.LabelPriorityClassName] != "high" ||
			tmpl.annot[batchscheduler.AnnotationVolcanoGroupName] != "ray-v-pg" || tmpl.annot[batchscheduler.AnnotationVolcanoTaskSpec] != tmpl.group {
			t.Errorf("%s template: scheduler %q labels %v annotations %v", tmpl.group, tmpl.sched, tmpl.labels, tmpl.annot)
		}
	}
	e.converge(rc)
	if writes := e.mustReconcile(rc); len(writes) != 0 {
		t.Errorf("a converged cluster wrote %v", writes)
	}

	// Suspended, the cluster releases its place in the queue; resumed, it is back.
	e.updateSpec(rc, func(rc *rayv1.RayCluster) { rc.Spec.WorkerGroupSpecs[0].Replicas = ptr.To[int32](3) })
	if writes := e.mustReconcile(rc); !slices.Contains(writes, "patch PodGroup/ray-v-pg") {
		t.Fatalf("scale-up writes %v, want the PodGroup patched", writes)
	}
	if got := e.volcanoPodGroup("ray-v-pg"); got.Spec.MinMember != 4 || got.Spec.Queue != "q" {
		t.Errorf("after the scale-up: %+v", got.Spec)
	}
	e.converge(rc)
	e.updateSpec(rc, func(rc *rayv1.RayCluster) { rc.Spec.Suspend = ptr.To(true) })
	e.converge(rc)
	if pg := e.volcanoPodGroup("ray-v-pg"); pg != nil {
		t.Fatalf("a suspended cluster keeps its PodGroup %+v", pg.Spec)
	}
}

// The cluster of a RayJob is grouped under the RayJob's name, as KubeRay names its Volcano PodGroup.
func TestVolcanoPodGroupOfARayJobsCluster(t *testing.T) {
	rc := cluster("job-abcde").group("small", 1).with(func(rc *rayv1.RayCluster) {
		rc.Labels = map[string]string{constants.LabelOriginatedFromCRD: constants.OriginatedFromRayJob, constants.LabelOriginatedFromCRName: "job"}
		rc.Annotations = map[string]string{constants.AnnotationSubmitterResources: `{"cpu":"500m","memory":"200Mi"}`}
	}).obj()
	e := newEnv(t, rc)
	e.r.BatchScheduler = batchscheduler.Volcano
	e.converge(rc)
	pg := e.volcanoPodGroup("ray-job-pg")
	if pg == nil || pg.Spec.MinMember != 2 {
		t.Fatalf("PodGroup ray-job-pg %+v", pg)
	}
	// The submitter is reserved for beside the cluster's pods, not counted among them.
	_, own := batchscheduler.VolcanoSize(rc)
	want := batchscheduler.Sum(own, corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("200Mi")})
	for name, q := range want {
		if got := pg.Spec.MinResources[name]; got.Cmp(q) != 0 {
			t.Errorf("minResources %s = %s, want %s", name, got.String(), q.String())
		}
	}
}

// What a scheduler reads of a pod is fixed with its workload: under RollingUpdate (which updates running pods
// for a template change) a new queue label on the cluster rewrites no workload, and a worker group added
// afterwards gets the new queue.
func TestSchedulerMetadataIsFixedWithItsWorkload(t *testing.T) {
	rc := cluster("v").group("small", 2).with(func(rc *rayv1.RayCluster) {
		rc.Labels = map[string]string{batchscheduler.LabelVolcanoQueue: "q1"}
		rc.Spec.UpgradeStrategy = &rayv1.RayClusterUpgradeStrategy{Type: ptr.To(rayv1.RayClusterRollingUpdate)}
	}).obj()
	e := newEnv(t, rc)
	e.r.BatchScheduler = batchscheduler.Volcano
	e.converge(rc)
	e.updateSpec(rc, func(rc *rayv1.RayCluster) { rc.Labels[batchscheduler.LabelVolcanoQueue] = "q2" })
	for _, w := range e.mustReconcile(rc) {
		if strings.Contains(w, "StatefulSet/") || strings.Contains(w, "CloneSet/") {
			t.Errorf("a queue label change wrote %s", w)
		}
	}
	e.updateSpec(rc, func(rc *rayv1.RayCluster) {
		rc.Spec.WorkerGroupSpecs = append(rc.Spec.WorkerGroupSpecs, *rc.Spec.WorkerGroupSpecs[0].DeepCopy())
		rc.Spec.WorkerGroupSpecs[1].GroupName = "late"
	})
	e.converge(rc)
	for group, want := range map[string]string{"small": "q1", "late": "q2"} {
		cs := e.get(&kruisev1alpha1.CloneSet{}, names.WorkerCloneSet("v", group)).(*kruisev1alpha1.CloneSet)
		if got := cs.Spec.Template.Labels[batchscheduler.LabelVolcanoQueue]; got != want {
			t.Errorf("group %s: queue %q, want %q", group, got, want)
		}
	}
	sts := e.get(&kruisev1beta1.StatefulSet{}, names.HeadStatefulSet("v")).(*kruisev1beta1.StatefulSet)
	if got := sts.Spec.Template.Labels[batchscheduler.LabelVolcanoQueue]; got != "q1" {
		t.Errorf("head: queue %q, want q1", got)
	}
}
