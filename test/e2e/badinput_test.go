package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	kruisev1beta1 "github.com/openkruise/kruise-api/apps/v1beta1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/internal/controller/raycluster"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/validation"
)

type badInput struct {
	name   string
	mutate func(*rayv1.RayCluster)
	// want is a substring of the admission error (rejected cases) or of the RayClusterSpecValid message.
	want string
}

func group(rc *rayv1.RayCluster) *rayv1.WorkerGroupSpec { return &rc.Spec.WorkerGroupSpecs[0] }

func v2() *rayv1.AutoscalerVersion { v := rayv1.AutoscalerVersionV2; return &v }

// Inputs the API server rejects at admission, each with a message that names the field.
var rejectedAtAdmission = []badInput{
	{"duplicate group names", func(rc *rayv1.RayCluster) {
		rc.Spec.WorkerGroupSpecs = append(rc.Spec.WorkerGroupSpecs, *group(rc).DeepCopy())
	}, "workerGroupSpecs[].groupName must be unique"},
	{"negative replicas", func(rc *rayv1.RayCluster) { group(rc).Replicas = ptr.To[int32](-1) }, "spec.workerGroupSpecs[0].replicas"},
	{"negative minReplicas", func(rc *rayv1.RayCluster) { group(rc).MinReplicas = ptr.To[int32](-1) }, "spec.workerGroupSpecs[0].minReplicas"},
	{"negative maxReplicas", func(rc *rayv1.RayCluster) { group(rc).MaxReplicas = ptr.To[int32](-1) }, "spec.workerGroupSpecs[0].maxReplicas"},
	{"min greater than max", func(rc *rayv1.RayCluster) { group(rc).MinReplicas = ptr.To[int32](9) }, "minReplicas must be less than or equal"},
	{"negative numOfHosts", func(rc *rayv1.RayCluster) { group(rc).NumOfHosts = -1 }, "spec.workerGroupSpecs[0].numOfHosts"},
	{"name of 54 characters", func(rc *rayv1.RayCluster) { rc.Name = "n" + strings.Repeat("a", 53) }, "metadata.name must be no more than 53 characters"},
	{"name with a dot", func(rc *rayv1.RayCluster) { rc.Name = "my.cluster" }, "metadata.name must be a valid DNS-1035 label"},
	{"name starting with a digit", func(rc *rayv1.RayCluster) { rc.Name = "1cluster" }, "metadata.name must be a valid DNS-1035 label"},
	{"empty group name", func(rc *rayv1.RayCluster) { group(rc).GroupName = "" }, "spec.workerGroupSpecs[0].groupName"},
	{"group name of 64 characters", func(rc *rayv1.RayCluster) { group(rc).GroupName = strings.Repeat("g", 64) }, "spec.workerGroupSpecs[0].groupName"},
	{"invalid managedBy", func(rc *rayv1.RayCluster) { rc.Spec.ManagedBy = ptr.To("example.com/other") }, "the managedBy field value must be either"},
	{"head without containers", func(rc *rayv1.RayCluster) { rc.Spec.HeadGroupSpec.Template.Spec.Containers = nil }, "spec.headGroupSpec.template.spec.containers"},
	{"worker without containers", func(rc *rayv1.RayCluster) { group(rc).Template.Spec.Containers = nil }, "spec.workerGroupSpecs[0].template.spec.containers"},
	{"201 worker groups", func(rc *rayv1.RayCluster) {
		base := *group(rc)
		rc.Spec.WorkerGroupSpecs = nil
		for i := 0; i < 201; i++ {
			g := *base.DeepCopy()
			g.GroupName = fmt.Sprintf("g%d", i)
			rc.Spec.WorkerGroupSpecs = append(rc.Spec.WorkerGroupSpecs, g)
		}
	}, "spec.workerGroupSpecs"},
	{"invalid upgrade strategy", func(rc *rayv1.RayCluster) {
		t := rayv1.RayClusterUpgradeType("Sometimes")
		rc.Spec.UpgradeStrategy = &rayv1.RayClusterUpgradeStrategy{Type: &t}
	}, "spec.upgradeStrategy.type"},
	{"invalid autoscaler version", func(rc *rayv1.RayCluster) {
		v := rayv1.AutoscalerVersion("v3")
		rc.Spec.AutoscalerOptions = &rayv1.AutoscalerOptions{Version: &v}
	}, "spec.autoscalerOptions.version"},
	{"invalid upscaling mode", func(rc *rayv1.RayCluster) {
		m := rayv1.UpscalingMode("Reckless")
		rc.Spec.AutoscalerOptions = &rayv1.AutoscalerOptions{UpscalingMode: &m}
	}, "spec.autoscalerOptions.upscalingMode"},
}

