package e2e

import (
	"context"
	"encoding/base64"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/internal/controller/raycluster"
	"github.com/kray-project/kray/pkg/builder"
	"github.com/kray-project/kray/pkg/constants"
)

// env returns the named env var of a container, or nil.
func env(c corev1.Container, name string) *corev1.EnvVar {
	for i := range c.Env {
		if c.Env[i].Name == name {
			return &c.Env[i]
		}
	}
	return nil
}

func rayContainer(p *corev1.Pod) corev1.Container { return p.Spec.Containers[0] }

// gone waits until obj no longer exists.
func gone(g Gomega, obj client.Object) {
	g.Eventually(func() bool {
		return apierrors.IsNotFound(k8s.Get(context.Background(), client.ObjectKeyFromObject(obj), obj))
	}, readyTimeout, poll).Should(BeTrue(), "%T %s still exists", obj, obj.GetName())
}

// Redis GCS fault tolerance: the head gets the Redis address, the password from the user's Secret and the
// storage namespace; the cluster gets the cleanup finalizer; an evicted head comes back under the same name
// with the same settings; deleting the cluster runs the cleanup Job, then the cluster goes.
func TestGCSFaultToleranceRedis(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ns := namespace(t)
	sample := loadSample(t, "ray-cluster.sample.yaml", ns)
	password := &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "redis-password-secret"}, Key: "password"}}
	sample.Spec.GcsFaultToleranceOptions = &rayv1.GcsFaultToleranceOptions{RedisAddress: "redis:6379", RedisPassword: &rayv1.RedisCredential{ValueFrom: password}}
	rc := create(t, sample)
	waitReady(t, rc, 2)
	g.Expect(get(g, rc).Finalizers).To(ContainElement(constants.FinalizerRedisCleanup))
	check := func(g Gomega, head *corev1.Pod) {
		ray := rayContainer(head)
		g.Expect(head.Annotations).To(HaveKeyWithValue(constants.AnnotationFTEnabled, "true"))
		g.Expect(head.Annotations).To(HaveKeyWithValue(constants.AnnotationExternalStorageNS, string(rc.UID)))
		g.Expect(env(ray, "RAY_REDIS_ADDRESS")).To(Equal(&corev1.EnvVar{Name: "RAY_REDIS_ADDRESS", Value: "redis:6379"}))
		g.Expect(env(ray, "REDIS_PASSWORD")).To(Equal(&corev1.EnvVar{Name: "REDIS_PASSWORD", ValueFrom: password}))
		g.Expect(env(ray, "RAY_external_storage_namespace").Value).To(Equal(string(rc.UID)))
		g.Expect(env(ray, "KUBERAY_GEN_RAY_START_CMD").Value).To(ContainSubstring("--redis-password=$REDIS_PASSWORD"))
	}
	check(g, headPod(g, rc))
	for _, p := range workerPods(g, rc, group(rc).GroupName) {
		g.Expect(env(rayContainer(&p), "RAY_gcs_rpc_server_reconnect_timeout_s").Value).To(Equal("600"))
	}
	// The Advanced StatefulSet replaces an evicted head under the same name, with the same settings.
	first := headPod(g, rc)
	evict(g, first)
	g.Eventually(func(g Gomega) {
		head := headPod(g, rc)
		g.Expect(head.UID).NotTo(Equal(first.UID))
		g.Expect(head.Name).To(Equal(first.Name))
		g.Expect(podReady(head)).To(BeTrue())
		check(g, head)
	}, readyTimeout, poll).Should(Succeed())

	g.Expect(k8s.Delete(context.Background(), get(g, rc))).To(Succeed())
	var job *batchv1.Job
	g.Eventually(func(g Gomega) {
		job = &batchv1.Job{}
		g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: rc.Name + "-redis-cleanup"}, job)).To(Succeed())
	}, readyTimeout, poll).Should(Succeed())
	g.Expect(clusterPods(g, rc, constants.LabelNodeType, constants.NodeTypeHead)).To(BeEmpty(), "the cleanup Job started while the head was still there")
	ray := job.Spec.Template.Spec.Containers
	g.Expect(ray).To(HaveLen(1))
	g.Expect(env(ray[0], "RAY_REDIS_ADDRESS").Value).To(Equal("redis:6379"))
	g.Expect(env(ray[0], "RAY_external_storage_namespace").Value).To(Equal(string(rc.UID)))
	g.Expect(ray[0].Args[0]).To(ContainSubstring("cleanup_redis_storage"))
	g.Expect(job.Spec.Template.Labels).To(HaveKeyWithValue(constants.LabelNodeType, "redis-cleanup"))
	// kwok completes the Job's pod; once the Job is Complete the finalizer goes and so does the cluster.
	gone(g, &rayv1.RayCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: rc.Name}})
	g.Expect(eventCount(g, rc, raycluster.EventCreatedRedisCleanupJob)).To(BeNumerically(">=", 1))
}

