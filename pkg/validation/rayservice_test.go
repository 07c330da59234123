package validation

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/constants"
)

func rayService(mutate ...func(*rayv1.RayService)) *rayv1.RayService {
	svc := &rayv1.RayService{
		ObjectMeta: metav1.ObjectMeta{Name: "svc", Namespace: "ns"},
		Spec:       rayv1.RayServiceSpec{RayClusterSpec: cluster().Spec},
	}
	for _, m := range mutate {
		m(svc)
	}
	return svc
}

func withTimeout(v string) func(*rayv1.RayService) {
	return func(s *rayv1.RayService) {
		s.Annotations = map[string]string{constants.AnnotationInitializingTimeout: v}
	}
}

func TestRayServiceMetadata(t *testing.T) {
	tests := []struct {
		name string
		edit func(*rayv1.RayService)
		want string // "" is valid
	}{
		{"valid", func(*rayv1.RayService) {}, ""},
		{"47 characters", func(s *rayv1.RayService) { s.Name = strings.Repeat("a", 47) }, ""},
		{"48 characters", func(s *rayv1.RayService) { s.Name = strings.Repeat("a", 48) }, "RayService name should be no more than 47 characters"},
		{"not DNS-1035", func(s *rayv1.RayService) { s.Name = "1svc" }, "RayService name should be a valid DNS1035 label: [a DNS-1035 label must consist of"},
		{"timeout duration", withTimeout("5m"), ""},
		{"timeout seconds", withTimeout("300"), ""},
		{"timeout empty", withTimeout(""), ""},
		{"timeout zero duration", withTimeout("0s"), "RayService annotations is invalid: annotation ray.io/initializing-timeout must be a positive duration, got: 0s"},
		{"timeout negative seconds", withTimeout("-3"), "RayService annotations is invalid: annotation ray.io/initializing-timeout must be a positive integer (seconds), got: -3"},
		{"timeout garbage", withTimeout("soon"), "RayService annotations is invalid: annotation ray.io/initializing-timeout has invalid format: soon."},
	}
	for _, tc := range tests {
		err := RayServiceMetadata(rayService(tc.edit))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v, want valid", tc.name, err)
		case tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.want)):
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestInitializingTimeout(t *testing.T) {
	for v, want := range map[string]time.Duration{"": 0, "90s": 90 * time.Second, "2h": 2 * time.Hour, "45": 45 * time.Second} {
		got, err := InitializingTimeout(map[string]string{constants.AnnotationInitializingTimeout: v})
		if err != nil || got != want {
			t.Errorf("%q: %v, %v; want %v", v, got, err, want)
		}
	}
}

