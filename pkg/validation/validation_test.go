package validation

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/component-base/featuregate"
	"k8s.io/utils/ptr"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/features"
)

func cluster(mutate ...func(*rayv1.RayCluster)) *rayv1.RayCluster {
	rc := &rayv1.RayCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "rc", Namespace: "ns"},
		Spec: rayv1.RayClusterSpec{
			HeadGroupSpec: rayv1.HeadGroupSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "ray-head"}}}}},
			WorkerGroupSpecs: []rayv1.WorkerGroupSpec{{
				GroupName: "g", MinReplicas: ptr.To[int32](0), MaxReplicas: ptr.To[int32](3), Replicas: ptr.To[int32](1),
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "ray-worker"}}}},
			}},
		},
	}
	for _, m := range mutate {
		m(rc)
	}
	return rc
}

func rolling(maxUnavailable, partition *intstr.IntOrString) *rayv1.RayCluster {
	return cluster(func(rc *rayv1.RayCluster) {
		rc.Spec.WorkerGroupSpecs[0].RollingUpdate = &rayv1.WorkerGroupRollingUpdate{MaxUnavailable: maxUnavailable, Partition: partition}
	})
}

func surging(maxUnavailable *intstr.IntOrString, maxSurge intstr.IntOrString) *rayv1.RayCluster {
	return cluster(func(rc *rayv1.RayCluster) {
		rc.Spec.WorkerGroupSpecs[0].RollingUpdate = &rayv1.WorkerGroupRollingUpdate{MaxUnavailable: maxUnavailable, MaxSurge: &maxSurge}
	})
}