// Inputs the CRD accepts but kray cannot run: reported in RayClusterSpecValid=False and an
// InvalidRayClusterSpec event, with nothing created. The last ones pass the CRD (which embeds pod templates
// without their full validation) and are caught by kray's dry run through Kubernetes' and Kruise's admission.
var reportedByController = []badInput{
	{"group name that is not a label value (found by fuzzing)", func(rc *rayv1.RayCluster) { group(rc).GroupName = "cpu workers" }, `worker group name "cpu workers" cannot be used as the ray.io/group pod label`},
	{"GCS FT annotation and options together", func(rc *rayv1.RayCluster) {
		rc.Annotations = map[string]string{"ray.io/ft-enabled": "true"}
		rc.Spec.GcsFaultToleranceOptions = &rayv1.GcsFaultToleranceOptions{RedisAddress: "redis:6379"}
	}, "ray.io/ft-enabled annotation and GcsFaultToleranceOptions are both set"},
	{"rocksdb backend with a Redis address", func(rc *rayv1.RayCluster) {
		rc.Spec.GcsFaultToleranceOptions = &rayv1.GcsFaultToleranceOptions{Backend: rayv1.GcsFTBackendRocksDB, RedisAddress: "redis:6379"}
	}, "cannot set GcsFaultToleranceOptions.RedisAddress when backend is 'rocksdb'"},
	{"token auth on Ray older than 2.52", func(rc *rayv1.RayCluster) {
		rc.Spec.RayVersion = "2.46.0"
		rc.Spec.AuthOptions = &rayv1.AuthOptions{Mode: rayv1.AuthModeToken}
	}, "authOptions.mode is 'token' but minimum Ray version is 2.52.0, got 2.46.0"},
	{"network policy ingress rules where ingress is not restricted", func(rc *rayv1.RayCluster) {
		rc.Spec.NetworkPolicy = &rayv1.NetworkPolicyConfig{Mode: ptr.To(rayv1.NetworkPolicyDenyAllEgress),
			Head: &rayv1.NetworkPolicyRules{IngressRules: []networkingv1.NetworkPolicyIngressRule{{}}}}
	}, `networkPolicy.head.ingressRules cannot be set when mode is "DenyAllEgress" (ingress is not restricted)`},
	{"a history collector given a variable the operator sets", func(rc *rayv1.RayCluster) {
		rc.Spec.HistoryServerOptions = &rayv1.HistoryServerOptions{CollectorOptions: &rayv1.CollectorOptions{Image: ptr.To("collector:1"),
			Env: []corev1.EnvVar{{Name: "STORAGE_BACKEND", Value: "S3"}, {Name: "S3_REGION", Value: "eu"}, {Name: "POD_IP", Value: "10.0.0.1"}}}}
	}, "historyServerOptions.collectorOptions.env must not contain POD_IP"},
	{"network policy rules for a group that does not exist", func(rc *rayv1.RayCluster) {
		rc.Spec.NetworkPolicy = &rayv1.NetworkPolicyConfig{WorkerGroups: []rayv1.WorkerGroupNetworkPolicyRules{{GroupName: "nosuchgroup"}}}
	}, `networkPolicy.workerGroups["nosuchgroup"] does not match any group name in workerGroupSpecs`},
	{"idleTimeoutSeconds without autoscaler v2", func(rc *rayv1.RayCluster) { group(rc).IdleTimeoutSeconds = ptr.To[int32](30) }, "idleTimeoutSeconds is set, but autoscaler v2 is not enabled"},
	{"resources in rayStartParams and in the group", func(rc *rayv1.RayCluster) {
		group(rc).RayStartParams = map[string]string{"num-cpus": "1"}
		group(rc).Resources = map[string]string{"cpu": "1"}
	}, "resource fields should not be set in both rayStartParams and Resources for workergroup group"},
	{"labels in rayStartParams", func(rc *rayv1.RayCluster) { group(rc).RayStartParams = map[string]string{"labels": "a=b"} }, "rayStartParams['labels'] is not supported"},
	{"invalid group resource quantity", func(rc *rayv1.RayCluster) { group(rc).Resources = map[string]string{"cpu": "lots"} }, `resources["cpu"] = "lots" is not a valid quantity`},
	{"autoscaler v2 with worker restartPolicy Always", func(rc *rayv1.RayCluster) {
		rc.Spec.EnableInTreeAutoscaling = ptr.To(true)
		rc.Spec.AutoscalerOptions = &rayv1.AutoscalerOptions{Version: v2()}
		group(rc).Template.Spec.RestartPolicy = corev1.RestartPolicyAlways
	}, "restartPolicy for worker group workergroup should be Never or unset"},
	{"autoscaler v2 env without autoscaling", func(rc *rayv1.RayCluster) {
		rc.Spec.HeadGroupSpec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "RAY_enable_autoscaler_v2", Value: "1"}}
	}, "enableInTreeAutoscaling is not true"},
	{"autoscaler version set twice", func(rc *rayv1.RayCluster) {
		rc.Spec.EnableInTreeAutoscaling = ptr.To(true)
		rc.Spec.AutoscalerOptions = &rayv1.AutoscalerOptions{Version: v2()}
		rc.Spec.HeadGroupSpec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "RAY_enable_autoscaler_v2", Value: "1"}}
	}, "not both"},
	{"suspended group with autoscaling", func(rc *rayv1.RayCluster) {
		rc.Spec.EnableInTreeAutoscaling = ptr.To(true)
		group(rc).Suspend = ptr.To(true)
	}, "cannot be suspended with Autoscaler enabled"},
	{"reserved autoscaler env", func(rc *rayv1.RayCluster) {
		rc.Spec.EnableInTreeAutoscaling = ptr.To(true)
		rc.Spec.AutoscalerOptions = &rayv1.AutoscalerOptions{Env: []corev1.EnvVar{{Name: "KUBERAY_GEN_AUTOSCALER_START_CMD", Value: "x"}}}
	}, "KUBERAY_GEN_AUTOSCALER_START_CMD"},
	{"negative autoscaler idle timeout", func(rc *rayv1.RayCluster) {
		rc.Spec.EnableInTreeAutoscaling = ptr.To(true)
		rc.Spec.AutoscalerOptions = &rayv1.AutoscalerOptions{IdleTimeoutSeconds: ptr.To[int32](-5)}
	}, "autoscalerOptions.idleTimeoutSeconds must be non-negative"},
	{"invalid image pull policy", func(rc *rayv1.RayCluster) { group(rc).Template.Spec.Containers[0].ImagePullPolicy = "Sometimes" }, "imagePullPolicy"},
	{"activeDeadlineSeconds, which Kruise refuses", func(rc *rayv1.RayCluster) { group(rc).Template.Spec.ActiveDeadlineSeconds = ptr.To[int64](60) }, "activeDeadlineSeconds"},
	{"invalid container port", func(rc *rayv1.RayCluster) {
		group(rc).Template.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: "bad", ContainerPort: 70000}}
	}, "containerPort"},
}

