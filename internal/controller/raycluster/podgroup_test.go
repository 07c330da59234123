package raycluster

import (
	"context"
	"slices"
	"strings"
	"testing"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	kruisev1beta1 "github.com/openkruise/kruise-api/apps/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	schedv1alpha1 "github.com/kray-project/kray/api/schedulerplugins/v1alpha1"
	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/batchscheduler"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/names"
)

// gangEnv is an env whose operator runs with --batch-scheduler=scheduler-plugins.
func gangEnv(t *testing.T, objs ...client.Object) *env {
	e := newEnv(t, objs...)
	e.r.BatchScheduler = batchscheduler.SchedulerPlugins
	return e
}

func gangCluster() *rayv1.RayCluster {
	return cluster("g").group("small", 2).with(func(rc *rayv1.RayCluster) {
		rc.Labels = map[string]string{batchscheduler.LabelGangScheduling: "true"}
	}).obj()
}

func (e *env) podGroup(name string) *schedv1alpha1.PodGroup {
	e.t.Helper()
	pg := &schedv1alpha1.PodGroup{}
	if err := e.api.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: name}, pg); err != nil {
		return nil
	}
	return pg
}

// A new gang-scheduled cluster gets its PodGroup with (or before) its workloads, their pods carry the
// scheduler and the PodGroup, and a converged cluster writes nothing more.
func TestGangClusterGetsItsPodGroupFirst(t *testing.T) {
	rc := gangCluster()
	e := gangEnv(t, rc)
	writes := e.mustReconcile(rc)
	pg := slices.Index(writes, "create PodGroup/g")
	head := slices.Index(writes, "create StatefulSet/"+names.HeadStatefulSet("g"))
	if pg < 0 || head < 0 || pg > head {
		t.Fatalf("writes %v: want the PodGroup created before the head StatefulSet", writes)
	}
	got := e.podGroup("g")
	if got.Spec.MinMember != 3 || !metav1.IsControlledBy(got, rc) || got.Labels[constants.LabelCluster] != "g" {
		t.Errorf("PodGroup %+v", got)
	}
	sts := e.get(&kruisev1beta1.StatefulSet{}, names.HeadStatefulSet("g")).(*kruisev1beta1.StatefulSet)
	cs := e.get(&kruisev1alpha1.CloneSet{}, names.WorkerCloneSet("g", "small")).(*kruisev1alpha1.CloneSet)
	for _, tmpl := range []struct {
		name   string
		sched  string
		labels map[string]string
		annot  string
	}{
		{"head", sts.Spec.Template.Spec.SchedulerName, sts.Spec.Template.Labels, sts.Annotations[constants.AnnotationBatchScheduler]},
		{"worker", cs.Spec.Template.Spec.SchedulerName, cs.Spec.Template.Labels, cs.Annotations[constants.AnnotationBatchScheduler]},
	} {
		if tmpl.sched != batchscheduler.SchedulerPluginsName || tmpl.labels[batchscheduler.LabelPodGroup] != "g" || tmpl.annot != "scheduler-plugins;gang" {
			t.Errorf("%s template: scheduler %q, labels %v, workload annotation %q", tmpl.name, tmpl.sched, tmpl.labels, tmpl.annot)
		}
	}
	// A gang must never be taken apart by a CloneSet scale-down limit Kruise would apply pod by pod.
	if cs.Spec.ScaleStrategy.MaxUnavailable != nil {
		t.Errorf("a ganged CloneSet has scaleStrategy.maxUnavailable %v", cs.Spec.ScaleStrategy.MaxUnavailable)
	}
	e.converge(rc)
}

// The PodGroup follows the pods the cluster wants: a scale change updates it (KubeRay creates it once), a
// suspension deletes it and the resume creates it again.
func TestPodGroupFollowsTheCluster(t *testing.T) {
	rc := gangCluster()
	e := gangEnv(t, rc)
	e.converge(rc)
	e.updateSpec(rc, func(rc *rayv1.RayCluster) { rc.Spec.WorkerGroupSpecs[0].Replicas = ptr.To[int32](4) })
	if writes := e.mustReconcile(rc); !slices.Contains(writes, "patch PodGroup/g") {
		t.Fatalf("scale-up writes %v, want the PodGroup patched", writes)
	}
	if got := e.podGroup("g").Spec.MinMember; got != 5 {
		t.Errorf("minMember after the scale-up = %d, want 5", got)
	}
	e.converge(rc)
	e.updateSpec(rc, func(rc *rayv1.RayCluster) { rc.Spec.Suspend = ptr.To(true) })
	e.converge(rc)
	if pg := e.podGroup("g"); pg != nil {
		t.Fatalf("a suspended cluster keeps its PodGroup %+v", pg)
	}
	e.updateSpec(rc, func(rc *rayv1.RayCluster) { rc.Spec.Suspend = ptr.To(false) })
	e.converge(rc)
	if pg := e.podGroup("g"); pg == nil || pg.Spec.MinMember != 5 {
		t.Fatalf("resumed: PodGroup %+v, want it back with 5 pods", pg)
	}
}

