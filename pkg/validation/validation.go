// Package validation checks RayClusters, RayJobs and RayServices for what their CRD schemas cannot express.
// It is pure: it reads only the object (and the operator settings that change what its spec may hold) and
// returns the first problem it finds, in KubeRay's check order and wording.
package validation

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/component-base/featuregate"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/batchscheduler"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/spec"
)

// MaxClusterNameLength leaves room for the longest derived name ("-serve-svc") inside 63 characters.
const MaxClusterNameLength = 53

// resourceParamKeys are the ray start params that a group's `resources` map would also set.
var resourceParamKeys = []string{"num-cpus", "num-gpus", "memory", "resources"}

// Metadata checks the cluster name; its error is reported with the InvalidRayClusterMetadata reason.
func Metadata(rc *rayv1.RayCluster) error {
	return nameRules("RayCluster", rc.Name, MaxClusterNameLength)
}

// nameRules checks a kind's object name as KubeRay does: at most max characters, a DNS-1035 label.
func nameRules(kind, name string, max int) error {
	if len(name) > max {
		return fmt.Errorf("%s name should be no more than %d characters", kind, max)
	}
	if errs := utilvalidation.IsDNS1035Label(name); len(errs) > 0 {
		return fmt.Errorf("%s name should be a valid DNS1035 label: %v", kind, errs)
	}
	return nil
}

// ClusterOptions are the operator settings that change how a RayCluster spec is refused.
type ClusterOptions struct {
	// Gates are the operator's feature gates; nil is each gate off. A spec asking for a feature kray does not
	// implement yet is refused in KubeRay's words while its gate is off, and in kray's while it is on.
	Gates featuregate.FeatureGate
	// BatchScheduler is the operator's batch scheduler (KubeRay's --batch-scheduler), "" for none.
	BatchScheduler string
	// CertManager reports whether cert-manager's API (cert-manager.io/v1) is served: a tlsOptions cluster
	// needs it.
	CertManager bool
}

// on reports whether gate is on in o.
func (o ClusterOptions) on(gate featuregate.Feature) bool {
	return o.Gates != nil && o.Gates.Enabled(gate)
}

// Spec checks the spec with every feature gate off; its error is reported with the InvalidRayClusterSpec
// reason.
func Spec(rc *rayv1.RayCluster) error { return SpecWith(rc, ClusterOptions{}) }

// SpecWith checks the spec under the operator's settings opts; its error is reported with the
// InvalidRayClusterSpec reason.
func SpecWith(rc *rayv1.RayCluster, opts ClusterOptions) error {
	head := rc.Spec.HeadGroupSpec
	if len(head.Template.Spec.Containers) == 0 {
		return fmt.Errorf("headGroupSpec should have at least one container")
	}
	for i := range rc.Spec.WorkerGroupSpecs {
		if len(rc.Spec.WorkerGroupSpecs[i].Template.Spec.Containers) == 0 {
			return fmt.Errorf("workerGroupSpec should have at least one container")
		}
	}
	if err := groupParams("Head", head.RayStartParams, head.Resources); err != nil {
		return err
	}
	seen := map[string]bool{}
	autoscaling := spec.AutoscalingEnabled(rc)
	v2 := spec.AutoscalerV2(rc)
	for i := range rc.Spec.WorkerGroupSpecs {
		g := &rc.Spec.WorkerGroupSpecs[i]
		if seen[g.GroupName] {
			return fmt.Errorf("worker group names must be unique: %q is used more than once", g.GroupName)
		}
		seen[g.GroupName] = true
		if errs := utilvalidation.IsValidLabelValue(g.GroupName); len(errs) > 0 {
			return fmt.Errorf("worker group name %q cannot be used as the ray.io/group pod label: %s", g.GroupName, strings.Join(errs, "; "))
		}
		if err := groupParams(g.GroupName, g.RayStartParams, g.Resources); err != nil {
			return err
		}
		if err := groupReplicas(g, autoscaling); err != nil {
			return err
		}
		if g.IdleTimeoutSeconds != nil {
			if *g.IdleTimeoutSeconds < 0 {
				return fmt.Errorf("worker group %s: idleTimeoutSeconds must be non-negative, got %d", g.GroupName, *g.IdleTimeoutSeconds)
			}
			if !v2 {
				return fmt.Errorf("worker group %s: idleTimeoutSeconds is set, but autoscaler v2 is not enabled. Please set .spec.autoscalerOptions.version to 'v2' (or set RAY_enable_autoscaler_v2 on the head)", g.GroupName)
			}
		}
		if g.Suspend != nil && *g.Suspend && autoscaling {
			return fmt.Errorf("worker group %s cannot be suspended with Autoscaler enabled", g.GroupName)
		}
		if err := rollingUpdate(g); err != nil {
			return err
		}
	}
	if err := ftRules(rc, opts); err != nil {
		return err
	}
	if err := batchSchedulerLabels(rc, opts.BatchScheduler); err != nil {
		return err
	}
	if err := autoscalerRules(rc, autoscaling, v2); err != nil {
		return err
	}
	if err := authRules(rc); err != nil {
		return err
	}
	if err := krayAnnotations(rc); err != nil {
		return err
	}
	if err := ServiceRules("headGroupSpec.headService", rc.Spec.HeadGroupSpec.HeadService); err != nil {
		return err
	}
	if rc.Spec.HeadGroupSpec.ServiceType == corev1.ServiceTypeExternalName {
		return errors.New("headGroupSpec.serviceType ExternalName is not allowed: the head Service must lead to the head pod")
	}
	if err := historyServerRules(rc, opts); err != nil {
		return err
	}
	if err := networkPolicyRules(rc, opts); err != nil {
		return err
	}
	return tlsRules(rc, opts)
}