func TestRayServiceSpec(t *testing.T) {
	upgrade := func(typ rayv1.RayServiceUpgradeType, opts *rayv1.ClusterUpgradeOptions) func(*rayv1.RayService) {
		return func(s *rayv1.RayService) {
			s.Spec.UpgradeStrategy = &rayv1.RayServiceUpgradeStrategy{Type: ptr.To(typ), ClusterUpgradeOptions: opts}
		}
	}
	autoscaled := func(s *rayv1.RayService) { s.Spec.RayClusterSpec.EnableInTreeAutoscaling = ptr.To(true) }
	options := func(edit func(*rayv1.ClusterUpgradeOptions)) *rayv1.ClusterUpgradeOptions {
		o := &rayv1.ClusterUpgradeOptions{MaxSurgePercent: ptr.To[int32](100), StepSizePercent: ptr.To[int32](10), IntervalSeconds: ptr.To[int32](30), GatewayClassName: "istio"}
		if edit != nil {
			edit(o)
		}
		return o
	}
	tests := []struct {
		name        string
		edits       []func(*rayv1.RayService)
		incremental bool
		want        string // "" is valid
	}{
		{"valid", nil, false, ""},
		{"cluster spec error", []func(*rayv1.RayService){func(s *rayv1.RayService) { s.Spec.RayClusterSpec.HeadGroupSpec.Template.Spec.Containers = nil }},
			false, "headGroupSpec should have at least one container"},
		{"head service name", []func(*rayv1.RayService){func(s *rayv1.RayService) {
			s.Spec.RayClusterSpec.HeadGroupSpec.HeadService = &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "mine"}}
		}}, false, "spec.rayClusterConfig.headGroupSpec.headService.metadata.name should not be set"},
		{"serve Service with external IPs", []func(*rayv1.RayService){func(s *rayv1.RayService) {
			s.Spec.ServeService = &corev1.Service{Spec: corev1.ServiceSpec{ExternalIPs: []string{"10.0.0.1"}}}
		}}, false, "spec.serveService.spec.externalIPs is not allowed: a user's Service may not claim addresses for the nodes"},
		{"NewCluster", []func(*rayv1.RayService){upgrade(rayv1.RayServiceNewCluster, nil)}, false, ""},
		{"None", []func(*rayv1.RayService){upgrade(rayv1.RayServiceUpgradeNone, nil)}, false, ""},
		{"unknown type", []func(*rayv1.RayService){upgrade("BlueGreen", nil)}, false,
			"Spec.UpgradeStrategy.Type value BlueGreen is invalid, valid options are NewClusterWithIncrementalUpgrade, NewCluster, or None"},
		{"negative deletion delay", []func(*rayv1.RayService){func(s *rayv1.RayService) { s.Spec.RayClusterDeletionDelaySeconds = ptr.To[int32](-1) }},
			false, "Spec.RayClusterDeletionDelaySeconds should be a non-negative integer, got -1"},
		{"incremental, gate off: options not checked", []func(*rayv1.RayService){upgrade(rayv1.RayServiceNewClusterWithIncrementalUpgrade, nil)}, false, ""},
		{"incremental without the autoscaler", []func(*rayv1.RayService){upgrade(rayv1.RayServiceNewClusterWithIncrementalUpgrade, options(nil))}, true,
			"Ray Autoscaler is required for NewClusterWithIncrementalUpgrade"},
		{"incremental without options", []func(*rayv1.RayService){autoscaled, upgrade(rayv1.RayServiceNewClusterWithIncrementalUpgrade, nil)}, true,
			"ClusterUpgradeOptions are required for NewClusterWithIncrementalUpgrade"},
		{"incremental surge above 100", []func(*rayv1.RayService){autoscaled, upgrade(rayv1.RayServiceNewClusterWithIncrementalUpgrade,
			options(func(o *rayv1.ClusterUpgradeOptions) { o.MaxSurgePercent = ptr.To[int32](101) }))}, true, "maxSurgePercent must be between 0 and 100"},
		{"incremental without a step", []func(*rayv1.RayService){autoscaled, upgrade(rayv1.RayServiceNewClusterWithIncrementalUpgrade,
			options(func(o *rayv1.ClusterUpgradeOptions) { o.StepSizePercent = nil }))}, true, "stepSizePercent must be between 0 and 100"},
		{"incremental zero interval", []func(*rayv1.RayService){autoscaled, upgrade(rayv1.RayServiceNewClusterWithIncrementalUpgrade,
			options(func(o *rayv1.ClusterUpgradeOptions) { o.IntervalSeconds = ptr.To[int32](0) }))}, true, "intervalSeconds must be greater than 0"},
		{"incremental without a gateway class", []func(*rayv1.RayService){autoscaled, upgrade(rayv1.RayServiceNewClusterWithIncrementalUpgrade,
			options(func(o *rayv1.ClusterUpgradeOptions) { o.GatewayClassName = "" }))}, true, "gatewayClassName is required for NewClusterWithIncrementalUpgrade"},
		{"incremental step above surge", []func(*rayv1.RayService){autoscaled, upgrade(rayv1.RayServiceNewClusterWithIncrementalUpgrade,
			options(func(o *rayv1.ClusterUpgradeOptions) {
				o.MaxSurgePercent, o.StepSizePercent = ptr.To[int32](20), ptr.To[int32](30)
			}))}, true,
			"stepSizePercent must be less than or equal to maxSurgePercent"},
		{"incremental, valid, gate on", []func(*rayv1.RayService){autoscaled, upgrade(rayv1.RayServiceNewClusterWithIncrementalUpgrade, options(nil))}, true, ""},
		{"incremental zero step", []func(*rayv1.RayService){autoscaled, upgrade(rayv1.RayServiceNewClusterWithIncrementalUpgrade,
			options(func(o *rayv1.ClusterUpgradeOptions) { o.StepSizePercent = ptr.To[int32](0) }))}, true,
			"stepSizePercent and maxSurgePercent must be greater than 0: with 0 the upgrade never moves any traffic or capacity"},
		{"a cluster upgradeStrategy", []func(*rayv1.RayService){func(s *rayv1.RayService) {
			s.Spec.RayClusterSpec.UpgradeStrategy = &rayv1.RayClusterUpgradeStrategy{Type: ptr.To(rayv1.RayClusterRollingUpdate)}
		}}, false, "upgradeStrategy cannot be set when RayCluster is created by RayService"},
	}
	for _, tc := range tests {
		err := RayServiceSpec(rayService(tc.edits...), RayServiceOptions{IncrementalUpgrade: tc.incremental})
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v, want valid", tc.name, err)
		case tc.want != "" && (err == nil || err.Error() != tc.want):
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}
