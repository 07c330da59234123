package builder_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/builder"
)

func envValue(c corev1.Container, name string) (string, int) {
	value, n := "", 0
	for _, e := range c.Env {
		if e.Name == name {
			value, n = e.Value, n+1
		}
	}
	return value, n
}

func containerNamed(tmpl corev1.PodTemplateSpec, name string) (corev1.Container, bool) {
	for _, c := range tmpl.Spec.Containers {
		if c.Name == name {
			return c, true
		}
	}
	return corev1.Container{}, false
}

// The collector sidecar as KubeRay v1.7 renders it: in every Ray pod of a cluster that asks, sharing the Ray
// container's /tmp/ray, told its role, with Ray exporting its events to it; token auth reaches it too.
func TestCollectorSidecar(t *testing.T) {
	rc := &rayv1.RayCluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"}, Spec: rayv1.RayClusterSpec{
		RayVersion:    "2.52.0",
		HeadGroupSpec: rayv1.HeadGroupSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "ray-head", Image: "ray"}}}}},
		WorkerGroupSpecs: []rayv1.WorkerGroupSpec{{GroupName: "g", Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "ray-worker", Image: "ray",
			VolumeMounts: []corev1.VolumeMount{{Name: "mine", MountPath: "/tmp/ray"}}}}, Volumes: []corev1.Volume{{Name: "mine"}}}}}},
	}}
	if _, ok := containerNamed(builder.WorkerPodTemplate(rc, &rc.Spec.WorkerGroupSpecs[0], builder.Options{}), builder.CollectorContainerName); ok {
		t.Fatal("a collector without historyServerOptions")
	}
	rc.Spec.AuthOptions = &rayv1.AuthOptions{Mode: rayv1.AuthModeToken}
	rc.Spec.HistoryServerOptions = &rayv1.HistoryServerOptions{CollectorOptions: &rayv1.CollectorOptions{Image: ptr.To("collector:1"),
		Env: []corev1.EnvVar{{Name: "RAY_DASHBOARD_ADDRESS", Value: "http://127.0.0.1:8265"}}}}

	head := builder.HeadPodTemplate(rc, builder.Options{})
	c, ok := containerNamed(head, builder.CollectorContainerName)
	if !ok {
		t.Fatalf("no collector in the head: %v", head.Spec.Containers)
	}
	if v, n := envValue(c, "RAY_DASHBOARD_ADDRESS"); n != 1 || v != "http://127.0.0.1:8265" {
		t.Errorf("head collector RAY_DASHBOARD_ADDRESS %q (%d times), want the user's once", v, n)
	}
	if v, _ := envValue(c, "RAY_ROLE"); v != "Head" {
		t.Errorf("head collector role %q", v)
	}
	if _, n := envValue(c, "RAY_AUTH_MODE"); n != 1 {
		t.Errorf("the collector lacks token auth: %v", c.Env)
	}

	worker := builder.WorkerPodTemplate(rc, &rc.Spec.WorkerGroupSpecs[0], builder.Options{})
	c, ok = containerNamed(worker, builder.CollectorContainerName)
	if !ok {
		t.Fatalf("no collector in the worker: %v", worker.Spec.Containers)
	}
	if v, _ := envValue(c, "RAY_ROLE"); v != "Worker" {
		t.Errorf("worker collector role %q", v)
	}
	if _, n := envValue(c, "RAY_DASHBOARD_ADDRESS"); n != 1 {
		t.Errorf("worker collector RAY_DASHBOARD_ADDRESS: %d, want only the user's", n)
	}
	if c.ImagePullPolicy != corev1.PullIfNotPresent || c.Resources.Requests.Cpu().String() != "50m" || c.Resources.Limits.Memory().String() != "256Mi" {
		t.Errorf("collector pull policy %s, resources %v", c.ImagePullPolicy, c.Resources)
	}
	// The worker's Ray container already mounts /tmp/ray: the collector gets the ray-logs volume, the Ray
	// container keeps its own.
	if len(c.VolumeMounts) != 1 || c.VolumeMounts[0].MountPath != "/tmp/ray" {
		t.Errorf("collector mounts %v", c.VolumeMounts)
	}
	ray := worker.Spec.Containers[0]
	if len(ray.VolumeMounts) < 1 || ray.VolumeMounts[0].Name != "mine" {
		t.Errorf("Ray container mounts %v", ray.VolumeMounts)
	}
	if v, _ := envValue(ray, "RAY_DASHBOARD_AGGREGATOR_AGENT_EVENTS_EXPORT_ADDR"); v != "http://localhost:8084/v1/events" {
		t.Errorf("Ray's events go to %q", v)
	}
}