// ServiceRules checks a Service template kray creates as given (a head Service, a RayService's serve
// Service), at path: it may not point elsewhere than its pods. externalIPs make nodes take traffic for any
// address (CVE-2020-8554), and an ExternalName makes the Service's DNS name, which kray and Ray itself call,
// resolve wherever the user says. KubeRay copies both; kray refuses them.
func ServiceRules(path string, svc *corev1.Service) error {
	switch {
	case svc == nil:
		return nil
	case len(svc.Spec.ExternalIPs) > 0:
		return fmt.Errorf("%s.spec.externalIPs is not allowed: a user's Service may not claim addresses for the nodes", path)
	case svc.Spec.Type == corev1.ServiceTypeExternalName:
		return fmt.Errorf("%s.spec.type ExternalName is not allowed: the Service must lead to the cluster's pods", path)
	case svc.Spec.ExternalName != "":
		return fmt.Errorf("%s.spec.externalName is not allowed: the Service must lead to the cluster's pods", path)
	}
	return nil
}

// krayAnnotations checks the values of kray's switch annotations on the RayCluster.
func krayAnnotations(rc *rayv1.RayCluster) error {
	for _, key := range []string{constants.AnnotationHeadDisruptionBudget, constants.AnnotationInPlaceWorkerUpgrade} {
		if v, ok := rc.Annotations[key]; ok && v != "true" {
			return fmt.Errorf("annotation %s must be \"true\" or absent, got %q", key, v)
		}
	}
	for _, key := range []string{constants.AnnotationImagePrepull, constants.AnnotationWorkerHealing} {
		if v, ok := rc.Annotations[key]; ok && v != "true" && v != "false" {
			return fmt.Errorf("annotation %s must be \"true\", \"false\" or absent, got %q", key, v)
		}
	}
	return nil
}

func groupParams(group string, params, resources map[string]string) error {
	if len(resources) > 0 {
		for _, k := range resourceParamKeys {
			if _, ok := params[k]; ok {
				return fmt.Errorf("resource fields should not be set in both rayStartParams and Resources for %s group; please use only one", group)
			}
		}
		for name, v := range resources {
			if _, err := resource.ParseQuantity(v); err != nil {
				return fmt.Errorf("%s group: resources[%q] = %q is not a valid quantity: %v", group, name, v, err)
			}
		}
	}
	if _, ok := params["labels"]; ok {
		return fmt.Errorf("rayStartParams['labels'] is not supported for %s group; please use the top-level Labels field instead", group)
	}
	return nil
}