// A cleanup that cannot finish (its pod never schedules) holds the cluster only until
// ray.io/gcs-ft-deletion-timeout, then the finalizer is removed with a warning.
func TestRedisCleanupTimeout(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ns := namespace(t)
	sample := loadSample(t, "ray-cluster.sample.yaml", ns)
	sample.Annotations = map[string]string{constants.AnnotationGCSFTDeletionTimeout: "3"}
	sample.Spec.GcsFaultToleranceOptions = &rayv1.GcsFaultToleranceOptions{RedisAddress: "redis:6379"}
	sample.Spec.HeadGroupSpec.Template.Spec.NodeSelector = map[string]string{"kray.e2e/no-such-node": "true"}
	rc := create(t, sample)
	g.Eventually(func(g Gomega) {
		g.Expect(get(g, rc).Finalizers).To(ContainElement(constants.FinalizerRedisCleanup))
		g.Expect(clusterPods(g, rc, constants.LabelNodeType, constants.NodeTypeHead)).To(HaveLen(1))
	}, readyTimeout, poll).Should(Succeed())
	g.Expect(k8s.Delete(context.Background(), get(g, rc))).To(Succeed())
	start := time.Now()
	gone(g, &rayv1.RayCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: rc.Name}})
	g.Expect(time.Since(start)).To(BeNumerically(">=", 2*time.Second), "the finalizer went before the timeout")
	// Events are sent after the write that removed the finalizer, so the warning may trail the deletion.
	g.Eventually(func(g Gomega) int32 { return eventCount(g, rc, raycluster.EventForceDeletedStuckCluster) }, readyTimeout, poll).Should(BeNumerically(">=", 1))
}

// Embedded RocksDB GCS fault tolerance: kray creates the PVC (owned by the cluster), the head mounts it and
// keeps it across a replacement (same pod name, same claim).
func TestGCSFaultToleranceRocksDB(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ns := namespace(t)
	class := "kray-e2e-" + ns
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: ns},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("2Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName:              class,
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/" + ns}},
		},
	}
	g.Expect(k8s.Create(context.Background(), pv)).To(Succeed())
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), pv) })
	sample := loadSample(t, "ray-cluster.sample.yaml", ns)
	size := resource.MustParse("2Gi")
	sample.Spec.GcsFaultToleranceOptions = &rayv1.GcsFaultToleranceOptions{Backend: rayv1.GcsFTBackendRocksDB,
		Storage: &rayv1.GcsEmbeddedStorage{Size: &size, StorageClassName: ptr.To(class)}}
	rc := create(t, sample)
	waitReady(t, rc, 2)
	pvc := &corev1.PersistentVolumeClaim{}
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: rc.Name + "-gcs-pvc"}, pvc)).To(Succeed())
	g.Expect(pvc.OwnerReferences).To(ContainElement(HaveField("UID", get(g, rc).UID)))
	g.Expect(pvc.Spec.Resources.Requests.Storage().String()).To(Equal("2Gi"))
	g.Expect(get(g, rc).Finalizers).NotTo(ContainElement(constants.FinalizerRedisCleanup))
	check := func(g Gomega, head *corev1.Pod) {
		g.Expect(head.Spec.Volumes).To(ContainElement(HaveField("VolumeSource.PersistentVolumeClaim.ClaimName", rc.Name+"-gcs-pvc")))
		g.Expect(env(rayContainer(head), "RAY_gcs_storage").Value).To(Equal("rocksdb"))
		g.Expect(env(rayContainer(head), "RAY_gcs_storage_path").Value).To(Equal("/data/gcs"))
		g.Expect(env(rayContainer(head), "RAY_REDIS_ADDRESS")).To(BeNil())
	}
	first := headPod(g, rc)
	check(g, first)
	evict(g, first)
	g.Eventually(func(g Gomega) {
		head := headPod(g, rc)
		g.Expect(head.UID).NotTo(Equal(first.UID))
		g.Expect(podReady(head)).To(BeTrue())
		check(g, head)
	}, readyTimeout, poll).Should(Succeed())
}

