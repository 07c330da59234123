package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	kruisev1beta1 "github.com/openkruise/kruise-api/apps/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/names"
)

// podFieldProbe is a pod field newer than the Kubernetes libraries Kruise v1.9 is built on (k8s.io/api v0.32),
// on by default in Kubernetes 1.37: set sets it on a template, has reports whether a pod spec still carries it.
type podFieldProbe struct {
	name string
	set  func(*corev1.PodSpec)
	has  func(*corev1.PodSpec) bool
}

// probeContainer is the container the container-level probes go in, beside the Ray container.
const probeContainer = "probe"

func probeOf(spec *corev1.PodSpec) *corev1.Container {
	for i := range spec.Containers {
		if spec.Containers[i].Name == probeContainer {
			return &spec.Containers[i]
		}
	}
	return nil
}

var newerPodFields = []podFieldProbe{
	{
		name: "spec.hostnameOverride (1.34, GA in 1.37)",
		set:  func(s *corev1.PodSpec) { s.HostnameOverride = ptr.To("ray-node") },
		has:  func(s *corev1.PodSpec) bool { return ptr.Deref(s.HostnameOverride, "") == "ray-node" },
	},
	{
		name: "containers[].restartPolicy and restartPolicyRules (1.34, beta in 1.35)",
		set: func(s *corev1.PodSpec) {
			c := probeOf(s)
			c.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyNever)
			c.RestartPolicyRules = []corev1.ContainerRestartRule{{
				Action:    corev1.ContainerRestartRuleActionRestart,
				ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{Operator: corev1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}},
			}}
		},
		has: func(s *corev1.PodSpec) bool {
			c := probeOf(s)
			return c != nil && c.RestartPolicy != nil && len(c.RestartPolicyRules) == 1
		},
	},
	{
		name: "env[].valueFrom.fileKeyRef (1.34, beta in 1.35)",
		set: func(s *corev1.PodSpec) {
			s.Volumes = append(s.Volumes, corev1.Volume{Name: "env-files", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
			c := probeOf(s)
			c.Env = append(c.Env, corev1.EnvVar{Name: "FROM_FILE", ValueFrom: &corev1.EnvVarSource{
				FileKeyRef: &corev1.FileKeySelector{VolumeName: "env-files", Path: "vars.env", Key: "FROM_FILE", Optional: ptr.To(true)},
			}})
		},
		has: func(s *corev1.PodSpec) bool {
			c := probeOf(s)
			return c != nil && len(c.Env) > 0 && c.Env[len(c.Env)-1].ValueFrom != nil && c.Env[len(c.Env)-1].ValueFrom.FileKeyRef != nil
		},
	},
	{
		name: "volumes[].projected.sources[].podCertificate (1.34, GA in 1.37)",
		set: func(s *corev1.PodSpec) {
			s.Volumes = append(s.Volumes, corev1.Volume{Name: "pod-cert", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				Sources: []corev1.VolumeProjection{{PodCertificate: &corev1.PodCertificateProjection{
					SignerName: "example.com/ray", KeyType: "ED25519", CredentialBundlePath: "credentials.pem",
					UserAnnotations: map[string]string{"example.com/team": "ray"},
				}}},
			}}})
		},
		has: func(s *corev1.PodSpec) bool {
			for _, v := range s.Volumes {
				if v.Name == "pod-cert" && v.Projected != nil && len(v.Projected.Sources) == 1 && v.Projected.Sources[0].PodCertificate != nil {
					return true
				}
			}
			return false
		},
	},
}

// podFieldOutcome is what becomes of a template's field on the pods a Kruise workload creates.
type podFieldOutcome string

const (
	fieldKept    podFieldOutcome = "kept"
	fieldDropped podFieldOutcome = "dropped"
	// fieldRefused: Kruise drops the field but leaves its parent, which the API server then refuses, so the
	// workload creates no pod at all (a FailedCreate event on it says why).
	fieldRefused podFieldOutcome = "pod refused"
)

// workloadRefused: Kruise's webhook refuses the workload itself; kray's dry run reports it in the RayCluster's
// RayClusterSpecValid condition (RejectedByAdmission) and creates nothing.
const workloadRefused = "workload refused"

// podFieldSurvival is what the field-survival test measured on Kubernetes 1.37 with Kruise v1.9.1, per probe,
// for the head (Advanced StatefulSet) and the workers (CloneSet): whether the workload's stored template keeps
// the field ("kept") or the API server prunes it by Kruise's CRD schema ("pruned"), then what the pod gets.
// docs/kuberay-compatibility.md has the table.
var podFieldSurvival = map[string][2]string{
	"spec.hostnameOverride (1.34, GA in 1.37)":                               {"pruned/dropped", "pruned/dropped"},
	"containers[].restartPolicy and restartPolicyRules (1.34, beta in 1.35)": {workloadRefused, workloadRefused},
	"env[].valueFrom.fileKeyRef (1.34, beta in 1.35)":                        {workloadRefused, workloadRefused},
	"volumes[].projected.sources[].podCertificate (1.34, GA in 1.37)":        {"pruned/dropped", "pruned/dropped"},
}

