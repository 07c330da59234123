package validation

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"k8s.io/utils/ptr"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/spec"
)

// MaxRayServiceNameLength leaves room for the "-xxxxx" suffix of the RayClusters a RayService creates.
const MaxRayServiceNameLength = MaxClusterNameLength - 6

// RayServiceOptions are the operator settings that change what a RayService spec may hold.
type RayServiceOptions struct {
	// IncrementalUpgrade is the RayServiceIncrementalUpgrade feature gate: with it on, a
	// NewClusterWithIncrementalUpgrade upgrade has its options checked as KubeRay does; with it off the
	// type acts as None, as in KubeRay.
	IncrementalUpgrade bool
	// Cluster are the settings the cluster spec is checked with.
	Cluster ClusterOptions
}

// RayServiceMetadata checks the RayService's name and its ray.io/initializing-timeout annotation; its error
// is reported with the InvalidRayServiceMetadata reason.
func RayServiceMetadata(svc *rayv1.RayService) error {
	if err := nameRules("RayService", svc.Name, MaxRayServiceNameLength); err != nil {
		return err
	}
	if _, err := InitializingTimeout(svc.Annotations); err != nil {
		return fmt.Errorf("RayService annotations is invalid: %w", err)
	}
	return nil
}

// InitializingTimeout is the ray.io/initializing-timeout annotation, a Go duration ("30m") or a number of
// seconds; 0 when it is absent or empty.
func InitializingTimeout(annotations map[string]string) (time.Duration, error) {
	const key = constants.AnnotationInitializingTimeout
	v := annotations[key]
	if v == "" {
		return 0, nil
	}
	if d, err := time.ParseDuration(v); err == nil {
		if d <= 0 {
			return 0, fmt.Errorf("annotation %s must be a positive duration, got: %s", key, v)
		}
		return d, nil
	}
	if s, err := strconv.Atoi(v); err == nil {
		if s <= 0 {
			return 0, fmt.Errorf("annotation %s must be a positive integer (seconds), got: %s", key, v)
		}
		return time.Duration(s) * time.Second, nil
	}
	return 0, fmt.Errorf("annotation %s has invalid format: %s. Expected Go duration format (e.g., '5m', '1h') or positive integer seconds", key, v)
}

// RayServiceSpec checks the spec in KubeRay's order and wording, then what kray adds; its error is reported
// with the InvalidRayServiceSpec reason.
func RayServiceSpec(svc *rayv1.RayService, opts RayServiceOptions) error {
	s := &svc.Spec
	rc := &rayv1.RayCluster{ObjectMeta: svc.ObjectMeta, Spec: s.RayClusterSpec}
	if err := SpecWith(rc, opts.Cluster); err != nil {
		return err
	}
	if head := s.RayClusterSpec.HeadGroupSpec.HeadService; head != nil && head.Name != "" {
		return errors.New("spec.rayClusterConfig.headGroupSpec.headService.metadata.name should not be set")
	}
	if err := ServiceRules("spec.serveService", s.ServeService); err != nil {
		return err
	}
	if t := upgradeType(svc); t != nil && *t != rayv1.RayServiceUpgradeNone && *t != rayv1.RayServiceNewCluster && *t != rayv1.RayServiceNewClusterWithIncrementalUpgrade {
		return fmt.Errorf("Spec.UpgradeStrategy.Type value %s is invalid, valid options are %s, %s, or %s", *t, rayv1.RayServiceNewClusterWithIncrementalUpgrade, rayv1.RayServiceNewCluster, rayv1.RayServiceUpgradeNone)
	}
	if d := s.RayClusterDeletionDelaySeconds; d != nil && *d < 0 {
		return fmt.Errorf("Spec.RayClusterDeletionDelaySeconds should be a non-negative integer, got %d", *d)
	}
	if opts.IncrementalUpgrade && ptrEq(upgradeType(svc), rayv1.RayServiceNewClusterWithIncrementalUpgrade) {
		if err := clusterUpgradeOptions(svc); err != nil {
			return err
		}
	}
	if err := clusterUpgradeStrategy(&s.RayClusterSpec, "RayService"); err != nil {
		return err
	}
	return nil
}

// clusterUpgradeOptions checks the options of an incremental upgrade, as KubeRay does with its gate on.
func clusterUpgradeOptions(svc *rayv1.RayService) error {
	rc := &rayv1.RayCluster{Spec: svc.Spec.RayClusterSpec}
	if !spec.AutoscalingEnabled(rc) {
		return errors.New("Ray Autoscaler is required for NewClusterWithIncrementalUpgrade")
	}
	o := svc.Spec.UpgradeStrategy.ClusterUpgradeOptions
	if o == nil {
		return errors.New("ClusterUpgradeOptions are required for NewClusterWithIncrementalUpgrade")
	}
	if o.MaxSurgePercent != nil && (*o.MaxSurgePercent < 0 || *o.MaxSurgePercent > 100) {
		return errors.New("maxSurgePercent must be between 0 and 100")
	}
	if o.StepSizePercent == nil || *o.StepSizePercent < 0 || *o.StepSizePercent > 100 {
		return errors.New("stepSizePercent must be between 0 and 100")
	}
	if o.StepSizePercent != nil && *o.StepSizePercent > ptr.Deref(o.MaxSurgePercent, 100) {
		return errors.New("stepSizePercent must be less than or equal to maxSurgePercent")
	}
	if o.IntervalSeconds == nil || *o.IntervalSeconds <= 0 {
		return errors.New("intervalSeconds must be greater than 0")
	}
	if o.GatewayClassName == "" {
		return errors.New("gatewayClassName is required for NewClusterWithIncrementalUpgrade")
	}
	if *o.StepSizePercent == 0 || ptr.Deref(o.MaxSurgePercent, 100) == 0 {
		return errors.New("stepSizePercent and maxSurgePercent must be greater than 0: with 0 the upgrade never moves any traffic or capacity")
	}
	return nil
}

// upgradeType is the RayService's spec.upgradeStrategy.type, nil when unset.
func upgradeType(svc *rayv1.RayService) *rayv1.RayServiceUpgradeType {
	if svc.Spec.UpgradeStrategy == nil {
		return nil
	}
	return svc.Spec.UpgradeStrategy.Type
}

func ptrEq[T comparable](p *T, v T) bool { return p != nil && *p == v }
