package builder

import (
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/names"
	"github.com/kray-project/kray/pkg/spec"
)

// GCS fault tolerance: env vars, volumes and objects, as KubeRay renders them.
const (
	envRedisAddress           = "RAY_REDIS_ADDRESS"
	envRedisUsername          = "REDIS_USERNAME"
	envRedisPassword          = "REDIS_PASSWORD"
	envExternalStorageNS      = "RAY_external_storage_namespace"
	envGCSReconnectTimeout    = "RAY_gcs_rpc_server_reconnect_timeout_s"
	gcsReconnectTimeoutWorker = "600"
	envGCSStorage             = "RAY_gcs_storage"
	envGCSStoragePath         = "RAY_gcs_storage_path"
	gcsStorageRocksDB         = "rocksdb"
)

// configureFT adds GCS fault tolerance settings: the head's ray.io/ft-enabled annotation always; with FT on,
// the workers' GCS reconnect timeout, and on the head the Redis address, credentials and storage namespace
// (params gets redis-username/redis-password referring to the env vars) or the RocksDB env and volume.
func configureFT(rc *rayv1.RayCluster, tmpl *corev1.PodTemplateSpec, params map[string]string, head bool) {
	on := spec.FTEnabled(rc)
	if head {
		tmpl.Annotations[constants.AnnotationFTEnabled] = strconv.FormatBool(on)
	}
	if !on {
		return
	}
	ray := &tmpl.Spec.Containers[constants.RayContainerIndex]
	if !head {
		appendEnvIfAbsent(ray, corev1.EnvVar{Name: envGCSReconnectTimeout, Value: gcsReconnectTimeoutWorker})
		return
	}
	if spec.FTEmbedded(rc) {
		appendEnvIfAbsent(ray, corev1.EnvVar{Name: envGCSStorage, Value: gcsStorageRocksDB}, corev1.EnvVar{Name: envGCSStoragePath, Value: constants.GCSStorageMountPath})
		mount := corev1.VolumeMount{Name: constants.GCSStorageVolume, MountPath: constants.GCSStorageMountPath}
		if s := rc.Spec.GcsFaultToleranceOptions.Storage; s != nil {
			mount.SubPath = s.SubPath
		}
		ray.VolumeMounts = append(ray.VolumeMounts, mount)
		tmpl.Spec.Volumes = append(tmpl.Spec.Volumes, corev1.Volume{Name: constants.GCSStorageVolume, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: names.GCSStoragePVCFor(rc)}}})
		return
	}
	ns := spec.ExternalStorageNamespace(rc)
	tmpl.Annotations[constants.AnnotationExternalStorageNS] = ns
	appendEnvIfAbsent(ray, corev1.EnvVar{Name: envExternalStorageNS, Value: ns})
	o := rc.Spec.GcsFaultToleranceOptions
	if o == nil {
		// Legacy annotation mode: a literal redis-password start param also feeds the cleanup Job's env.
		if v, ok := params["redis-password"]; ok {
			appendEnvIfAbsent(ray, corev1.EnvVar{Name: envRedisPassword, Value: v})
		}
		return
	}
	ray.Env = append(ray.Env, corev1.EnvVar{Name: envRedisAddress, Value: o.RedisAddress})
	if o.RedisUsername != nil {
		params["redis-username"] = "$" + envRedisUsername
		ray.Env = append(ray.Env, corev1.EnvVar{Name: envRedisUsername, Value: o.RedisUsername.Value, ValueFrom: o.RedisUsername.ValueFrom})
	}
	if o.RedisPassword != nil {
		params["redis-password"] = "$" + envRedisPassword
		ray.Env = append(ray.Env, corev1.EnvVar{Name: envRedisPassword, Value: o.RedisPassword.Value, ValueFrom: o.RedisPassword.ValueFrom})
	}
}

