package validation

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/utils/ptr"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/features"
	"github.com/kray-project/kray/pkg/spec"
)

// ftRules checks GCS fault tolerance as KubeRay does: one way to turn it on, no Redis settings outside
// gcsFaultToleranceOptions once it is used, backend-specific fields, and never a Redis username by hand.
func ftRules(rc *rayv1.RayCluster, opts ClusterOptions) error {
	o := rc.Spec.GcsFaultToleranceOptions
	params := rc.Spec.HeadGroupSpec.RayStartParams
	env := rc.Spec.HeadGroupSpec.Template.Spec.Containers[constants.RayContainerIndex].Env
	has := func(name string) bool {
		return slices.ContainsFunc(env, func(e corev1.EnvVar) bool { return e.Name == name })
	}
	if rc.Annotations[constants.AnnotationFTEnabled] != "" && o != nil {
		return fmt.Errorf("%s annotation and GcsFaultToleranceOptions are both set. Please use only GcsFaultToleranceOptions to configure GCS fault tolerance", constants.AnnotationFTEnabled)
	}
	if !spec.FTEnabled(rc) && has("RAY_REDIS_ADDRESS") {
		return fmt.Errorf("RAY_REDIS_ADDRESS is set which implicitly enables GCS fault tolerance, but GcsFaultToleranceOptions is not set. Please set GcsFaultToleranceOptions to enable GCS fault tolerance")
	}
	if o != nil {
		switch {
		case params["redis-password"] != "":
			return fmt.Errorf("cannot set `redis-password` in rayStartParams when GcsFaultToleranceOptions is enabled - use GcsFaultToleranceOptions.RedisPassword instead")
		case has("REDIS_PASSWORD"):
			return fmt.Errorf("cannot set `REDIS_PASSWORD` env var in head Pod when GcsFaultToleranceOptions is enabled - use GcsFaultToleranceOptions.RedisPassword instead")
		case has("RAY_REDIS_ADDRESS"):
			return fmt.Errorf("cannot set `RAY_REDIS_ADDRESS` env var in head Pod when GcsFaultToleranceOptions is enabled - use GcsFaultToleranceOptions.RedisAddress instead")
		case rc.Annotations[constants.AnnotationExternalStorageNS] != "":
			return fmt.Errorf("cannot set `ray.io/external-storage-namespace` annotation when GcsFaultToleranceOptions is enabled - use GcsFaultToleranceOptions.ExternalStorageNamespace instead")
		}
		if err := ftBackend(rc, opts, has); err != nil {
			return err
		}
	}
	if params["redis-username"] != "" || has("REDIS_USERNAME") {
		return fmt.Errorf("cannot set redis username in rayStartParams or environment variables - use GcsFaultToleranceOptions.RedisUsername instead")
	}
	return nil
}

// ftBackend checks the fields that only one backend may set, and that the RocksDB backend is asked for
// only under KubeRay's GCSFaultToleranceEmbeddedStorage gate.
func ftBackend(rc *rayv1.RayCluster, opts ClusterOptions, has func(string) bool) error {
	o := rc.Spec.GcsFaultToleranceOptions
	if !spec.FTEmbedded(rc) {
		if o.Storage != nil {
			return fmt.Errorf("cannot set GcsFaultToleranceOptions.Storage when backend is 'redis' - it only applies to the 'rocksdb' backend")
		}
		return nil
	}
	switch {
	case !opts.on(features.GCSFaultToleranceEmbeddedStorage):
		return fmt.Errorf("the embedded RocksDB GCS fault tolerance backend (GcsFaultToleranceOptions.Backend: 'rocksdb') requires the %s feature gate to be enabled", features.GCSFaultToleranceEmbeddedStorage)
	case o.RedisAddress != "":
		return fmt.Errorf("cannot set GcsFaultToleranceOptions.RedisAddress when backend is 'rocksdb'")
	case o.RedisUsername != nil:
		return fmt.Errorf("cannot set GcsFaultToleranceOptions.RedisUsername when backend is 'rocksdb'")
	case o.RedisPassword != nil:
		return fmt.Errorf("cannot set GcsFaultToleranceOptions.RedisPassword when backend is 'rocksdb'")
	case o.ExternalStorageNamespace != "":
		return fmt.Errorf("cannot set GcsFaultToleranceOptions.ExternalStorageNamespace when backend is 'rocksdb'")
	case o.Storage != nil && o.Storage.ClaimName != "" && (o.Storage.Size != nil || o.Storage.StorageClassName != nil || len(o.Storage.AccessModes) > 0):
		return fmt.Errorf("GcsFaultToleranceOptions.Storage.ClaimName is mutually exclusive with size, storageClassName, and accessModes")
	case has("RAY_gcs_storage") || has("RAY_gcs_storage_path"):
		return fmt.Errorf("cannot set `RAY_gcs_storage` or `RAY_gcs_storage_path` env var in head Pod when the embedded GCS FT backend is used - these are managed by KubeRay")
	}
	head := rc.Spec.HeadGroupSpec.Template.Spec
	for _, m := range head.Containers[0].VolumeMounts {
		if m.MountPath == constants.GCSStorageMountPath || m.Name == constants.GCSStorageVolume {
			return fmt.Errorf("cannot set a volume mount named %q or mounted at %s in the head container when the embedded GCS FT backend is used - it is managed by KubeRay", constants.GCSStorageVolume, constants.GCSStorageMountPath)
		}
	}
	for _, v := range head.Volumes {
		if v.Name == constants.GCSStorageVolume {
			return fmt.Errorf("cannot set a volume named %q in the head Pod when the embedded GCS FT backend is used - it is managed by KubeRay", constants.GCSStorageVolume)
		}
	}
	return nil
}

// authRules checks token auth as KubeRay does: Ray 2.52+ (2.55+ for Kubernetes token auth, which also
// excludes a user Secret).
func authRules(rc *rayv1.RayCluster) error {
	if !spec.AuthEnabled(rc) {
		if spec.K8sTokenAuth(rc) {
			return fmt.Errorf("authOptions.enableK8sTokenAuth is enabled but authOptions.mode not set to 'token'")
		}
		return nil
	}
	if rc.Spec.RayVersion == "" {
		return fmt.Errorf("authOptions.mode is 'token' but RayVersion was not specified. Ray version 2.52.0 or later is required")
	}
	v, err := version.ParseGeneric(rc.Spec.RayVersion)
	if err != nil {
		return fmt.Errorf("authOptions.mode is 'token' but RayVersion format is invalid: %s, %w", rc.Spec.RayVersion, err)
	}
	if v.LessThan(version.MustParseGeneric("2.52.0")) {
		return fmt.Errorf("authOptions.mode is 'token' but minimum Ray version is 2.52.0, got %s", rc.Spec.RayVersion)
	}
	if spec.K8sTokenAuth(rc) {
		if v.LessThan(version.MustParseGeneric("2.55.0")) {
			return fmt.Errorf("authOptions.enableK8sTokenAuth is enabled but minimum Ray version is 2.55.0, got %s", rc.Spec.RayVersion)
		}
		if ptr.Deref(rc.Spec.AuthOptions.SecretName, "") != "" {
			return fmt.Errorf("authOptions.enableK8sTokenAuth is enabled and authOptions.secretName is also set")
		}
	}
	return nil
}