// rollingUpdate checks a group's rollingUpdate: maxUnavailable is at least 1 pod or 1%, partition at least 0,
// and percentages are at most 100%.
func rollingUpdate(g *rayv1.WorkerGroupSpec) error {
	if g.RollingUpdate == nil {
		return nil
	}
	if v := g.RollingUpdate.MaxSurge; v != nil {
		if err := intOrPercent(v, 0); err != nil {
			return fmt.Errorf("worker group %s: rollingUpdate.maxSurge %s", g.GroupName, err)
		}
	}
	if v := g.RollingUpdate.MaxUnavailable; v != nil {
		if err := intOrPercent(v, 0); err != nil {
			return fmt.Errorf("worker group %s: rollingUpdate.maxUnavailable %s", g.GroupName, err)
		}
		if zero(v) && (g.RollingUpdate.MaxSurge == nil || zero(g.RollingUpdate.MaxSurge)) {
			return fmt.Errorf("worker group %s: rollingUpdate.maxUnavailable can be 0 only with a maxSurge above 0, or no pod could be updated", g.GroupName)
		}
	}
	if v := g.RollingUpdate.Partition; v != nil {
		if err := intOrPercent(v, 0); err != nil {
			return fmt.Errorf("worker group %s: rollingUpdate.partition %s", g.GroupName, err)
		}
	}
	return nil
}

// zero reports whether v is 0 or 0%.
func zero(v *intstr.IntOrString) bool {
	return (v.Type == intstr.Int && v.IntVal == 0) || (v.Type == intstr.String && v.StrVal == "0%")
}

// intOrPercent checks that v is an integer >= lowest or a percentage between lowest% and 100%.
func intOrPercent(v *intstr.IntOrString, lowest int) error {
	if v.Type == intstr.Int {
		if int(v.IntVal) < lowest {
			return fmt.Errorf("must be at least %d, got %d", lowest, v.IntVal)
		}
		return nil
	}
	n, ok := strings.CutSuffix(v.StrVal, "%")
	p, err := strconv.Atoi(n)
	if !ok || err != nil || p < lowest || p > 100 {
		return fmt.Errorf("must be an integer or a percentage between %d%% and 100%%, got %q", lowest, v.StrVal)
	}
	return nil
}

func groupReplicas(g *rayv1.WorkerGroupSpec, autoscaling bool) error {
	if !autoscaling && (g.MinReplicas == nil || g.MaxReplicas == nil) {
		return fmt.Errorf("worker group %s must set both minReplicas and maxReplicas when autoscaling is disabled", g.GroupName)
	}
	if g.MinReplicas != nil && *g.MinReplicas < 0 {
		return fmt.Errorf("worker group %s has negative minReplicas %d", g.GroupName, *g.MinReplicas)
	}
	if g.MaxReplicas != nil && *g.MaxReplicas < 0 {
		return fmt.Errorf("worker group %s has negative maxReplicas %d", g.GroupName, *g.MaxReplicas)
	}
	if g.MinReplicas != nil && g.MaxReplicas != nil && *g.MinReplicas > *g.MaxReplicas {
		return fmt.Errorf("worker group %s has minReplicas %d greater than maxReplicas %d", g.GroupName, *g.MinReplicas, *g.MaxReplicas)
	}
	if g.Replicas != nil && *g.Replicas < 0 {
		return fmt.Errorf("worker group %s has negative replicas %d", g.GroupName, *g.Replicas)
	}
	return nil
}

func autoscalerRules(rc *rayv1.RayCluster, autoscaling, v2 bool) error {
	headEnv := headRayEnv(rc)
	envV2, envSet := headEnv[strings.ToLower(constants.EnvAutoscalerV2)]
	envOn := envSet && (envV2 == "1" || strings.EqualFold(envV2, "true"))
	if !autoscaling {
		if envOn {
			return fmt.Errorf("%s is set on the head but enableInTreeAutoscaling is not true", constants.EnvAutoscalerV2)
		}
		return nil
	}
	o := rc.Spec.AutoscalerOptions
	if o != nil && o.Version != nil && envSet {
		return fmt.Errorf("set the autoscaler version with either autoscalerOptions.version or the head env %s, not both", constants.EnvAutoscalerV2)
	}
	if v2 {
		if p := rc.Spec.HeadGroupSpec.Template.Spec.RestartPolicy; p != "" && p != corev1.RestartPolicyNever {
			return fmt.Errorf("restartPolicy for head Pod should be Never or unset when using autoscaler V2")
		}
		for i := range rc.Spec.WorkerGroupSpecs {
			g := &rc.Spec.WorkerGroupSpecs[i]
			if p := g.Template.Spec.RestartPolicy; p != "" && p != corev1.RestartPolicyNever {
				return fmt.Errorf("restartPolicy for worker group %s should be Never or unset when using autoscaler V2", g.GroupName)
			}
		}
	}
	if o != nil {
		if o.IdleTimeoutSeconds != nil && *o.IdleTimeoutSeconds < 0 {
			return fmt.Errorf("autoscalerOptions.idleTimeoutSeconds must be non-negative, got %d", *o.IdleTimeoutSeconds)
		}
		for _, e := range o.Env {
			if e.Name == "KUBERAY_GEN_AUTOSCALER_START_CMD" {
				return fmt.Errorf("autoscalerOptions.env must not set KUBERAY_GEN_AUTOSCALER_START_CMD; it is reserved for the generated command")
			}
		}
	}
	return nil
}