// GCSStoragePVC is the operator-managed PVC of the embedded RocksDB store, or nil when the user brings a
// claim or the backend is not RocksDB. With deletionPolicy DeleteWithCluster (the default) the RayCluster
// owns it, so it is deleted with the cluster.
func GCSStoragePVC(rc *rayv1.RayCluster) *corev1.PersistentVolumeClaim {
	if !spec.FTEmbedded(rc) {
		return nil
	}
	s := rc.Spec.GcsFaultToleranceOptions.Storage
	if s != nil && s.ClaimName != "" {
		return nil
	}
	size := resource.MustParse("1Gi")
	modes := []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	var class *string
	retain := false
	if s != nil {
		if s.Size != nil {
			size = *s.Size
		}
		if len(s.AccessModes) > 0 {
			modes = s.AccessModes
		}
		class = s.StorageClassName
		retain = s.DeletionPolicy != nil && *s.DeletionPolicy == rayv1.RetainGCSStorageDeletionPolicy
	}
	meta := objectMeta(rc, names.GCSStoragePVCFor(rc), map[string]string{constants.LabelCluster: rc.Name})
	if retain {
		meta.OwnerReferences = nil
	}
	return &corev1.PersistentVolumeClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
		ObjectMeta: meta,
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      modes,
			StorageClassName: class,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}},
		},
	}
}

func hasVolume(vs []corev1.Volume, name string) bool {
	for _, v := range vs {
		if v.Name == name {
			return true
		}
	}
	return false
}

func hasMountNamed(ms []corev1.VolumeMount, name string) bool {
	for _, m := range ms {
		if m.Name == name {
			return true
		}
	}
	return false
}

// NodeTypeRedisCleanup is the ray.io/node-type of the Redis cleanup Job's pod.
const NodeTypeRedisCleanup = "redis-cleanup"

// redisCleanupScript deletes the cluster's storage namespace from Redis with Ray's own helper, and exits
// non-zero when Ray reports that it could not.
const redisCleanupScript = `echo "Deleting this RayCluster's GCS data from Redis; see https://docs.ray.io/en/master/cluster/kubernetes/user-guides/kuberay-gcs-ft.html to do it by hand." && python -c "
import os, sys
from urllib.parse import urlparse
from ray._private.gcs_utils import cleanup_redis_storage
address = os.getenv('RAY_REDIS_ADDRESS', '').split(',')[0]
url = urlparse(address if '://' in address else 'redis://' + address)
kwargs = dict(host=url.hostname, port=url.port, password=os.getenv('REDIS_PASSWORD', url.password or ''),
              use_ssl=url.scheme == 'rediss', storage_namespace=os.getenv('RAY_external_storage_namespace'))
if 'REDIS_USERNAME' in os.environ:
    kwargs['username'] = os.getenv('REDIS_USERNAME', url.username)
sys.exit(0 if cleanup_redis_storage(**kwargs) else 1)
"`

// RedisCleanupJob is the Job that deletes a deleted cluster's GCS data from Redis: the head pod's Ray
// container (same image, env and Redis credentials) running Ray's cleanup helper once, within 300 s.
func RedisCleanupJob(rc *rayv1.RayCluster, opts Options) *batchv1.Job {
	tmpl := HeadPodTemplate(rc, opts)
	tmpl.Labels[constants.LabelNodeType] = NodeTypeRedisCleanup
	ray := tmpl.Spec.Containers[constants.RayContainerIndex]
	ray.Command = []string{"/bin/bash", "-c", "--"}
	ray.Args = []string{redisCleanupScript}
	ray.LivenessProbe, ray.ReadinessProbe = nil, nil
	ray.Ports = nil
	ray.Env = append(ray.Env, corev1.EnvVar{Name: "RAY_redis_db_connect_retries", Value: "120"}, corev1.EnvVar{Name: "RAY_redis_db_connect_wait_milliseconds", Value: "500"})
	limits := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m"), corev1.ResourceMemory: resource.MustParse("256Mi")}
	ray.Resources = corev1.ResourceRequirements{Limits: limits, Requests: limits.DeepCopy()}
	tmpl.Spec.Containers = []corev1.Container{ray}
	tmpl.Spec.RestartPolicy = corev1.RestartPolicyNever
	meta := objectMeta(rc, names.RedisCleanupJob(rc.Name), tmpl.Labels)
	meta.Annotations = tmpl.Annotations
	return &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: meta,
		Spec: batchv1.JobSpec{
			BackoffLimit:          ptr.To[int32](0),
			ActiveDeadlineSeconds: ptr.To[int64](300),
			Template:              tmpl,
		},
	}
}
