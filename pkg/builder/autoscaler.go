package builder

import (
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/names"
	"github.com/kray-project/kray/pkg/spec"
)

// autoscalerStartCommand is the sidecar's command line; the env vars are expanded by the kubelet.
const autoscalerStartCommand = "ray kuberay-autoscaler --cluster-name $(RAY_CLUSTER_NAME) --cluster-namespace $(RAY_CLUSTER_NAMESPACE)"

// autoscalerContainer is the Ray autoscaler sidecar with autoscalerOptions applied in KubeRay's order.
func autoscalerContainer(rc *rayv1.RayCluster, ray corev1.Container) corev1.Container {
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("512Mi")}
	c := corev1.Container{
		Name:            AutoscalerContainerName,
		Image:           ray.Image,
		ImagePullPolicy: corev1.PullIfNotPresent,
		Command:         []string{"/bin/bash", "-c", "--"},
		Args:            []string{autoscalerStartCommand},
		Env: []corev1.EnvVar{
			fieldEnv(envClusterName, "metadata.labels['"+constants.LabelCluster+"']"),
			fieldEnv(envClusterNamespace, "metadata.namespace"),
			fieldEnv(envHeadPodName, "metadata.name"),
			{Name: envCRDVersion, Value: rayv1.GroupVersion.Version},
			{Name: envGenAutoscalerStartCmd, Value: autoscalerStartCommand},
		},
		Resources: corev1.ResourceRequirements{Limits: res, Requests: res.DeepCopy()},
	}
	if spec.AuthEnabled(rc) {
		authEnv(rc, &c)
	}
	o := rc.Spec.AutoscalerOptions
	if o == nil {
		return c
	}
	if o.Resources != nil {
		c.Resources = *o.Resources.DeepCopy()
	}
	if o.Image != nil {
		c.Image = *o.Image
	}
	if o.ImagePullPolicy != nil {
		c.ImagePullPolicy = *o.ImagePullPolicy
	}
	for _, e := range o.Env {
		c.Env = append(c.Env, *e.DeepCopy())
	}
	for _, e := range o.EnvFrom {
		c.EnvFrom = append(c.EnvFrom, *e.DeepCopy())
	}
	for _, m := range o.VolumeMounts {
		c.VolumeMounts = append(c.VolumeMounts, *m.DeepCopy())
	}
	if o.SecurityContext != nil {
		c.SecurityContext = o.SecurityContext.DeepCopy()
	}
	if len(o.Command) > 0 {
		c.Command = append([]string(nil), o.Command...)
	}
	if len(o.Args) > 0 {
		c.Args = append([]string(nil), o.Args...)
	}
	return c
}

func rbacLabels(rc *rayv1.RayCluster) map[string]string {
	return map[string]string{
		constants.LabelCluster:   rc.Name,
		constants.LabelAppName:   constants.AppNameDefault,
		constants.LabelCreatedBy: constants.CreatedByValue,
	}
}

// AutoscalerServiceAccount is the ServiceAccount kray creates for the autoscaler when the template names none.
func AutoscalerServiceAccount(rc *rayv1.RayCluster) *corev1.ServiceAccount {
	return &corev1.ServiceAccount{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
		ObjectMeta: objectMeta(rc, names.AutoscalerServiceAccountFor(rc), rbacLabels(rc)),
	}
}

// AutoscalerRole lets the autoscaler read the cluster's pods and get and patch only its own RayCluster.
func AutoscalerRole(rc *rayv1.RayCluster) *rbacv1.Role {
	return &rbacv1.Role{
		TypeMeta:   metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "Role"},
		ObjectMeta: objectMeta(rc, names.AutoscalerRBAC(rc.Name), rbacLabels(rc)),
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch", "patch"}},
			{APIGroups: []string{""}, Resources: []string{"pods/resize"}, Verbs: []string{"patch"}},
			{APIGroups: []string{rayv1.GroupVersion.Group}, Resources: []string{"rayclusters"}, ResourceNames: []string{rc.Name}, Verbs: []string{"get", "patch"}},
		},
	}
}

// AutoscalerRoleBinding binds AutoscalerRole to the autoscaler's ServiceAccount.
func AutoscalerRoleBinding(rc *rayv1.RayCluster) *rbacv1.RoleBinding {
	name := names.AutoscalerRBAC(rc.Name)
	return &rbacv1.RoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "RoleBinding"},
		ObjectMeta: objectMeta(rc, name, rbacLabels(rc)),
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: names.AutoscalerServiceAccountFor(rc), Namespace: rc.Namespace}},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
	}
}

// versionAtLeast reports whether a "x.y.z" Ray version is at least major.minor.patch; unparsable means old.
func versionAtLeast(v string, major, minor, patch int) bool {
	parts := strings.SplitN(strings.TrimPrefix(v, "v"), ".", 3)
	if len(parts) < 2 {
		return false
	}
	want := []int{major, minor, patch}
	for i := 0; i < 3; i++ {
		n := 0
		if i < len(parts) {
			digits := parts[i]
			if j := strings.IndexFunc(digits, func(r rune) bool { return r < '0' || r > '9' }); j >= 0 {
				digits = digits[:j]
			}
			var err error
			if n, err = strconv.Atoi(digits); err != nil {
				return false
			}
		}
		if n != want[i] {
			return n > want[i]
		}
	}
	return true
}