// Unusual inputs kray accepts and runs; the check says what must hold once the cluster is ready.
var acceptedAndRun = []struct {
	name    string
	mutate  func(*rayv1.RayCluster)
	workers int
	warning string // a Warning event reason that must be emitted, if any
}{
	{"restartPolicy Never", func(rc *rayv1.RayCluster) { group(rc).Template.Spec.RestartPolicy = corev1.RestartPolicyNever }, 2, validation.EventRestartPolicySubstituted},
	{"restartPolicy OnFailure", func(rc *rayv1.RayCluster) { group(rc).Template.Spec.RestartPolicy = corev1.RestartPolicyOnFailure }, 2, validation.EventRestartPolicySubstituted},
	{"restartPolicy Always", func(rc *rayv1.RayCluster) { group(rc).Template.Spec.RestartPolicy = corev1.RestartPolicyAlways }, 2, ""},
	{"numOfHosts 0 counts as 1", func(rc *rayv1.RayCluster) { group(rc).NumOfHosts = 0 }, 2, ""},
	{"replicas above max are clamped", func(rc *rayv1.RayCluster) { group(rc).Replicas = ptr.To[int32](50) }, 5, ""},
	{"name of exactly 53 characters", func(rc *rayv1.RayCluster) { rc.Name = "n" + strings.Repeat("x", 52) }, 2, ""},
	{"group name of 63 characters", func(rc *rayv1.RayCluster) { group(rc).GroupName = strings.Repeat("g", 63) }, 2, ""},
	{"huge rayStartParams", func(rc *rayv1.RayCluster) {
		group(rc).RayStartParams = map[string]string{}
		for i := 0; i < 200; i++ {
			group(rc).RayStartParams[fmt.Sprintf("system-config-%03d", i)] = strings.Repeat("v", 100)
		}
	}, 2, ""},
	{"template namespace is ignored", func(rc *rayv1.RayCluster) { group(rc).Template.Namespace = "somewhere-else" }, 2, ""},
	{"head with the Ray container second", func(rc *rayv1.RayCluster) {
		head := &rc.Spec.HeadGroupSpec.Template.Spec
		head.Containers = append([]corev1.Container{{Name: "sidecar", Image: "busybox:1.36"}}, head.Containers...)
	}, 2, validation.EventRayContainerNotFirst},
	{"100 worker groups", func(rc *rayv1.RayCluster) {
		base := *group(rc)
		rc.Spec.WorkerGroupSpecs = nil
		for i := 0; i < 100; i++ {
			g := *base.DeepCopy()
			g.GroupName = fmt.Sprintf("g%03d", i)
			g.Replicas, g.MinReplicas = ptr.To[int32](0), ptr.To[int32](0)
			rc.Spec.WorkerGroupSpecs = append(rc.Spec.WorkerGroupSpecs, g)
		}
	}, 0, ""},
	{"tiny memory quantity", func(rc *rayv1.RayCluster) {
		group(rc).Template.Spec.Containers[0].Resources.Limits[corev1.ResourceMemory] = resource.MustParse("1")
		group(rc).Template.Spec.Containers[0].Resources.Requests[corev1.ResourceMemory] = resource.MustParse("1")
	}, 2, ""},
}

