package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	rayv1 "github.com/kray-project/kray/api/v1"
)

// rayClusterSamplesNotReadyHere are KubeRay v1.7's RayCluster samples that no operator brings to ready on the
// local cluster, with why: they need what its kwok nodes and its control plane do not have (KubeRay's pods
// would stay Pending just the same), or a feature kray refuses while its gate is off, as KubeRay does.
var rayClusterSamplesNotReadyHere = map[string]string{
	"ray-cluster.tpu-v4-multihost.yaml":         "google.com/tpu resources and TPU node selectors",
	"ray-cluster.tpu-v4-singlehost.yaml":        "google.com/tpu resources and TPU node selectors",
	"ray-cluster.tpu-v6e-16-multihost.yaml":     "google.com/tpu resources and TPU node selectors",
	"ray-cluster.tpu-v6e-256-multihost.yaml":    "google.com/tpu resources and TPU node selectors",
	"ray-cluster.tpu-v6e-singlehost.yaml":       "google.com/tpu resources and TPU node selectors",
	"ray-cluster.verl.yaml":                     "nvidia.com/gpu resources",
	"ray-cluster.kai-gpu-sharing.yaml":          "the KAI scheduler and its Queue CRD",
	"ray-cluster.kai-scheduler.yaml":            "the KAI scheduler and its Queue CRD",
	"ray-cluster.volcano-scheduler-queue.yaml":  "Volcano's Queue CRD",
	"ray-cluster.yunikorn-scheduler.yaml":       "the YuniKorn scheduler",
	"ray-cluster.gke-bucket.yaml":               "a GKE ServiceAccount and the GKE metadata server node label",
	"ray-cluster.embedded-gcs-ft.yaml":          "a storage provisioner for its PersistentVolumeClaim",
	"ray-cluster.persistent-redis.yaml":         "a storage provisioner for its PersistentVolumeClaim",
	"ray-cluster.persistent-redis-sidecar.yaml": "a storage provisioner for its PersistentVolumeClaim",
}

// sampleKinds are the kinds of a sample file's documents that are created beside its RayCluster: the
// namespaced objects the cluster refers to.
var sampleKinds = map[string]bool{"RayCluster": true, "ConfigMap": true, "Secret": true, "ServiceAccount": true, "Service": true,
	"Deployment": true, "Role": true, "RoleBinding": true}

// Every RayCluster sample of KubeRay v1.7 that can run on the local cluster becomes ready under kray, all at
// once, each in a namespace of its own with the objects its file holds.
func TestKubeRayRayClusterSamplesBecomeReady(t *testing.T) {
	g := NewWithT(t)
	files, err := filepath.Glob(filepath.Join(kubeRaySamplesDir(t), "ray-cluster.*.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	var clusters []*unstructured.Unstructured
	for _, file := range files {
		if _, skip := rayClusterSamplesNotReadyHere[filepath.Base(file)]; skip {
			continue
		}
		data, err := os.ReadFile(file)
		g.Expect(err).NotTo(HaveOccurred())
		ns := namespace(t)
		for _, doc := range splitYAML(data) {
			obj := &unstructured.Unstructured{}
			if err := yaml.Unmarshal(doc, &obj.Object); err != nil || !sampleKinds[obj.GetKind()] {
				continue
			}
			obj.SetNamespace(ns)
			g.Expect(k8s.Create(context.Background(), obj)).To(Succeed(), "%s: %s %s", filepath.Base(file), obj.GetKind(), obj.GetName())
			if obj.GetKind() == "RayCluster" {
				clusters = append(clusters, obj)
			}
		}
	}
	g.Expect(len(clusters)).To(BeNumerically(">=", 25), "the samples' layout may have changed")
	g.Eventually(func(g Gomega) {
		var notReady []string
		for _, obj := range clusters {
			rc := &rayv1.RayCluster{}
			g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(obj), rc)).To(Succeed())
			if rc.Status.State != rayv1.Ready {
				notReady = append(notReady, rc.Namespace+"/"+rc.Name+" "+string(rc.Status.State)+" "+rc.Status.Reason)
			}
		}
		g.Expect(notReady).To(BeEmpty(), strings.Join(notReady, "\n"))
	}, 2*readyTimeout, poll).Should(Succeed())
}
