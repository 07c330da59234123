package raycluster

import (
	"context"
	"slices"
	"strings"
	"testing"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/constants"
)

// The cluster's image pull jobs follow the annotation and the images: created when asked for, a new one for
// a new image with the old one deleted, all deleted when the annotation goes; no pod is written.
func TestImagePullJobsFollowTheAnnotationAndTheImages(t *testing.T) {
	rc := cluster("c").group("g", 1).obj()
	e := newEnv(t, rc)
	e.converge(rc)
	jobWrites := func(writes []string, verb string) []string {
		var out []string
		for _, w := range writes {
			if strings.HasPrefix(w, verb+" ImagePullJob/") {
				out = append(out, w)
			}
			if strings.Contains(w, " Pod/") {
				t.Errorf("a pod was written: %s", w)
			}
		}
		return out
	}
	e.updateSpec(rc, func(c *rayv1.RayCluster) { c.Annotations = map[string]string{constants.AnnotationImagePrepull: "true"} })
	created := jobWrites(e.mustReconcile(rc), "create")
	if len(created) == 0 {
		t.Fatalf("no ImagePullJob created")
	}
	if writes := e.mustReconcile(rc); len(writes) != 0 {
		t.Fatalf("writes %v once the jobs exist", writes)
	}
	// The head and the group share an image at first, so one job serves both; the group's new image gets a
	// job of its own, and its next image replaces that one.
	e.updateSpec(rc, func(c *rayv1.RayCluster) {
		c.Spec.WorkerGroupSpecs[0].Template.Spec.Containers[0].Image = "rayproject/ray:2.99.0"
	})
	writes := e.mustReconcile(rc)
	if len(jobWrites(writes, "create")) != 1 || len(jobWrites(writes, "delete")) != 0 {
		t.Errorf("the group's image changed: writes %v, want its job created and the head's kept", writes)
	}
	e.updateSpec(rc, func(c *rayv1.RayCluster) {
		c.Spec.WorkerGroupSpecs[0].Template.Spec.Containers[0].Image = "rayproject/ray:2.100.0"
	})
	writes = e.mustReconcile(rc)
	if len(jobWrites(writes, "create")) != 1 || len(jobWrites(writes, "delete")) != 1 {
		t.Errorf("the group's image changed again: writes %v, want the new image's job created and the previous one deleted", writes)
	}
	e.updateSpec(rc, func(c *rayv1.RayCluster) { delete(c.Annotations, constants.AnnotationImagePrepull) })
	writes = e.mustReconcile(rc)
	if deleted := jobWrites(writes, "delete"); len(deleted) == 0 || len(jobWrites(writes, "create")) != 0 {
		t.Errorf("annotation removed: writes %v, want every job deleted", writes)
	}
	if got := reasons(e.takeEvents()); !slices.Contains(got, EventCreatedImagePullJob) || !slices.Contains(got, EventDeletedImagePullJob) {
		t.Errorf("events %v", got)
	}
}

// A reconcile reads a node's NodeImage once, however many held workers run on that node; the next reconcile
// reads it again.
func TestANodeImageIsReadOncePerReconcile(t *testing.T) {
	api := fakeAPI(&kruisev1alpha1.NodeImage{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}})
	reads := &nodeImageReads{Reader: api}
	r := &Reconciler{APIReader: reads}
	s := &state{}
	for _, node := range []string{"node-a", "node-a", "node-b", "node-b"} {
		if _, err := r.nodeImage(context.Background(), s, node); err != nil {
			t.Fatal(err)
		}
	}
	if ni, _ := r.nodeImage(context.Background(), s, "node-b"); ni != nil {
		t.Errorf("NodeImage of a node without one = %v, want nil", ni)
	}
	if reads.n != 2 {
		t.Errorf("%d NodeImage reads for 2 nodes in one reconcile, want 2", reads.n)
	}
	if _, err := r.nodeImage(context.Background(), &state{}, "node-a"); err != nil || reads.n != 3 {
		t.Errorf("a new reconcile: %d reads (err %v), want 3", reads.n, err)
	}
}

// nodeImageReads counts the NodeImage reads that reach its Reader.
type nodeImageReads struct {
	client.Reader
	n int
}

func (r *nodeImageReads) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*kruisev1alpha1.NodeImage); ok {
		r.n++
	}
	return r.Reader.Get(ctx, key, obj, opts...)
}