func TestSpec(t *testing.T) {
	tests := []struct {
		name    string
		rc      *rayv1.RayCluster
		wantErr string
	}{
		{"valid", cluster(), ""},
		{"head Service with external IPs", cluster(func(rc *rayv1.RayCluster) {
			rc.Spec.HeadGroupSpec.HeadService = &corev1.Service{Spec: corev1.ServiceSpec{ExternalIPs: []string{"10.0.0.1"}}}
		}), "headGroupSpec.headService.spec.externalIPs is not allowed"},
		{"head Service of type ExternalName", cluster(func(rc *rayv1.RayCluster) {
			rc.Spec.HeadGroupSpec.HeadService = &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "dashboard.other.svc"}}
		}), "headGroupSpec.headService.spec.type ExternalName is not allowed"},
		{"head Service with an external name", cluster(func(rc *rayv1.RayCluster) {
			rc.Spec.HeadGroupSpec.HeadService = &corev1.Service{Spec: corev1.ServiceSpec{ExternalName: "dashboard.other.svc"}}
		}), "headGroupSpec.headService.spec.externalName is not allowed"},
		{"serviceType ExternalName", cluster(func(rc *rayv1.RayCluster) {
			rc.Spec.HeadGroupSpec.ServiceType = corev1.ServiceTypeExternalName
		}), "headGroupSpec.serviceType ExternalName is not allowed"},
		{"head Service of type LoadBalancer", cluster(func(rc *rayv1.RayCluster) {
			rc.Spec.HeadGroupSpec.HeadService = &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer}}
		}), ""},
		{"head disruption budget", cluster(func(rc *rayv1.RayCluster) {
			rc.Annotations = map[string]string{constants.AnnotationHeadDisruptionBudget: "true"}
		}), ""},
		{"head disruption budget not true", cluster(func(rc *rayv1.RayCluster) {
			rc.Annotations = map[string]string{constants.AnnotationHeadDisruptionBudget: "yes"}
		}), `annotation kray.io/head-disruption-budget must be "true" or absent, got "yes"`},
		{"image prepull off", cluster(func(rc *rayv1.RayCluster) {
			rc.Annotations = map[string]string{constants.AnnotationImagePrepull: "false"}
		}), ""},
		{"image prepull not true", cluster(func(rc *rayv1.RayCluster) {
			rc.Annotations = map[string]string{constants.AnnotationImagePrepull: "on"}
		}), `annotation kray.io/image-prepull must be "true", "false" or absent, got "on"`},
		{"worker healing off", cluster(func(rc *rayv1.RayCluster) {
			rc.Annotations = map[string]string{constants.AnnotationWorkerHealing: "false"}
		}), ""},
		{"worker healing neither true nor false", cluster(func(rc *rayv1.RayCluster) {
			rc.Annotations = map[string]string{constants.AnnotationWorkerHealing: "off"}
		}), `annotation kray.io/worker-healing must be "true", "false" or absent, got "off"`},
		{"head without containers", cluster(func(rc *rayv1.RayCluster) { rc.Spec.HeadGroupSpec.Template.Spec.Containers = nil }), "headGroupSpec should have at least one container"},
		{"worker without containers", cluster(func(rc *rayv1.RayCluster) { rc.Spec.WorkerGroupSpecs[0].Template.Spec.Containers = nil }), "workerGroupSpec should have at least one container"},
		{"duplicate groups", cluster(func(rc *rayv1.RayCluster) {
			rc.Spec.WorkerGroupSpecs = append(rc.Spec.WorkerGroupSpecs, rc.Spec.WorkerGroupSpecs[0])
		}), "worker group names must be unique"},
		{"min > max", cluster(func(rc *rayv1.RayCluster) { rc.Spec.WorkerGroupSpecs[0].MinReplicas = ptr.To[int32](5) }), "minReplicas 5 greater than maxReplicas 3"},
		{"negative min", cluster(func(rc *rayv1.RayCluster) { rc.Spec.WorkerGroupSpecs[0].MinReplicas = ptr.To[int32](-1) }), "negative minReplicas -1"},
		{"missing max without autoscaling", cluster(func(rc *rayv1.RayCluster) { rc.Spec.WorkerGroupSpecs[0].MaxReplicas = nil }), "must set both minReplicas and maxReplicas"},
		{"resources in both places", cluster(func(rc *rayv1.RayCluster) {
			rc.Spec.HeadGroupSpec.RayStartParams = map[string]string{"num-cpus": "1"}
			rc.Spec.HeadGroupSpec.Resources = map[string]string{"cpu": "1"}
		}), "resource fields should not be set in both rayStartParams and Resources for Head group"},
		{"invalid quantity", cluster(func(rc *rayv1.RayCluster) { rc.Spec.WorkerGroupSpecs[0].Resources = map[string]string{"cpu": "lots"} }), `resources["cpu"] = "lots" is not a valid quantity`},
		{"labels param", cluster(func(rc *rayv1.RayCluster) {
			rc.Spec.WorkerGroupSpecs[0].RayStartParams = map[string]string{"labels": "a=b"}
		}), "rayStartParams['labels'] is not supported for g group"},
		{"idle timeout without v2", cluster(func(rc *rayv1.RayCluster) { rc.Spec.WorkerGroupSpecs[0].IdleTimeoutSeconds = ptr.To[int32](10) }), "idleTimeoutSeconds is set, but autoscaler v2 is not enabled"},
		{"v2 with worker restartPolicy Always", cluster(func(rc *rayv1.RayCluster) {
			rc.Spec.EnableInTreeAutoscaling = ptr.To(true)
			v2 := rayv1.AutoscalerVersionV2
			rc.Spec.AutoscalerOptions = &rayv1.AutoscalerOptions{Version: &v2}
			rc.Spec.WorkerGroupSpecs[0].Template.Spec.RestartPolicy = corev1.RestartPolicyAlways
		}), "restartPolicy for worker group g should be Never or unset when using autoscaler V2"},
		{"v2 env without autoscaling", cluster(func(rc *rayv1.RayCluster) {
			rc.Spec.HeadGroupSpec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "RAY_enable_autoscaler_v2", Value: "1"}}
		}), "enableInTreeAutoscaling is not true"},
		{"suspended group with autoscaling", cluster(func(rc *rayv1.RayCluster) {
			rc.Spec.EnableInTreeAutoscaling = ptr.To(true)
			rc.Spec.WorkerGroupSpecs[0].Suspend = ptr.To(true)
		}), "cannot be suspended with Autoscaler enabled"},
		{"ft annotation and options", cluster(func(rc *rayv1.RayCluster) {
			rc.Annotations = map[string]string{"ray.io/ft-enabled": "true"}
			rc.Spec.GcsFaultToleranceOptions = &rayv1.GcsFaultToleranceOptions{RedisAddress: "redis:6379"}
		}), "ray.io/ft-enabled annotation and GcsFaultToleranceOptions are both set"},
		{"redis address env without ft", cluster(func(rc *rayv1.RayCluster) {
			rc.Spec.HeadGroupSpec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "RAY_REDIS_ADDRESS", Value: "r:1"}}
		}), "RAY_REDIS_ADDRESS is set which implicitly enables GCS fault tolerance"},
		{"redis-password param with options", cluster(func(rc *rayv1.RayCluster) {
			rc.Spec.GcsFaultToleranceOptions = &rayv1.GcsFaultToleranceOptions{RedisAddress: "redis:6379"}
			rc.Spec.HeadGroupSpec.RayStartParams = map[string]string{"redis-password": "x"}
		}), "cannot set `redis-password` in rayStartParams"},
		{"rocksdb with the gate off", cluster(func(rc *rayv1.RayCluster) {
			rc.Spec.GcsFaultToleranceOptions = &rayv1.GcsFaultToleranceOptions{Backend: rayv1.GcsFTBackendRocksDB}
		}), "the embedded RocksDB GCS fault tolerance backend (GcsFaultToleranceOptions.Backend: 'rocksdb') requires the GCSFaultToleranceEmbeddedStorage feature gate to be enabled"},
		{"redis with storage", cluster(func(rc *rayv1.RayCluster) {
			rc.Spec.GcsFaultToleranceOptions = &rayv1.GcsFaultToleranceOptions{RedisAddress: "redis:6379", Storage: &rayv1.GcsEmbeddedStorage{}}
		}), "cannot set GcsFaultToleranceOptions.Storage when backend is 'redis'"},
		{"redis username env", cluster(func(rc *rayv1.RayCluster) {
			rc.Spec.HeadGroupSpec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "REDIS_USERNAME", Value: "u"}}
		}), "cannot set redis username in rayStartParams or environment variables"},
		{"token auth without rayVersion", cluster(func(rc *rayv1.RayCluster) {
			rc.Spec.AuthOptions = &rayv1.AuthOptions{Mode: rayv1.AuthModeToken}
		}), "RayVersion was not specified"},
		{"token auth with old Ray", cluster(func(rc *rayv1.RayCluster) {
			rc.Spec.RayVersion = "2.51.0"
			rc.Spec.AuthOptions = &rayv1.AuthOptions{Mode: rayv1.AuthModeToken}
		}), "minimum Ray version is 2.52.0, got 2.51.0"},
		{"k8s token auth with a secret", cluster(func(rc *rayv1.RayCluster) {
			rc.Spec.RayVersion = "2.55.0"
			rc.Spec.AuthOptions = &rayv1.AuthOptions{Mode: rayv1.AuthModeToken, EnableK8sTokenAuth: ptr.To(true), SecretName: ptr.To("s")}
		}), "authOptions.enableK8sTokenAuth is enabled and authOptions.secretName is also set"},
		{"k8s token auth without token mode", cluster(func(rc *rayv1.RayCluster) {
			rc.Spec.AuthOptions = &rayv1.AuthOptions{EnableK8sTokenAuth: ptr.To(true)}
		}), "authOptions.mode not set to 'token'"},
		{"token auth valid", cluster(func(rc *rayv1.RayCluster) {
			rc.Spec.RayVersion = "2.52.0"
			rc.Spec.AuthOptions = &rayv1.AuthOptions{Mode: rayv1.AuthModeToken}
			rc.Spec.GcsFaultToleranceOptions = &rayv1.GcsFaultToleranceOptions{RedisAddress: "redis:6379"}
		}), ""},
		{"network policy", cluster(func(rc *rayv1.RayCluster) { rc.Spec.NetworkPolicy = &rayv1.NetworkPolicyConfig{} }), "spec.networkPolicy requires the RayClusterNetworkPolicy feature gate"},
		{"group name not a label value", cluster(func(rc *rayv1.RayCluster) { rc.Spec.WorkerGroupSpecs[0].GroupName = " " }), `worker group name " " cannot be used as the ray.io/group pod label`},
		{"rolling update valid", rolling(ptr.To(intstr.FromString("100%")), ptr.To(intstr.FromInt32(0))), ""},
		{"maxUnavailable 0 without a surge", rolling(ptr.To(intstr.FromInt32(0)), nil), "rollingUpdate.maxUnavailable can be 0 only with a maxSurge above 0"},
		{"maxUnavailable 0% without a surge", rolling(ptr.To(intstr.FromString("0%")), nil), "rollingUpdate.maxUnavailable can be 0 only with a maxSurge above 0"},
		{"maxUnavailable 0 with a surge of 0", surging(ptr.To(intstr.FromInt32(0)), intstr.FromString("0%")), "rollingUpdate.maxUnavailable can be 0 only with a maxSurge above 0"},
		{"maxUnavailable 0 with a surge", surging(ptr.To(intstr.FromInt32(0)), intstr.FromInt32(1)), ""},
		{"a surge alone", surging(nil, intstr.FromString("50%")), ""},
		{"maxUnavailable negative", rolling(ptr.To(intstr.FromInt32(-1)), nil), "rollingUpdate.maxUnavailable must be at least 0, got -1"},
		{"maxSurge negative", surging(nil, intstr.FromInt32(-1)), "rollingUpdate.maxSurge must be at least 0, got -1"},
		{"maxSurge over 100%", surging(nil, intstr.FromString("150%")), `maxSurge must be an integer or a percentage between 0% and 100%, got "150%"`},
		{"maxUnavailable not a percentage", rolling(ptr.To(intstr.FromString("two")), nil), `got "two"`},
		{"partition negative", rolling(nil, ptr.To(intstr.FromInt32(-1))), "rollingUpdate.partition must be at least 0, got -1"},
		{"partition over 100%", rolling(nil, ptr.To(intstr.FromString("101%"))), `partition must be an integer or a percentage between 0% and 100%, got "101%"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := Spec(tc.rc)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error = %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestMetadata(t *testing.T) {
	for name, want := range map[string]string{
		"ok":                    "",
		strings.Repeat("a", 53): "",
		strings.Repeat("a", 54): "no more than 53 characters",
		"1-starts-with-digit":   "valid DNS1035 label",
		"has.dot":               "valid DNS1035 label",
	} {
		err := Metadata(&rayv1.RayCluster{ObjectMeta: metav1.ObjectMeta{Name: name}})
		if (want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), want)) {
			t.Errorf("Metadata(%q) = %v, want %q", name, err, want)
		}
	}
}

// spec.tlsOptions as KubeRay v1.7 checks it, in its words: refused while the gate is off (even enabled:
// false); when enabled, refused without cert-manager, and for Ray's TLS variables or the certificate volume's
// name or path on a Ray container or the autoscaler, which kray manages.
func TestTLSOptions(t *testing.T) {
	on := gatesOn(t, "RayClusterMTLS=true")
	served := ClusterOptions{Gates: on, CertManager: true}
	enabled := func(rc *rayv1.RayCluster) { rc.Spec.TLSOptions = &rayv1.TLSOptions{Enabled: ptr.To(true)} }
	for _, tc := range []struct {
		name string
		rc   *rayv1.RayCluster
		opts ClusterOptions
		want string
	}{
		{"gate off", cluster(enabled), ClusterOptions{CertManager: true},
			"spec.tlsOptions requires the RayClusterMTLS feature gate to be enabled"},
		{"gate off, enabled false", cluster(func(rc *rayv1.RayCluster) { rc.Spec.TLSOptions = &rayv1.TLSOptions{} }), ClusterOptions{},
			"spec.tlsOptions requires the RayClusterMTLS feature gate to be enabled"},
		{"enabled false needs no cert-manager", cluster(func(rc *rayv1.RayCluster) { rc.Spec.TLSOptions = &rayv1.TLSOptions{Enabled: ptr.To(false)} }),
			ClusterOptions{Gates: on}, ""},
		{"no cert-manager", cluster(enabled), ClusterOptions{Gates: on},
			"tlsOptions requires cert-manager, but cert-manager is not installed"},
		{"served", cluster(enabled), served, ""},
		{"head env", cluster(enabled, func(rc *rayv1.RayCluster) {
			rc.Spec.HeadGroupSpec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "RAY_TLS_CA_CERT", Value: "/x"}}
		}), served, "cannot set RAY_TLS_CA_CERT environment variable in head Pod when tlsOptions is set - the operator manages TLS configuration automatically"},
		{"worker env", cluster(enabled, func(rc *rayv1.RayCluster) {
			rc.Spec.WorkerGroupSpecs[0].Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "RAY_USE_TLS", Value: "0"}}
		}), served, `cannot set RAY_USE_TLS environment variable in worker group "g" when tlsOptions is set - the operator manages TLS configuration automatically`},
		{"head mount name", cluster(enabled, func(rc *rayv1.RayCluster) {
			rc.Spec.HeadGroupSpec.Template.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "ray-tls", MountPath: "/certs"}}
		}), served, `cannot use volume mount named "ray-tls" in head Pod when tlsOptions is set - the operator manages TLS configuration automatically`},
		{"worker mount path", cluster(enabled, func(rc *rayv1.RayCluster) {
			rc.Spec.WorkerGroupSpecs[0].Template.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "mine", MountPath: "/etc/ray/tls"}}
		}), served, `cannot use volume mount at path "/etc/ray/tls" in worker group "g" when tlsOptions is set - the operator manages TLS configuration automatically`},
		{"autoscaler env", cluster(enabled, func(rc *rayv1.RayCluster) {
			rc.Spec.AutoscalerOptions = &rayv1.AutoscalerOptions{Env: []corev1.EnvVar{{Name: "RAY_TLS_SERVER_KEY"}}}
		}), served, "cannot set RAY_TLS_SERVER_KEY environment variable in autoscalerOptions.env when tlsOptions is set - the operator manages TLS configuration for the autoscaler automatically"},
		{"autoscaler mount", cluster(enabled, func(rc *rayv1.RayCluster) {
			rc.Spec.AutoscalerOptions = &rayv1.AutoscalerOptions{VolumeMounts: []corev1.VolumeMount{{Name: "ray-tls", MountPath: "/a"}}}
		}), served, `cannot use volume mount named "ray-tls" in autoscalerOptions.volumeMounts when tlsOptions is set - the operator manages TLS configuration automatically`},
	} {
		err := SpecWith(tc.rc, tc.opts)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v, want none", tc.name, err)
		case tc.want != "" && (err == nil || err.Error() != tc.want):
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// spec.networkPolicy as KubeRay v1.7 checks it, in its words: refused while the gate is off; under the gate,
// rules only for a direction the mode restricts, group names that fit in a policy's name, and an entry of
// workerGroups only for a group that exists.
func TestNetworkPolicy(t *testing.T) {
	on := gatesOn(t, "RayClusterNetworkPolicy=true")
	ingress := []networkingv1.NetworkPolicyIngressRule{{}}
	egress := []networkingv1.NetworkPolicyEgressRule{{}}
	np := func(mode rayv1.NetworkPolicyMode, mutate func(*rayv1.NetworkPolicyConfig)) *rayv1.RayCluster {
		return cluster(func(rc *rayv1.RayCluster) {
			rc.Spec.WorkerGroupSpecs[0].GroupName = "small-group"
			rc.Spec.NetworkPolicy = &rayv1.NetworkPolicyConfig{Mode: &mode}
			mutate(rc.Spec.NetworkPolicy)
		})
	}
	group := rayv1.WorkerGroupNetworkPolicyRules{GroupName: "small-group"}
	for _, tc := range []struct {
		name string
		rc   *rayv1.RayCluster
		want string
	}{
		{"every rule under DenyAll", np(rayv1.NetworkPolicyDenyAll, func(c *rayv1.NetworkPolicyConfig) {
			c.Head = &rayv1.NetworkPolicyRules{IngressRules: ingress, EgressRules: egress}
			c.Worker = &rayv1.NetworkPolicyRules{IngressRules: ingress, EgressRules: egress}
			g := group
			g.IngressRules, g.EgressRules = ingress, egress
			c.WorkerGroups = []rayv1.WorkerGroupNetworkPolicyRules{g}
		}), ""},
		{"the mode alone", np(rayv1.NetworkPolicyDenyAllIngress, func(*rayv1.NetworkPolicyConfig) {}), ""},
		{"head ingress rules under DenyAllEgress", np(rayv1.NetworkPolicyDenyAllEgress, func(c *rayv1.NetworkPolicyConfig) {
			c.Head = &rayv1.NetworkPolicyRules{IngressRules: ingress}
		}), `networkPolicy.head.ingressRules cannot be set when mode is "DenyAllEgress" (ingress is not restricted)`},
		{"head egress rules under DenyAllIngress", np(rayv1.NetworkPolicyDenyAllIngress, func(c *rayv1.NetworkPolicyConfig) {
			c.Head = &rayv1.NetworkPolicyRules{EgressRules: egress}
		}), `networkPolicy.head.egressRules cannot be set when mode is "DenyAllIngress" (egress is not restricted)`},
		{"worker ingress rules under DenyAllEgress", np(rayv1.NetworkPolicyDenyAllEgress, func(c *rayv1.NetworkPolicyConfig) {
			c.Worker = &rayv1.NetworkPolicyRules{IngressRules: ingress}
		}), `networkPolicy.worker.ingressRules cannot be set when mode is "DenyAllEgress" (ingress is not restricted)`},
		{"worker egress rules under DenyAllIngress", np(rayv1.NetworkPolicyDenyAllIngress, func(c *rayv1.NetworkPolicyConfig) {
			c.Worker = &rayv1.NetworkPolicyRules{EgressRules: egress}
		}), `networkPolicy.worker.egressRules cannot be set when mode is "DenyAllIngress" (egress is not restricted)`},
		{"a group's egress rules under DenyAllIngress", np(rayv1.NetworkPolicyDenyAllIngress, func(c *rayv1.NetworkPolicyConfig) {
			g := group
			g.EgressRules = egress
			c.WorkerGroups = []rayv1.WorkerGroupNetworkPolicyRules{g}
		}), `networkPolicy.workerGroups["small-group"].egressRules cannot be set when mode is "DenyAllIngress" (egress is not restricted)`},
		{"an entry for no group", np(rayv1.NetworkPolicyDenyAll, func(c *rayv1.NetworkPolicyConfig) {
			c.WorkerGroups = []rayv1.WorkerGroupNetworkPolicyRules{{GroupName: "samll-group"}}
		}), `networkPolicy.workerGroups["samll-group"] does not match any group name in workerGroupSpecs`},
		{"a group name that is no DNS label", cluster(func(rc *rayv1.RayCluster) {
			rc.Spec.NetworkPolicy = &rayv1.NetworkPolicyConfig{}
			rc.Spec.WorkerGroupSpecs[0].GroupName = "GPU-Group"
		}), `worker group name "GPU-Group" must be a valid DNS1123 label when networkPolicy is enabled (it is embedded in the NetworkPolicy name): ` +
			`a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := SpecWith(tc.rc, ClusterOptions{Gates: on})
			if got := fmt.Sprint(err); (tc.want == "" && err != nil) || (tc.want != "" && got != tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
			if err := Spec(tc.rc); err == nil || err.Error() != "spec.networkPolicy requires the RayClusterNetworkPolicy feature gate to be enabled" {
				t.Fatalf("gate off: %v", err)
			}
		})
	}
}

