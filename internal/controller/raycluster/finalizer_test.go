package raycluster

import (
	"context"
	"slices"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/constants"
)

// A Redis fault tolerant cluster gets its finalizer before anything else; when it is deleted, its workloads go,
// then, with the head pod gone, the cleanup Job runs, and the finalizer is removed once the Job completed.
func TestRedisCleanupFinalizer(t *testing.T) {
	rc := cluster("c").group("g", 1).with(func(rc *rayv1.RayCluster) {
		rc.Spec.GcsFaultToleranceOptions = &rayv1.GcsFaultToleranceOptions{RedisAddress: "redis:6379"}
	}).obj()
	e := newEnv(t, rc)
	ctx := context.Background()
	if writes := e.mustReconcile(rc); len(writes) != 1 || writes[0] != "patch RayCluster/c" {
		t.Fatalf("first reconcile wrote %v, want only the finalizer", writes)
	}
	e.converge(rc)
	if err := e.api.Delete(ctx, e.get(&rayv1.RayCluster{}, "c")); err != nil {
		t.Fatal(err)
	}
	writes := e.mustReconcile(rc)
	if !containsAll(writes, "delete StatefulSet/c-head", "delete CloneSet/c-g-worker") || slices.Contains(writes, "create Job/c-redis-cleanup") {
		t.Fatalf("writes %v: want the workloads deleted and no cleanup while the head pod runs", writes)
	}
	if err := e.api.Delete(ctx, e.get(&corev1.Pod{}, "c-head-0")); err != nil {
		t.Fatal(err)
	}
	if writes := e.mustReconcile(rc); !slices.Contains(writes, "create Job/c-redis-cleanup") {
		t.Fatalf("writes %v lack the cleanup Job", writes)
	}
	if writes := e.mustReconcile(rc); len(writes) != 0 {
		t.Fatalf("writes %v while the cleanup Job runs", writes)
	}
	job := e.get(&batchv1.Job{}, "c-redis-cleanup").(*batchv1.Job)
	job.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
	if err := e.api.Status().Update(ctx, job); err != nil {
		t.Fatal(err)
	}
	e.mustReconcile(rc)
	if err := e.api.Get(ctx, objKey(rc), &rayv1.RayCluster{}); !apierrors.IsNotFound(err) {
		t.Errorf("the RayCluster is still there (%v) after its cleanup completed", err)
	}
	if got := reasons(e.takeEvents()); !slices.Contains(got, EventCreatedRedisCleanupJob) {
		t.Errorf("events %v lack %s", got, EventCreatedRedisCleanupJob)
	}
}

// A cleanup that cannot run (here the head pod never goes) holds the RayCluster until the deletion timeout,
// counted on the reconciler's clock from the deletion: then the finalizer is removed with a Warning.
func TestRedisCleanupGivesUpAfterTheTimeout(t *testing.T) {
	rc := cluster("c").group("g", 1).with(func(rc *rayv1.RayCluster) {
		rc.Spec.GcsFaultToleranceOptions = &rayv1.GcsFaultToleranceOptions{RedisAddress: "redis:6379"}
		rc.Annotations = map[string]string{constants.AnnotationGCSFTDeletionTimeout: "30"}
	}).obj()
	e := newEnv(t, rc)
	e.mustReconcile(rc)
	e.converge(rc)
	ctx := context.Background()
	if err := e.api.Delete(ctx, e.get(&rayv1.RayCluster{}, "c")); err != nil {
		t.Fatal(err)
	}
	deleted := e.get(&rayv1.RayCluster{}, "c").(*rayv1.RayCluster).DeletionTimestamp.Time
	e.clock.SetTime(deleted.Add(29 * time.Second))
	e.mustReconcile(rc)
	if err := e.api.Get(ctx, objKey(rc), &rayv1.RayCluster{}); err != nil {
		t.Fatalf("the RayCluster went before the timeout: %v", err)
	}
	if got := reasons(e.takeEvents()); slices.Contains(got, EventForceDeletedStuckCluster) {
		t.Fatalf("events %v: forced before the timeout", got)
	}
	e.clock.SetTime(deleted.Add(31 * time.Second))
	e.mustReconcile(rc)
	if err := e.api.Get(ctx, objKey(rc), &rayv1.RayCluster{}); !apierrors.IsNotFound(err) {
		t.Errorf("the RayCluster is still held (%v) after the timeout", err)
	}
	if got := reasons(e.takeEvents()); !slices.Contains(got, EventForceDeletedStuckCluster) {
		t.Errorf("events %v lack %s", got, EventForceDeletedStuckCluster)
	}
}
