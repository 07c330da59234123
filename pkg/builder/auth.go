package builder

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/names"
	"github.com/kray-project/kray/pkg/spec"
)

// Ray token auth: env vars, the projected token volume and the generated Secret, as KubeRay renders them.
const (
	envAuthMode       = "RAY_AUTH_MODE"
	envAuthToken      = "RAY_AUTH_TOKEN"
	envK8sTokenAuth   = "RAY_ENABLE_K8S_TOKEN_AUTH"
	rayTokenVolume    = "ray-token"
	rayTokenMountPath = "/var/run/secrets/ray.io/serviceaccount"
	// AuthTokenKey is the key of the token in the auth Secret.
	AuthTokenKey = "auth_token"
)

// AuthSecret is the Secret kray generates for token auth, holding token under auth_token; nil when auth is
// off, the user named a Secret, or Kubernetes token auth is used.
func AuthSecret(rc *rayv1.RayCluster, token string) *corev1.Secret {
	if !spec.AuthEnabled(rc) || spec.K8sTokenAuth(rc) || ptr.Deref(rc.Spec.AuthOptions.SecretName, "") != "" {
		return nil
	}
	return &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: objectMeta(rc, names.AuthSecretFor(rc), map[string]string{constants.LabelCluster: rc.Name}),
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{AuthTokenKey: []byte(token)},
	}
}

// configureAuth adds token auth to the Ray container and the wait-gcs-ready init container, and with
// Kubernetes token auth the projected ServiceAccount token volume.
func configureAuth(rc *rayv1.RayCluster, tmpl *corev1.PodTemplateSpec) {
	if !spec.AuthEnabled(rc) {
		return
	}
	authEnv(rc, &tmpl.Spec.Containers[constants.RayContainerIndex])
	if spec.K8sTokenAuth(rc) && !hasVolume(tmpl.Spec.Volumes, rayTokenVolume) {
		tmpl.Spec.Volumes = append(tmpl.Spec.Volumes, corev1.Volume{Name: rayTokenVolume, VolumeSource: corev1.VolumeSource{
			Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}}}}}})
	}
	for i := range tmpl.Spec.InitContainers {
		if tmpl.Spec.InitContainers[i].Name == WaitGCSReadyInitContainerName {
			authEnv(rc, &tmpl.Spec.InitContainers[i])
		}
	}
}

// authEnv sets RAY_AUTH_MODE and either the Kubernetes token auth switch and mount or RAY_AUTH_TOKEN from
// the auth Secret, leaving values the user set.
func authEnv(rc *rayv1.RayCluster, c *corev1.Container) {
	appendEnvIfAbsent(c, corev1.EnvVar{Name: envAuthMode, Value: string(rayv1.AuthModeToken)})
	if spec.K8sTokenAuth(rc) {
		appendEnvIfAbsent(c, corev1.EnvVar{Name: envK8sTokenAuth, Value: "true"})
		if !hasMountNamed(c.VolumeMounts, rayTokenVolume) {
			c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: rayTokenVolume, MountPath: rayTokenMountPath, ReadOnly: true})
		}
		return
	}
	appendEnvIfAbsent(c, corev1.EnvVar{Name: envAuthToken, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: names.AuthSecretFor(rc)}, Key: AuthTokenKey}}})
}

// ClientAuthEnv gives container c, a Ray client of rc in a pod that rc's builders render (a sidecar in the
// head pod), the credentials rc's token auth asks for; it changes nothing when auth is off.
func ClientAuthEnv(rc *rayv1.RayCluster, c *corev1.Container) {
	if spec.AuthEnabled(rc) {
		authEnv(rc, c)
	}
}

// ClientAuth gives a pod template whose first container is a Ray client of rc (the RayJob submitter) the
// credentials rc's token auth asks for; it changes nothing when auth is off.
func ClientAuth(rc *rayv1.RayCluster, tmpl *corev1.PodTemplateSpec) {
	configureAuth(rc, tmpl)
}