// The RocksDB backend is served under KubeRay's GCSFaultToleranceEmbeddedStorage gate, with its own rules.
func TestRocksDBUnderItsGate(t *testing.T) {
	on := gatesOn(t, "GCSFaultToleranceEmbeddedStorage=true")
	rocksdb := func(o rayv1.GcsFaultToleranceOptions) *rayv1.RayCluster {
		return cluster(func(rc *rayv1.RayCluster) {
			o.Backend = rayv1.GcsFTBackendRocksDB
			rc.Spec.GcsFaultToleranceOptions = &o
		})
	}
	if err := SpecWith(rocksdb(rayv1.GcsFaultToleranceOptions{}), ClusterOptions{Gates: on}); err != nil {
		t.Errorf("rocksdb under its gate: %v", err)
	}
	err := SpecWith(rocksdb(rayv1.GcsFaultToleranceOptions{RedisAddress: "redis:6379"}), ClusterOptions{Gates: on})
	if err == nil || err.Error() != "cannot set GcsFaultToleranceOptions.RedisAddress when backend is 'rocksdb'" {
		t.Errorf("rocksdb with a Redis address: %v", err)
	}
}

// historyServerOptions as KubeRay v1.7 checks it, in its words.
func TestHistoryServer(t *testing.T) {
	on := gatesOn(t, "RayClusterHistoryServer=true")
	env := func(kv ...string) []corev1.EnvVar {
		var out []corev1.EnvVar
		for i := 0; i+1 < len(kv); i += 2 {
			out = append(out, corev1.EnvVar{Name: kv[i], Value: kv[i+1]})
		}
		return out
	}
	collector := func(e []corev1.EnvVar, mutate ...func(*rayv1.RayCluster)) *rayv1.RayCluster {
		return cluster(func(rc *rayv1.RayCluster) {
			rc.Spec.HistoryServerOptions = &rayv1.HistoryServerOptions{CollectorOptions: &rayv1.CollectorOptions{Image: ptr.To("collector:1"), Env: e}}
			for _, m := range mutate {
				m(rc)
			}
		})
	}
	fromSecret := corev1.EnvVar{Name: "AZURE_STORAGE_ACCOUNT_URL", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{Key: "url"}}}
	for _, tc := range []struct {
		name string
		rc   *rayv1.RayCluster
		want string
	}{
		{"GCS with its bucket", collector(env("STORAGE_BACKEND", "GCS", "GCS_BUCKET", "b")), ""},
		{"a backend in any case", collector(env("STORAGE_BACKEND", "s3", "S3_REGION", "eu")), ""},
		{"Azure by workload identity, the URL from a Secret", collector(append(env("STORAGE_BACKEND", "AZUREBLOB", "AZURE_STORAGE_AUTH_MODE", "workload_identity"), fromSecret)), ""},
		{"a backend KubeRay does not know", collector(env("STORAGE_BACKEND", "minio")), ""},
		{"no collector", cluster(func(rc *rayv1.RayCluster) { rc.Spec.HistoryServerOptions = &rayv1.HistoryServerOptions{} }),
			"historyServerOptions.collectorOptions must be set"},
		{"no image", collector(env("STORAGE_BACKEND", "GCS", "GCS_BUCKET", "b"), func(rc *rayv1.RayCluster) {
			rc.Spec.HistoryServerOptions.CollectorOptions.Image = nil
		}), "historyServerOptions.collectorOptions.image must be set"},
		{"a variable the operator sets", collector(env("STORAGE_BACKEND", "GCS", "GCS_BUCKET", "b", "RAY_ROLE", "Head")),
			"historyServerOptions.collectorOptions.env must not contain RAY_ROLE: it is managed by KubeRay and injected automatically into the collector container"},
		{"no backend", collector(nil), "STORAGE_BACKEND environment variable must be set with a literal string value in historyServerOptions.collectorOptions.env"},
		{"GCS without its bucket", collector(env("STORAGE_BACKEND", "GCS")), "GCS_BUCKET environment variable must be set when STORAGE_BACKEND is GCS"},
		{"Azure by connection string without one", collector(env("STORAGE_BACKEND", "AZUREBLOB", "AZURE_STORAGE_AUTH_MODE", "connection_string")),
			"AZURE_STORAGE_CONNECTION_STRING environment variable must be set when STORAGE_BACKEND is AZUREBLOB and AZURE_STORAGE_AUTH_MODE is connection_string"},
		{"Azure without either", collector(env("STORAGE_BACKEND", "AZUREBLOB")),
			"either AZURE_STORAGE_CONNECTION_STRING or AZURE_STORAGE_ACCOUNT_URL environment variable must be set when STORAGE_BACKEND is AZUREBLOB"},
		{"OSS without its region", collector(env("STORAGE_BACKEND", "ALIYUNOSS", "OSS_BUCKET", "b", "OSS_ENDPOINT", "e")),
			"OSS_REGION environment variable must be set when STORAGE_BACKEND is ALIYUNOSS"},
		{"a worker container of the collector's name", collector(env("STORAGE_BACKEND", "GCS", "GCS_BUCKET", "b"), func(rc *rayv1.RayCluster) {
			rc.Spec.WorkerGroupSpecs[0].Template.Spec.Containers = append(rc.Spec.WorkerGroupSpecs[0].Template.Spec.Containers, corev1.Container{Name: "ray-history-collector"})
		}), "worker group g pod template must not define a container with name 'ray-history-collector' when history server collector options are enabled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := SpecWith(tc.rc, ClusterOptions{Gates: on})
			if got := fmt.Sprint(err); (tc.want == "" && err != nil) || (tc.want != "" && got != tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
			if err := Spec(tc.rc); err == nil || err.Error() != "RayClusterHistoryServer feature gate is not enabled" {
				t.Fatalf("gate off: %v", err)
			}
		})
	}
}

// gatesOn is a feature gate with the gates of spec ("Name=true,...") set.
func gatesOn(t *testing.T, spec string) featuregate.FeatureGate {
	t.Helper()
	g := features.New()
	if err := (features.Flag{Gate: g}).Set(spec); err != nil {
		t.Fatal(err)
	}
	return g
}