func badSample(t *testing.T, ns, name string, mutate func(*rayv1.RayCluster)) *rayv1.RayCluster {
	rc := loadSample(t, "ray-cluster.sample.yaml", ns)
	rc.Name = name
	mutate(rc)
	return rc
}

func noWorkloads(g Gomega, ns, cluster string) {
	sets := &kruisev1alpha1.CloneSetList{}
	g.Expect(k8s.List(context.Background(), sets, client.InNamespace(ns), client.MatchingLabels{constants.LabelCluster: cluster})).To(Succeed())
	g.Expect(sets.Items).To(BeEmpty())
	sts := &kruisev1beta1.StatefulSetList{}
	g.Expect(k8s.List(context.Background(), sts, client.InNamespace(ns), client.MatchingLabels{constants.LabelCluster: cluster})).To(Succeed())
	g.Expect(sts.Items).To(BeEmpty())
	svcs := &corev1.ServiceList{}
	g.Expect(k8s.List(context.Background(), svcs, client.InNamespace(ns), client.MatchingLabels{constants.LabelCluster: cluster})).To(Succeed())
	g.Expect(svcs.Items).To(BeEmpty())
}

func TestBadInputRejectedAtAdmission(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	for i, tc := range rejectedAtAdmission {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			rc := badSample(t, ns, fmt.Sprintf("rejected-%d", i), tc.mutate)
			err := k8s.Create(context.Background(), rc)
			g.Expect(err).To(HaveOccurred())
			g.Expect(err.Error()).To(ContainSubstring(tc.want))
			noWorkloads(g, ns, rc.Name)
		})
	}
	t.Run("unknown field under strict validation", func(t *testing.T) {
		g := NewWithT(t)
		obj := unstructuredSample(t, ns, "rejected-unknown")
		g.Expect(unstructured.SetNestedField(obj.Object, "yes", "spec", "notAField")).To(Succeed())
		err := k8s.Create(context.Background(), obj, client.FieldValidation(metav1.FieldValidationStrict))
		g.Expect(err).To(HaveOccurred())
		g.Expect(err.Error()).To(ContainSubstring(`unknown field "spec.notAField"`))
	})
	t.Run("replicas beyond int32", func(t *testing.T) {
		g := NewWithT(t)
		obj := unstructuredSample(t, ns, "rejected-overflow")
		groups, _, _ := unstructured.NestedSlice(obj.Object, "spec", "workerGroupSpecs")
		groups[0].(map[string]any)["replicas"] = int64(1) << 40
		g.Expect(unstructured.SetNestedSlice(obj.Object, groups, "spec", "workerGroupSpecs")).To(Succeed())
		err := k8s.Create(context.Background(), obj)
		g.Expect(err).To(HaveOccurred())
		g.Expect(err.Error()).To(ContainSubstring("replicas"))
	})
}

