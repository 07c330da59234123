package names

import (
	"k8s.io/utils/ptr"

	rayv1 "github.com/kray-project/kray/api/v1"
)

// HeadServiceFor is the head Service's name: headService.metadata.name if set, else "<cluster>-head-svc".
func HeadServiceFor(rc *rayv1.RayCluster) string {
	if s := rc.Spec.HeadGroupSpec.HeadService; s != nil && s.Name != "" {
		return s.Name
	}
	return HeadService(rc.Name)
}

// AuthSecretFor is the Secret holding the token: authOptions.secretName, else the (checked) cluster name.
func AuthSecretFor(rc *rayv1.RayCluster) string {
	if a := rc.Spec.AuthOptions; a != nil && ptr.Deref(a.SecretName, "") != "" {
		return *a.SecretName
	}
	return AuthSecret(rc.Name)
}

// GCSStoragePVCFor is the PVC of the embedded store: the user's claimName, else "<cluster>-gcs-pvc".
func GCSStoragePVCFor(rc *rayv1.RayCluster) string {
	if o := rc.Spec.GcsFaultToleranceOptions; o != nil && o.Storage != nil && o.Storage.ClaimName != "" {
		return o.Storage.ClaimName
	}
	return GCSStoragePVC(rc.Name)
}

// AutoscalerServiceAccountFor is the head pod's ServiceAccount when autoscaling is on: the template's
// serviceAccountName if set, else one named after the cluster.
func AutoscalerServiceAccountFor(rc *rayv1.RayCluster) string {
	if sa := rc.Spec.HeadGroupSpec.Template.Spec.ServiceAccountName; sa != "" {
		return sa
	}
	return AutoscalerRBAC(rc.Name)
}
