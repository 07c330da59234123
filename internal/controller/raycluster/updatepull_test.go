package raycluster

import (
	"context"
	"errors"
	"slices"
	"testing"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/internal/controller/shared"
	"github.com/kray-project/kray/pkg/builder"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/nodeimage"
)

const pulledImage = "rayproject/ray:2.99.0"

// pullFixture is a converged RollingUpdate cluster of one group of two workers, one on node-a and one on
// node-b, each node with a NodeImage (a kruise-daemon runs there) unless noNodeImages.
func pullFixture(t *testing.T, noNodeImages bool, annotations map[string]string) (*env, *rayv1.RayCluster) {
	t.Helper()
	rc := cluster("c").group("g", 2).with(func(rc *rayv1.RayCluster) {
		rc.Spec.UpgradeStrategy = &rayv1.RayClusterUpgradeStrategy{Type: ptr.To(rayv1.RayClusterRollingUpdate)}
		rc.Annotations = annotations
	}).obj()
	e := newEnv(t, rc)
	e.converge(rc)
	ctx := context.Background()
	for i, name := range e.workerPods(rc) {
		p := e.get(&corev1.Pod{}, name).(*corev1.Pod)
		p.Spec.NodeName = []string{"node-a", "node-b"}[i]
		if err := e.api.Update(ctx, p); err != nil {
			t.Fatal(err)
		}
		if !noNodeImages {
			if err := e.api.Create(ctx, &kruisev1alpha1.NodeImage{ObjectMeta: metav1.ObjectMeta{Name: p.Spec.NodeName}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	e.takeEvents()
	return e, rc
}

// workerPods are the names of rc's worker pods, sorted.
func (e *env) workerPods(rc *rayv1.RayCluster) []string {
	return slices.DeleteFunc(e.pods(rc), func(name string) bool { return name == "c-head-0" })
}

// reportPull sets what node's kruise-daemon reports of pulledImage: the tag queued at version 1 by the
// cluster's update job, and phase (none when empty).
func (e *env) reportPull(node string, phase kruisev1alpha1.ImagePullPhase) {
	e.t.Helper()
	ni := &kruisev1alpha1.NodeImage{}
	if err := e.api.Get(context.Background(), client.ObjectKey{Name: node}, ni); err != nil {
		e.t.Fatal(err)
	}
	ni.Spec.Images = map[string]kruisev1alpha1.ImageSpec{"rayproject/ray": {Tags: []kruisev1alpha1.ImageTagSpec{
		{Tag: "2.99.0", Version: 1, CreatedAt: &metav1.Time{Time: e.clock.Now()}},
	}}}
	ni.Status.ImageStatuses = nil
	if phase != "" {
		ni.Status.ImageStatuses = map[string]kruisev1alpha1.ImageStatus{"rayproject/ray": {Tags: []kruisev1alpha1.ImageTagStatus{
			{Tag: "2.99.0", Version: 1, Phase: phase},
		}}}
	}
	if err := e.api.Update(context.Background(), ni); err != nil {
		e.t.Fatal(err)
	}
}

// pullJobs are the cluster's ImagePullJobs.
func (e *env) pullJobs(rc *rayv1.RayCluster) []kruisev1alpha1.ImagePullJob {
	e.t.Helper()
	list := &kruisev1alpha1.ImagePullJobList{}
	if err := e.api.List(context.Background(), list, client.InNamespace(rc.Namespace)); err != nil {
		e.t.Fatal(err)
	}
	return list.Items
}

// A RollingUpdate that changes a group's image pauses the group, its template already changed, while the
// image is pulled onto the nodes of its pods by a job of the update's own; it releases the group once every
// such node has it, and the job goes when no pod runs the old image any more.
func TestARollingImageChangeWaitsForTheImageOnItsNodes(t *testing.T) {
	e, rc := pullFixture(t, false, nil)
	if jobs := e.pullJobs(rc); len(jobs) != 0 {
		t.Fatalf("ImagePullJobs without an update: %d", len(jobs))
	}
	e.updateSpec(rc, func(c *rayv1.RayCluster) { c.Spec.WorkerGroupSpecs[0].Template.Spec.Containers[0].Image = pulledImage })
	_, res, err := e.reconcile(rc)
	if err != nil {
		t.Fatal(err)
	}
	cs := e.cloneSet(rc, "g")
	if !cs.Spec.UpdateStrategy.Paused || cs.Spec.Template.Spec.Containers[0].Image != pulledImage {
		t.Fatalf("the image change: paused %v, template image %s; want the new template, paused", cs.Spec.UpdateStrategy.Paused, cs.Spec.Template.Spec.Containers[0].Image)
	}
	if res.RequeueAfter == 0 || res.RequeueAfter > imagePoll {
		t.Errorf("requeue after %v while the image is pulled, want at most %v", res.RequeueAfter, imagePoll)
	}
	jobs := e.pullJobs(rc)
	if len(jobs) != 1 || jobs[0].Spec.Image != pulledImage || jobs[0].Spec.PodSelector == nil || jobs[0].Spec.PodSelector.MatchLabels[constants.LabelGroup] != "g" {
		t.Fatalf("ImagePullJobs %+v, want one for the group's pods and the new image", jobs)
	}
	if got := reasons(e.takeEvents()); !slices.Contains(got, EventAwaitingImage) || !slices.Contains(got, EventCreatedImagePullJob) {
		t.Errorf("events %v, want %s and %s", got, EventCreatedImagePullJob, EventAwaitingImage)
	}

	e.reportPull("node-a", kruisev1alpha1.ImagePhaseSucceeded)
	e.reportPull("node-b", kruisev1alpha1.ImagePhasePulling)
	if writes := e.mustReconcile(rc); len(writes) != 0 || !e.cloneSet(rc, "g").Spec.UpdateStrategy.Paused {
		t.Fatalf("node-b still pulling: writes %v, paused %v; want none, paused", writes, e.cloneSet(rc, "g").Spec.UpdateStrategy.Paused)
	}
	if got := reasons(e.takeEvents()); slices.Contains(got, EventAwaitingImage) {
		t.Errorf("events %v: the wait was announced again", got)
	}
	e.reportPull("node-b", kruisev1alpha1.ImagePhaseFailed)
	e.mustReconcile(rc)
	if e.cloneSet(rc, "g").Spec.UpdateStrategy.Paused {
		t.Fatal("every node pulled the image or failed to: the group is still paused")
	}

	// Kruise updates the pods; the job goes with the last old one.
	for _, name := range e.workerPods(rc) {
		p := e.get(&corev1.Pod{}, name).(*corev1.Pod)
		p.Spec.Containers[0].Image = pulledImage
		if err := e.api.Update(context.Background(), p); err != nil {
			t.Fatal(err)
		}
	}
	e.mustReconcile(rc)
	if jobs := e.pullJobs(rc); len(jobs) != 0 {
		t.Errorf("the update is done: %d ImagePullJobs left", len(jobs))
	}
}

// The wait ends, or never begins, when nothing will bring the image: nodes without a NodeImage, a kruise-daemon
// that never answers, the deadline passed, kray.io/image-prepull "false", or a refused job.
func TestARollingImageChangeDoesNotWaitForPullsThatWillNotCome(t *testing.T) {
	tests := []struct {
		name         string
		noNodeImages bool
		annotations  map[string]string
		refuseJobs   bool
		// before runs after the first reconcile of the change, which is done again after it.
		before func(e *env, rc *rayv1.RayCluster)
		// wantJob is whether an ImagePullJob of the update's own is made.
		wantJob bool
	}{
		{name: "no NodeImage: no kruise-daemon pulls there", noNodeImages: true, wantJob: true},
		{name: "queued, never answered", wantJob: true, before: func(e *env, rc *rayv1.RayCluster) {
			e.reportPull("node-a", "")
			e.reportPull("node-b", kruisev1alpha1.ImagePhaseSucceeded)
			e.clock.SetTime(e.clock.Now().Add(nodeimage.Unanswered))
		}},
		{name: "the deadline passed", wantJob: true, before: func(e *env, rc *rayv1.RayCluster) {
			e.reportPull("node-a", kruisev1alpha1.ImagePhasePulling)
			e.reportPull("node-b", kruisev1alpha1.ImagePhasePulling)
			for _, job := range e.pullJobs(rc) { // as an API server records it (the fake does not)
				job.CreationTimestamp = metav1.NewTime(e.clock.Now())
				if err := e.api.Update(context.Background(), &job); err != nil {
					e.t.Fatal(err)
				}
			}
			e.clock.SetTime(e.clock.Now().Add(builder.UpdatePullDeadline))
		}},
		{name: "kray.io/image-prepull false", annotations: map[string]string{constants.AnnotationImagePrepull: "false"}},
		{name: "the job refused", refuseJobs: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, rc := pullFixture(t, tc.noNodeImages, tc.annotations)
			if tc.refuseJobs {
				e.r.Writer = refusingPullJobs{e.r.Writer}
			}
			e.updateSpec(rc, func(c *rayv1.RayCluster) { c.Spec.WorkerGroupSpecs[0].Template.Spec.Containers[0].Image = pulledImage })
			if _, _, err := e.reconcile(rc); err != nil {
				t.Errorf("Reconcile: %v; an update's pull is not asked for, so its refusal fails nothing", err)
			}
			if got := reasons(e.takeEvents()); tc.refuseJobs && !slices.Contains(got, EventFailedToWriteImagePullJob) {
				t.Errorf("events %v, want the refusal's %s", got, EventFailedToWriteImagePullJob)
			}
			if tc.before != nil {
				if !e.cloneSet(rc, "g").Spec.UpdateStrategy.Paused {
					t.Fatal("the group was not paused for the pull to begin with")
				}
				tc.before(e, rc)
				e.reconcile(rc)
			}
			cs := e.cloneSet(rc, "g")
			if cs.Spec.UpdateStrategy.Paused || cs.Spec.Template.Spec.Containers[0].Image != pulledImage {
				t.Errorf("paused %v, template image %s; want the new template, not paused", cs.Spec.UpdateStrategy.Paused, cs.Spec.Template.Spec.Containers[0].Image)
			}
			if got := len(e.pullJobs(rc)) == 1; got != tc.wantJob {
				t.Errorf("an ImagePullJob made: %v, want %v", got, tc.wantJob)
			}
		})
	}
}

// refusingPullJobs is a writer whose ImagePullJob creates the API server refuses.
type refusingPullJobs struct{ shared.Writer }

func (w refusingPullJobs) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if _, ok := obj.(*kruisev1alpha1.ImagePullJob); ok {
		return errors.New("admission webhook denied the request")
	}
	return w.Writer.Create(ctx, obj, opts...)
}
