package validation

import (
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/builder"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/features"
)

// errNoCertManager is the refusal of a tlsOptions cluster where cert-manager's API is not served (KubeRay's
// words).
var errNoCertManager = errors.New("tlsOptions requires cert-manager, but cert-manager is not installed")

// tlsRules checks spec.tlsOptions as KubeRay v1.7 does, with its words: refused while the RayClusterMTLS gate
// is off (even when it says enabled: false); when enabled, cert-manager must be served, and no Ray container
// nor the autoscaler may set Ray's TLS variables or use the certificate volume's name or path, which kray
// manages.
func tlsRules(rc *rayv1.RayCluster, opts ClusterOptions) error {
	if rc.Spec.TLSOptions == nil {
		return nil
	}
	if !opts.on(features.RayClusterMTLS) {
		return errors.New("spec.tlsOptions requires the RayClusterMTLS feature gate to be enabled")
	}
	if !builder.TLSEnabled(rc) {
		return nil
	}
	if err := tlsContainerRules(&rc.Spec.HeadGroupSpec.Template.Spec.Containers[constants.RayContainerIndex],
		"head Pod", "in head Pod"); err != nil {
		return err
	}
	for i := range rc.Spec.WorkerGroupSpecs {
		g := &rc.Spec.WorkerGroupSpecs[i]
		where := fmt.Sprintf("worker group %q", g.GroupName)
		if err := tlsContainerRules(&g.Template.Spec.Containers[constants.RayContainerIndex], where, "in "+where); err != nil {
			return err
		}
	}
	if a := rc.Spec.AutoscalerOptions; a != nil {
		for _, e := range a.Env {
			if slices.Contains(builder.TLSEnv, e.Name) {
				return fmt.Errorf("cannot set %s environment variable in autoscalerOptions.env when tlsOptions is set - the operator manages TLS configuration for the autoscaler automatically", e.Name)
			}
		}
		if err := tlsMountRules(a.VolumeMounts, "autoscalerOptions.volumeMounts"); err != nil {
			return err
		}
	}
	if !opts.CertManager {
		return errNoCertManager
	}
	return nil
}

// tlsContainerRules refuses Ray's TLS variables and the certificate mount on a Ray container.
func tlsContainerRules(c *corev1.Container, mountWhere, envWhere string) error {
	for _, e := range c.Env {
		if slices.Contains(builder.TLSEnv, e.Name) {
			return fmt.Errorf("cannot set %s environment variable %s when tlsOptions is set - the operator manages TLS configuration automatically", e.Name, envWhere)
		}
	}
	return tlsMountRules(c.VolumeMounts, mountWhere)
}

func tlsMountRules(mounts []corev1.VolumeMount, where string) error {
	for _, m := range mounts {
		switch {
		case m.Name == builder.TLSVolumeName:
			return fmt.Errorf("cannot use volume mount named %q in %s when tlsOptions is set - the operator manages TLS configuration automatically", m.Name, where)
		case m.MountPath == builder.TLSMountPath:
			return fmt.Errorf("cannot use volume mount at path %q in %s when tlsOptions is set - the operator manages TLS configuration automatically", m.MountPath, where)
		}
	}
	return nil
}