// A PodGroup of the cluster's name that the cluster does not control is neither used nor changed, and the
// cluster's pods wait for it: no workload is created, and a Warning says why.
func TestForeignPodGroupIsNeverTaken(t *testing.T) {
	rc := gangCluster()
	foreign := &schedv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g"}, Spec: schedv1alpha1.PodGroupSpec{MinMember: 9}}
	e := gangEnv(t, rc, foreign)
	writes, _, err := e.reconcile(rc)
	if err == nil || !strings.Contains(err.Error(), "PodGroup g exists and is not controlled by this RayCluster") {
		t.Errorf("err = %v", err)
	}
	for _, w := range writes {
		if strings.HasSuffix(w, "(dry run)") {
			continue // the preflight's check of the templates
		}
		if strings.Contains(w, "StatefulSet/") || strings.Contains(w, "CloneSet/") || strings.Contains(w, "PodGroup") {
			t.Errorf("wrote %s beside a foreign PodGroup", w)
		}
	}
	if got := e.podGroup("g"); got.Spec.MinMember != 9 || len(got.OwnerReferences) != 0 {
		t.Errorf("the foreign PodGroup changed: %+v", got)
	}
	if ev := strings.Join(e.takeEvents(), "\n"); !strings.Contains(ev, "Warning "+EventFailedToWritePodGroup+" PodGroup ns/g exists and is not controlled by this RayCluster") {
		t.Errorf("events:\n%s", ev)
	}
}

// Scheduling is fixed when the workloads are created: a cluster made before the operator had a batch
// scheduler stays with the default scheduler and gets no PodGroup, and a gang label added later changes
// nothing either, so that no cluster has pods of two kinds.
func TestSchedulingIsFixedAtCreation(t *testing.T) {
	rc := gangCluster()
	plain := newEnv(t, rc)
	plain.converge(rc)
	e := &env{t: t, r: plain.r, api: plain.api, writer: plain.writer, events: plain.events, clock: plain.clock}
	e.r.BatchScheduler = batchscheduler.SchedulerPlugins
	if writes := e.mustReconcile(rc); len(writes) != 0 {
		t.Errorf("an existing cluster under a new --batch-scheduler: writes %v, want none", writes)
	}
	if pg := e.podGroup("g"); pg != nil {
		t.Errorf("PodGroup %+v for a cluster created before the flag", pg)
	}
	cs := e.get(&kruisev1alpha1.CloneSet{}, names.WorkerCloneSet("g", "small")).(*kruisev1alpha1.CloneSet)
	if cs.Spec.Template.Spec.SchedulerName != "" {
		t.Errorf("worker template scheduler %q, want the default", cs.Spec.Template.Spec.SchedulerName)
	}
	// A cluster without the gang label under the scheduler: its pods go to it, as single pods.
	single := cluster("s").group("small", 1).obj()
	e2 := gangEnv(t, single)
	e2.converge(single)
	if pg := e2.podGroup("s"); pg != nil {
		t.Errorf("PodGroup for a cluster without the gang label: %+v", pg)
	}
	sts := e2.get(&kruisev1beta1.StatefulSet{}, names.HeadStatefulSet("s")).(*kruisev1beta1.StatefulSet)
	if sts.Spec.Template.Spec.SchedulerName != batchscheduler.SchedulerPluginsName || sts.Spec.Template.Labels[batchscheduler.LabelPodGroup] != "" {
		t.Errorf("head template %q %v", sts.Spec.Template.Spec.SchedulerName, sts.Spec.Template.Labels)
	}
}

// The PodGroup KubeRay made for a cluster it ran (an owner reference with the cluster's UID, not a
// controller's) is adopted: kray becomes its controller, labels it for its cache, sizes it, and the
// cluster's workloads are created.
func TestKubeRaysPodGroupIsAdopted(t *testing.T) {
	rc := gangCluster()
	rc.UID = "uid-g"
	kuberays := &schedv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "ray.io/v1", Kind: "RayCluster", Name: "g", UID: rc.UID}}},
		Spec: schedv1alpha1.PodGroupSpec{MinMember: 1}}
	e := gangEnv(t, rc, kuberays)
	writes, _, err := e.reconcile(rc)
	if err != nil {
		t.Fatalf("err = %v (writes %v)", err, writes)
	}
	got := e.podGroup("g")
	if !metav1.IsControlledBy(got, rc) || got.Labels[constants.LabelCluster] != "g" || got.Spec.MinMember != 3 {
		t.Errorf("PodGroup %+v: want it controlled by the cluster, labelled, 3 pods", got)
	}
	if !slices.Contains(writes, "create StatefulSet/"+names.HeadStatefulSet("g")) {
		t.Errorf("writes %v: want the workloads created", writes)
	}
	e.converge(rc)
}