// headRayEnv maps the lower-cased names of the head Ray container's env vars to their values.
func headRayEnv(rc *rayv1.RayCluster) map[string]string {
	out := map[string]string{}
	cs := rc.Spec.HeadGroupSpec.Template.Spec.Containers
	if len(cs) == 0 {
		return out
	}
	for _, e := range cs[constants.RayContainerIndex].Env {
		out[strings.ToLower(e.Name)] = e.Value
	}
	return out
}

// Warning is a problem that does not stop reconciliation but deserves a Warning event.
type Warning struct {
	Reason  string
	Message string
}

// Warnings lists the spec's problems that kray works around or cannot judge for sure.
func Warnings(rc *rayv1.RayCluster) []Warning {
	var out []Warning
	for i := range rc.Spec.WorkerGroupSpecs {
		g := &rc.Spec.WorkerGroupSpecs[i]
		switch g.Template.Spec.RestartPolicy {
		case corev1.RestartPolicyNever, corev1.RestartPolicyOnFailure:
			out = append(out, Warning{EventRestartPolicySubstituted, fmt.Sprintf("worker group %s asks for restartPolicy %s; Kruise runs pods with Always, so kray replaces a pod whose Ray container exits", g.GroupName, g.Template.Spec.RestartPolicy)})
		}
		if w, ok := rayContainerNotFirst("worker group "+g.GroupName, g.Template.Spec.Containers); ok {
			out = append(out, w)
		}
	}
	switch p := rc.Spec.HeadGroupSpec.Template.Spec.RestartPolicy; p {
	case corev1.RestartPolicyNever, corev1.RestartPolicyOnFailure:
		out = append(out, Warning{EventRestartPolicySubstituted, fmt.Sprintf("the head asks for restartPolicy %s; Kruise runs pods with Always, so kray replaces the head pod when its Ray container exits", p)})
	}
	if w, ok := rayContainerNotFirst("the head", rc.Spec.HeadGroupSpec.Template.Spec.Containers); ok {
		out = append(out, w)
	}
	return append(out, IPPRWarnings(rc)...)
}

// rayContainerNotFirst flags a template whose first container does not look like Ray while a later one
// does: Ray, the autoscaler and kray all treat containers[0] as the Ray container.
func rayContainerNotFirst(where string, containers []corev1.Container) (Warning, bool) {
	if len(containers) < 2 || looksLikeRay(containers[0]) {
		return Warning{}, false
	}
	for _, c := range containers[1:] {
		if looksLikeRay(c) {
			return Warning{EventRayContainerNotFirst, fmt.Sprintf("%s: container %q looks like the Ray container but is not first; kray runs `ray start` in the first container, %q", where, c.Name, containers[0].Name)}, true
		}
	}
	return Warning{}, false
}

func looksLikeRay(c corev1.Container) bool {
	return strings.Contains(strings.ToLower(c.Image), "ray") || strings.HasPrefix(strings.ToLower(c.Name), "ray")
}

// batchSchedulerLabels checks the labels the operator's batch scheduler reads from the cluster: Volcano's
// network topology tier is an integer when a topology mode is set.
func batchSchedulerLabels(rc *rayv1.RayCluster, scheduler string) error {
	if scheduler != batchscheduler.Volcano {
		return nil
	}
	if _, ok := rc.Labels[batchscheduler.LabelNetworkTopologyMode]; !ok {
		return nil
	}
	if tier, ok := rc.Labels[batchscheduler.LabelNetworkTopologyHighestTier]; ok {
		if _, err := strconv.Atoi(tier); err != nil {
			return fmt.Errorf("label %s must be an integer, got %q", batchscheduler.LabelNetworkTopologyHighestTier, tier)
		}
	}
	return nil
}
