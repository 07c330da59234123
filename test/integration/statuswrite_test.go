package integration

import (
	"context"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/internal/controller/shared"
)

// The real API server refuses a status write computed from an older resourceVersion and keeps the status
// stored first. Every "the name is stored before anything is created under it" guarantee of the RayJob and
// RayService controllers rests on this: of two operator instances that read the same object, only one
// stores its names.
func TestStatusWriteFromAnOldResourceVersionIsRefused(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	w := shared.ClientWriter(k8s, cfg, httpClient)
	job := &rayv1.RayJob{ObjectMeta: metav1.ObjectMeta{Name: "names", Namespace: ns},
		Spec: rayv1.RayJobSpec{Entrypoint: "python train.py", RayClusterSpec: &newCluster(ns, "unused").rc.Spec}}
	if err := k8s.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	read := &rayv1.RayJob{}
	if err := k8s.Get(ctx, key(job), read); err != nil {
		t.Fatal(err)
	}
	first, second := read.DeepCopy(), read.DeepCopy()
	first.Status.RayClusterName, first.Status.JobId = "names-first", "names-first"
	second.Status.RayClusterName, second.Status.JobId = "names-second", "names-second"
	if err := w.UpdateStatus(ctx, first); err != nil {
		t.Fatalf("the first instance's write: %v", err)
	}
	if err := w.UpdateStatus(ctx, second); !apierrors.IsConflict(err) {
		t.Fatalf("the second instance's write from the same resourceVersion: %v, want a Conflict", err)
	}
	stored := &rayv1.RayJob{}
	if err := k8s.Get(ctx, key(job), stored); err != nil {
		t.Fatal(err)
	}
	if stored.Status.RayClusterName != "names-first" || stored.ResourceVersion == read.ResourceVersion {
		t.Fatalf("stored %q at resourceVersion %s, want the first write's names at a new version", stored.Status.RayClusterName, stored.ResourceVersion)
	}
	second.ResourceVersion = stored.ResourceVersion
	if err := w.UpdateStatus(ctx, second); err != nil {
		t.Fatalf("a write from the stored resourceVersion (positive control): %v", err)
	}
}