// Which pod fields newer than Kruise's own Kubernetes libraries reach the pods: for each, a RayCluster sets it
// on its head and worker templates. kray's CRD keeps it (its schema is Kubernetes 1.37's) and kray writes it
// into the Advanced StatefulSet and the CloneSet; whether Kruise's webhook takes the workloads, what the API
// server stores there (by Kruise's CRD schemas) and what Kruise's controllers then give the pods is compared
// with the measured table. A pod created
// directly from the same spec keeps every field, so the API server's pod schema is not what drops them.
func TestNewerPodFieldsThroughKruise(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ns := namespace(t)
	withProbe := func(spec *corev1.PodSpec, p podFieldProbe) {
		spec.Containers = append(spec.Containers, corev1.Container{Name: probeContainer, Image: "busybox:1.36"})
		p.set(spec)
	}

	var table []string
	measured := map[string][2]string{}
	for i, p := range newerPodFields {
		rc := loadSample(t, "ray-cluster.sample.yaml", ns)
		rc.Name = fmt.Sprintf("fields-%d", i)
		withProbe(&rc.Spec.HeadGroupSpec.Template.Spec, p)
		withProbe(&rc.Spec.WorkerGroupSpecs[0].Template.Spec, p)

		// The control: the API server itself keeps the field on a pod.
		direct := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("direct-%d", i)}, Spec: *rc.Spec.WorkerGroupSpecs[0].Template.Spec.DeepCopy()}
		g.Expect(k8s.Create(context.Background(), direct)).To(Succeed())
		g.Expect(p.has(&direct.Spec)).To(BeTrue(), "the API server keeps %s on a pod", p.name)

		create(t, rc)
		g.Expect(p.has(&get(g, rc).Spec.WorkerGroupSpecs[0].Template.Spec)).To(BeTrue(), "kray's CRD keeps %s", p.name)
		sts, cs := &kruisev1beta1.StatefulSet{}, &kruisev1alpha1.CloneSet{}
		refused := false
		g.Eventually(func(g Gomega) {
			if c := condition(get(g, rc), constants.ConditionSpecValid); c != nil && c.Status == metav1.ConditionFalse && c.Reason == constants.ReasonRejectedByAdmission {
				refused = true
				return
			}
			g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: names.HeadStatefulSet(rc.Name)}, sts)).To(Succeed())
			g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: names.WorkerCloneSet(rc.Name, rc.Spec.WorkerGroupSpecs[0].GroupName)}, cs)).To(Succeed())
		}, readyTimeout, poll).Should(Succeed())
		if refused {
			// kray's dry run of the workloads found Kruise's webhook refusing them: reported, nothing created.
			table = append(table, fmt.Sprintf("%-75s workloads refused by Kruise's webhook", p.name))
			measured[p.name] = [2]string{workloadRefused, workloadRefused}
			continue
		}
		stored := func(spec *corev1.PodSpec) string {
			if p.has(spec) {
				return "kept/"
			}
			return "pruned/"
		}
		var got [2]string
		g.Eventually(func(g Gomega) {
			head := podFieldOutcomeOf(g, p, ns, "StatefulSet", sts.Name, map[string]string{constants.LabelCluster: rc.Name, constants.LabelNodeType: constants.NodeTypeHead})
			workers := podFieldOutcomeOf(g, p, ns, "CloneSet", cs.Name, map[string]string{constants.LabelCluster: rc.Name, constants.LabelNodeType: constants.NodeTypeWorker})
			g.Expect([]podFieldOutcome{head, workers}).NotTo(ContainElement(podFieldOutcome("")), "a pod or a FailedCreate event for the head and the workers")
			got = [2]string{stored(&sts.Spec.Template.Spec) + string(head), stored(&cs.Spec.Template.Spec) + string(workers)}
		}, readyTimeout, poll).Should(Succeed())
		table = append(table, fmt.Sprintf("%-75s head (template/pod): %-20s workers: %s", p.name, got[0], got[1]))
		measured[p.name] = got
	}
	t.Logf("pod fields through Kruise:\n%s", strings.Join(table, "\n"))
	g.Expect(measured).To(Equal(podFieldSurvival), "measured (head, workers) per field")
}

// podFieldOutcomeOf reports what the workload of that kind and name made of the probe's field: kept or dropped
// on its pod, refused when it has no pod and a FailedCreate event, "" while neither is seen.
func podFieldOutcomeOf(g Gomega, p podFieldProbe, ns, kind, name string, selector map[string]string) podFieldOutcome {
	pods := &corev1.PodList{}
	g.Expect(k8s.List(context.Background(), pods, client.InNamespace(ns), client.MatchingLabels(selector))).To(Succeed())
	if len(pods.Items) > 0 {
		if p.has(&pods.Items[0].Spec) {
			return fieldKept
		}
		return fieldDropped
	}
	events, err := clientset.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	for _, e := range events.Items {
		if e.InvolvedObject.Kind == kind && e.InvolvedObject.Name == name && e.Reason == "FailedCreate" {
			return fieldRefused
		}
	}
	return ""
}