// Token auth: kray generates the token Secret and wires RAY_AUTH_MODE/RAY_AUTH_TOKEN into the Ray
// containers, the wait-gcs-ready init container and the autoscaler.
func TestTokenAuth(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ns := namespace(t)
	sample := loadSample(t, "ray-cluster.sample.yaml", ns)
	sample.Spec.RayVersion = "2.52.0"
	sample.Spec.EnableInTreeAutoscaling = ptr.To(true)
	sample.Spec.AuthOptions = &rayv1.AuthOptions{Mode: rayv1.AuthModeToken}
	rc := create(t, sample)
	waitReady(t, rc, 2)
	secret := &corev1.Secret{}
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: rc.Name}, secret)).To(Succeed())
	token, err := base64.StdEncoding.DecodeString(string(secret.Data["auth_token"]))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(token).To(HaveLen(32))
	g.Expect(secret.OwnerReferences).To(ContainElement(HaveField("UID", get(g, rc).UID)))
	ref := &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: rc.Name}, Key: "auth_token"}}
	head := headPod(g, rc)
	containers := append([]corev1.Container{}, head.Spec.Containers...)
	for _, p := range workerPods(g, rc, group(rc).GroupName) {
		containers = append(containers, p.Spec.Containers[0])
		containers = append(containers, p.Spec.InitContainers...)
	}
	g.Expect(containers).To(ContainElement(HaveField("Name", builder.AutoscalerContainerName)))
	for _, c := range containers {
		g.Expect(env(c, "RAY_AUTH_MODE")).To(Equal(&corev1.EnvVar{Name: "RAY_AUTH_MODE", Value: "token"}), "container %s", c.Name)
		g.Expect(env(c, "RAY_AUTH_TOKEN")).To(Equal(&corev1.EnvVar{Name: "RAY_AUTH_TOKEN", ValueFrom: ref}), "container %s", c.Name)
	}
	// The token is generated once: a later reconcile does not replace it.
	update(t, rc, func(c *rayv1.RayCluster) { group(c).Replicas = ptr.To[int32](3) })
	waitReady(t, rc, 3)
	again := &corev1.Secret{}
	g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(secret), again)).To(Succeed())
	g.Expect(again.Data).To(Equal(secret.Data))
}

// enableIngress and the serve Service annotation: the Ingress routes to the head's dashboard with the class
// from kubernetes.io/ingress.class, carries the RayCluster's annotations that --ingress-annotation-prefixes
// names (an ingress-nginx setting, not its configuration snippet nor other annotations), and is kept to the
// spec; the serve Service selects every Ray pod.
func TestIngressAndServeService(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ns := namespace(t)
	sample := loadSample(t, "ray-cluster.sample.yaml", ns)
	sample.Annotations = map[string]string{constants.AnnotationIngressClass: "nginx", constants.AnnotationEnableServeService: "true", "example.com/team": "ml",
		"nginx.ingress.kubernetes.io/rewrite-target": "/", "nginx.ingress.kubernetes.io/configuration-snippet": "more_set_headers \"X-Team: ml\";"}
	sample.Spec.HeadGroupSpec.EnableIngress = ptr.To(true)
	sample.Spec.HeadGroupSpec.IngressOptions = &rayv1.IngressOptions{Host: ptr.To("ray.example.com")}
	ray := &sample.Spec.HeadGroupSpec.Template.Spec.Containers[0]
	ray.Ports = append(ray.Ports, corev1.ContainerPort{Name: "serve", ContainerPort: 8000})
	rc := create(t, sample)
	waitReady(t, rc, 2)
	ing := &networkingv1.Ingress{}
	key := client.ObjectKey{Namespace: ns, Name: rc.Name + "-head-ingress"}
	g.Expect(k8s.Get(context.Background(), key, ing)).To(Succeed())
	g.Expect(ing.Spec.IngressClassName).To(Equal(ptr.To("nginx")))
	g.Expect(ing.Annotations).To(Equal(map[string]string{"nginx.ingress.kubernetes.io/rewrite-target": "/"}))
	g.Expect(ing.Spec.Rules).To(HaveLen(1))
	g.Expect(ing.Spec.Rules[0].Host).To(Equal("ray.example.com"))
	backend := ing.Spec.Rules[0].HTTP.Paths[0].Backend.Service
	g.Expect(backend.Name).To(Equal(rc.Name + "-head-svc"))
	g.Expect(backend.Port.Number).To(Equal(int32(8265)))
	// An edit to the Ingress is undone.
	ing.Spec.Rules[0].Host = "elsewhere.example.com"
	g.Expect(k8s.Update(context.Background(), ing)).To(Succeed())
	update(t, rc, func(c *rayv1.RayCluster) { c.Labels = map[string]string{"kray.e2e/poke": "1"} })
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(context.Background(), key, ing)).To(Succeed())
		g.Expect(ing.Spec.Rules[0].Host).To(Equal("ray.example.com"))
	}, readyTimeout, poll).Should(Succeed())

	svc := &corev1.Service{}
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: rc.Name + "-serve-svc"}, svc)).To(Succeed())
	g.Expect(svc.Spec.Selector).To(Equal(map[string]string{constants.LabelCluster: rc.Name}))
	g.Expect(svc.Spec.Ports).To(ConsistOf(HaveField("Port", int32(8000))))
	g.Expect(svc.Labels).To(HaveKeyWithValue("ray.io/serve", rc.Name+"-serve"))
}