func unstructuredSample(t *testing.T, ns, name string) *unstructured.Unstructured {
	t.Helper()
	rc := loadSample(t, "ray-cluster.sample.yaml", ns)
	rc.Name = name
	rc.APIVersion, rc.Kind = rayv1.GroupVersion.String(), "RayCluster"
	m, err := runtimeToUnstructured(rc)
	if err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: m}
}

func TestBadInputReportedByController(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	clusters := make([]*rayv1.RayCluster, len(reportedByController))
	for i, tc := range reportedByController {
		clusters[i] = create(t, badSample(t, ns, fmt.Sprintf("reported-%d", i), tc.mutate))
	}
	for i, tc := range reportedByController {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			rc := clusters[i]
			g.Eventually(func(g Gomega) {
				c := condition(get(g, rc), constants.ConditionSpecValid)
				g.Expect(c).NotTo(BeNil())
				g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
				g.Expect(c.Message).To(ContainSubstring(tc.want))
				g.Expect(eventMessages(g, rc, raycluster.EventInvalidSpec)).To(ContainElement(ContainSubstring(tc.want)))
			}, readyTimeout, poll).Should(Succeed())
			noWorkloads(g, ns, rc.Name)
		})
	}
	// No hot loop: an invalid spec is reported, not retried.
	g := NewWithT(t)
	g.Consistently(func(g Gomega) {
		for _, rc := range clusters {
			g.Expect(eventCount(g, rc, raycluster.EventInvalidSpec)).To(BeNumerically("<=", 3), "cluster %s", rc.Name)
		}
	}, 3*time.Second, 500*time.Millisecond).Should(Succeed())
}

func TestUnusualInputAcceptedAndRun(t *testing.T) {
	ns := namespace(t)
	clusters := make([]*rayv1.RayCluster, len(acceptedAndRun))
	for i, tc := range acceptedAndRun {
		rc := badSample(t, ns, fmt.Sprintf("unusual-%d", i), tc.mutate)
		if strings.HasPrefix(tc.name, "name of exactly") {
			rc.Name = fmt.Sprintf("u%d", i) + strings.Repeat("x", 53-len(fmt.Sprintf("u%d", i)))
		}
		clusters[i] = create(t, rc)
	}
	for i, tc := range acceptedAndRun {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			rc := clusters[i]
			waitReady(t, rc, tc.workers)
			if tc.warning != "" {
				g.Eventually(func(g Gomega) { g.Expect(eventMessages(g, rc, tc.warning)).NotTo(BeEmpty()) }, readyTimeout, poll).Should(Succeed())
			}
			for _, p := range clusterPods(g, rc) {
				g.Expect(p.Namespace).To(Equal(ns))
			}
		})
	}
}
