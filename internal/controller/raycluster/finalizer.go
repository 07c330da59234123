package raycluster

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/internal/controller/shared"
	"github.com/kray-project/kray/pkg/builder"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/names"
	"github.com/kray-project/kray/pkg/spec"
)

// defaultRedisCleanupTimeout is how long a deleted cluster waits for its Redis cleanup when the
// ray.io/gcs-ft-deletion-timeout annotation does not say.
const defaultRedisCleanupTimeout = 300 * time.Second

// cleanupPoll is how often a deleted cluster's cleanup is checked.
const cleanupPoll = 2 * time.Second

// wantsRedisCleanup reports whether the cluster must have the Redis cleanup finalizer: GCS fault tolerance
// with Redis, and the operator's cleanup switch on.
func (r *Reconciler) wantsRedisCleanup(rc *rayv1.RayCluster) bool {
	return spec.FTRedis(rc) && !r.DisableRedisCleanup
}

// ensureFinalizer adds the Redis cleanup finalizer before anything is created, so the cluster's Redis data
// can never outlive it unnoticed. It reports whether it wrote.
func (r *Reconciler) ensureFinalizer(ctx context.Context, rc *rayv1.RayCluster) (bool, error) {
	if !r.wantsRedisCleanup(rc) {
		return false, nil
	}
	return shared.AddFinalizer(ctx, r.Writer, rc, constants.FinalizerRedisCleanup)
}

// finalize runs a deleted cluster's Redis cleanup: delete its workloads (and so its pods), wait until the
// head pod is gone, run the cleanup Job, and remove the finalizer once the Job completed or failed, or once
// the deletion timeout passed (ForceDeletedStuckCluster). A finalizer left on a cluster without Redis FT is
// removed at once.
func (r *Reconciler) finalize(ctx context.Context, rc *rayv1.RayCluster) (ctrl.Result, error) {
	if !slices.Contains(rc.Finalizers, constants.FinalizerRedisCleanup) {
		return ctrl.Result{}, nil
	}
	s := newState(rc, rc, children{})
	defer r.emit(s)
	if !spec.FTRedis(rc) {
		return ctrl.Result{}, r.removeFinalizer(ctx, rc)
	}
	if timeout := redisCleanupTimeout(rc); r.clock().Sub(rc.DeletionTimestamp.Time) > timeout {
		s.warn(EventForceDeletedStuckCluster, "The Redis cleanup of %s/%s did not finish within %s; removed finalizer %s without it: delete the storage namespace %q from Redis by hand",
			rc.Namespace, rc.Name, timeout, constants.FinalizerRedisCleanup, spec.ExternalStorageNamespace(rc))
		return ctrl.Result{}, r.removeFinalizer(ctx, rc)
	}
	kids, err := r.readChildren(ctx, rc)
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := r.deleteWorkloads(ctx, rc, kids); err != nil {
		return ctrl.Result{}, err
	}
	if len(kids.podsMatching(labels.SelectorFromSet(builder.HeadSelector(rc)))) > 0 {
		return ctrl.Result{RequeueAfter: cleanupPoll}, nil
	}
	job := &batchv1.Job{}
	switch err := r.Cache.Get(ctx, types.NamespacedName{Namespace: rc.Namespace, Name: names.RedisCleanupJob(rc.Name)}, job); {
	case apierrors.IsNotFound(err):
		desired := builder.RedisCleanupJob(rc, r.Options)
		created, err := r.create(ctx, desired)
		if err != nil {
			s.warn(EventFailedToCreateRedisCleanupJob, "Failed to create the Redis cleanup Job %s/%s: %v", desired.Namespace, desired.Name, err)
			return ctrl.Result{}, fmt.Errorf("create Redis cleanup Job: %w", err)
		}
		if created {
			s.normal(EventCreatedRedisCleanupJob, "Created Job %s/%s to delete storage namespace %q from Redis", desired.Namespace, desired.Name, spec.ExternalStorageNamespace(rc))
		}
		return ctrl.Result{RequeueAfter: cleanupPoll}, nil
	case err != nil:
		return ctrl.Result{}, err
	}
	if !jobFinished(job) {
		return ctrl.Result{RequeueAfter: cleanupPoll}, nil
	}
	return ctrl.Result{}, r.removeFinalizer(ctx, rc)
}

// deleteWorkloads deletes the cluster's head StatefulSet and worker CloneSets; their pods go with them.
// While the finalizer holds the RayCluster, the garbage collector would not.
func (r *Reconciler) deleteWorkloads(ctx context.Context, rc *rayv1.RayCluster, kids children) error {
	var objs []client.Object
	if kids.headSet != nil {
		objs = append(objs, kids.headSet)
	}
	for i := range kids.cloneSets {
		objs = append(objs, &kids.cloneSets[i])
	}
	for _, o := range objs {
		if o.GetDeletionTimestamp() != nil || !ownedBy(o, rc) {
			continue
		}
		if err := r.Writer.Delete(ctx, o.DeepCopyObject().(client.Object), client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete %s: %w", o.GetName(), err)
		}
	}
	return nil
}

// jobFinished reports whether the Job completed or failed (FailureTarget counts as failed).
func jobFinished(job *batchv1.Job) bool {
	for _, c := range job.Status.Conditions {
		if c.Status == corev1.ConditionTrue && (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed || c.Type == batchv1.JobFailureTarget) {
			return true
		}
	}
	return false
}

// redisCleanupTimeout is the ray.io/gcs-ft-deletion-timeout annotation in seconds, else 300 s.
func redisCleanupTimeout(rc *rayv1.RayCluster) time.Duration {
	if n, err := strconv.Atoi(rc.Annotations[constants.AnnotationGCSFTDeletionTimeout]); err == nil && n > 0 {
		return time.Duration(n) * time.Second
	}
	return defaultRedisCleanupTimeout
}

func (r *Reconciler) removeFinalizer(ctx context.Context, rc *rayv1.RayCluster) error {
	return shared.RemoveFinalizer(ctx, r.Writer, rc, constants.FinalizerRedisCleanup)
}