// headService, serviceType and ray.io/overwrite-container-cmd: a custom head Service keeps the user's name,
// annotations and ports (defaults appended, selector forced) and workers dial it; NodePort is honoured and
// reported in status.endpoints; an overwritten command is left alone while the generated one is in the env.
func TestHeadServiceOverridesAndCommand(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ns := namespace(t)
	sample := loadSample(t, "ray-cluster.sample.yaml", ns)
	sample.Annotations = map[string]string{constants.AnnotationOverwriteContainerCmd: "true"}
	sample.Spec.HeadGroupSpec.ServiceType = corev1.ServiceTypeNodePort
	sample.Spec.HeadGroupSpec.HeadService = &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "my-head", Annotations: map[string]string{"example.com/lb": "internal"}},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "custom", Port: 9999}}, Selector: map[string]string{"wrong": "selector"}},
	}
	head := &sample.Spec.HeadGroupSpec.Template.Spec.Containers[0]
	head.Command = []string{"/bin/sh", "-c", "my-wrapper && ray start --head --block"}
	rc := create(t, sample)
	waitReady(t, rc, 2)

	svc := &corev1.Service{}
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "my-head"}, svc)).To(Succeed())
	g.Expect(svc.Spec.Type).To(Equal(corev1.ServiceTypeNodePort))
	g.Expect(svc.Annotations).To(HaveKeyWithValue("example.com/lb", "internal"))
	g.Expect(svc.Spec.Selector).To(HaveKeyWithValue(constants.LabelNodeType, constants.NodeTypeHead))
	g.Expect(svc.Spec.Selector).NotTo(HaveKey("wrong"))
	g.Expect(svc.Spec.Ports).To(ContainElements(HaveField("Name", "custom"), HaveField("Name", "dashboard"), HaveField("Name", "gcs-server")))
	g.Eventually(func(g Gomega) {
		cur := get(g, rc)
		g.Expect(cur.Status.Endpoints).To(HaveKey("dashboard"))
		for _, p := range svc.Spec.Ports {
			if p.Name == "dashboard" {
				g.Expect(cur.Status.Endpoints["dashboard"]).To(Equal(fmt.Sprint(p.NodePort)))
			}
		}
	}, readyTimeout, poll).Should(Succeed())

	hp := headPod(g, rc)
	g.Expect(rayContainer(hp).Command).To(Equal([]string{"/bin/sh", "-c", "my-wrapper && ray start --head --block"}))
	g.Expect(env(rayContainer(hp), "KUBERAY_GEN_RAY_START_CMD").Value).To(HavePrefix("ray start --head"))
	for _, p := range workerPods(g, rc, group(rc).GroupName) {
		g.Expect(env(rayContainer(&p), "FQ_RAY_IP").Value).To(HavePrefix("my-head." + ns + ".svc."))
	}
}
