package builder_test

import (
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/builder"
)

func tlsCluster() *rayv1.RayCluster {
	return &rayv1.RayCluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", UID: types.UID("0123456789abcdef")}, Spec: rayv1.RayClusterSpec{
		TLSOptions:              &rayv1.TLSOptions{Enabled: ptr.To(true)},
		EnableInTreeAutoscaling: ptr.To(true),
		HeadGroupSpec: rayv1.HeadGroupSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: "ray-head", Image: "ray:2.55.1"}, {Name: "sidecar", Image: "other"}}}}},
		WorkerGroupSpecs: []rayv1.WorkerGroupSpec{{GroupName: "g", Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers:     []corev1.Container{{Name: "ray-worker", Image: "ray:2.55.1"}},
			InitContainers: []corev1.Container{{Name: "mine", Image: "busybox"}}}}}},
	}}
}

// A TLS cluster's pods as KubeRay v1.7 renders them: the node's Secret mounted read-only at /etc/ray/tls with
// Ray's four variables in the Ray container, the autoscaler and the workers' wait-gcs-ready, and
// wait-for-tls-ip-san first among the init containers; the user's other containers are left alone.
func TestTLSPods(t *testing.T) {
	rc := tlsCluster()
	head := builder.HeadPodTemplate(rc, builder.Options{})
	worker := builder.WorkerPodTemplate(rc, &rc.Spec.WorkerGroupSpecs[0], builder.Options{})
	want := map[string]string{
		"RAY_USE_TLS": "1", "RAY_TLS_SERVER_CERT": "/etc/ray/tls/tls.crt", "RAY_TLS_SERVER_KEY": "/etc/ray/tls/tls.key", "RAY_TLS_CA_CERT": "/etc/ray/tls/ca.crt",
	}
	hasTLS := func(c corev1.Container) bool {
		for name, value := range want {
			if got, n := envValue(c, name); got != value || n != 1 {
				return false
			}
		}
		return slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
			return m.Name == "ray-tls" && m.MountPath == "/etc/ray/tls" && m.ReadOnly && m.SubPath == "" && m.MountPropagation == nil
		})
	}
	for _, tc := range []struct {
		name   string
		tmpl   corev1.PodTemplateSpec
		secret string
		tls    []string // containers with TLS
		plain  []string // containers without
	}{
		{"head", head, "ray-head-secret-c", []string{"ray-head", "autoscaler"}, []string{"sidecar"}},
		{"worker", worker, "ray-worker-secret-c", []string{"ray-worker", "wait-gcs-ready"}, []string{"mine"}},
	} {
		if !slices.ContainsFunc(tc.tmpl.Spec.Volumes, func(v corev1.Volume) bool {
			return v.Name == "ray-tls" && v.Secret != nil && v.Secret.SecretName == tc.secret && len(v.Secret.Items) == 0 && v.Secret.DefaultMode == nil
		}) {
			t.Errorf("%s: volumes %v, want ray-tls of Secret %s", tc.name, tc.tmpl.Spec.Volumes, tc.secret)
		}
		all := append(append([]corev1.Container{}, tc.tmpl.Spec.InitContainers...), tc.tmpl.Spec.Containers...)
		for _, c := range all {
			switch {
			case slices.Contains(tc.tls, c.Name) && !hasTLS(c):
				t.Errorf("%s: container %s has env %v, mounts %v; want Ray's TLS", tc.name, c.Name, c.Env, c.VolumeMounts)
			case slices.Contains(tc.plain, c.Name) && (len(c.VolumeMounts) > 0 || slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "RAY_USE_TLS" })):
				t.Errorf("%s: container %s was given TLS: %v %v", tc.name, c.Name, c.Env, c.VolumeMounts)
			}
		}
		wait := tc.tmpl.Spec.InitContainers[0]
		if wait.Name != "wait-for-tls-ip-san" || wait.Image != "ray:2.55.1" || len(wait.Env) == 0 || wait.Env[0].ValueFrom.FieldRef.FieldPath != "status.podIP" ||
			!wait.Resources.Limits.Cpu().Equal(*wait.Resources.Requests.Cpu()) || wait.Resources.Limits.Memory().String() != "64Mi" {
			t.Errorf("%s: first init container %+v, want wait-for-tls-ip-san", tc.name, wait)
		}
		if _, n := envValue(wait, "FQ_RAY_IP"); n != 1 {
			t.Errorf("%s: wait-for-tls-ip-san lacks FQ_RAY_IP, which every init container gets", tc.name)
		}
	}
	rc.Spec.TLSOptions.Enabled = ptr.To(false)
	if tmpl := builder.HeadPodTemplate(rc, builder.Options{}); slices.ContainsFunc(tmpl.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == "ray-tls" }) {
		t.Error("enabled: false still mounts the certificate")
	}
}

// The cert-manager objects v1.7 asks for: a self-signed Issuer, a CA of RSA 4096 for ten years in a Secret
// named with the UID, a CA Issuer, and the head's and workers' Certificates naming their pods' IPs, 127.0.0.1
// and (the head's) the head Service, all controlled by the RayCluster.
func TestTLSObjects(t *testing.T) {
	rc := tlsCluster()
	objs := builder.TLSObjects(rc, builder.Options{}, []string{"10.0.0.9"}, []string{"10.0.1.2", "10.0.1.1", "10.0.1.2", ""})
	var got []string
	for _, o := range objs {
		got = append(got, o.GetKind()+"/"+o.GetName())
		if ref := o.GetOwnerReferences(); len(ref) != 1 || ref[0].Name != "c" || !ptr.Deref(ref[0].Controller, false) {
			t.Errorf("%s: owner references %v", o.GetName(), ref)
		}
		if o.GetLabels()["ray.io/cluster"] != "c" || o.GetLabels()["app.kubernetes.io/created-by"] != "kuberay-operator" {
			t.Errorf("%s: labels %v", o.GetName(), o.GetLabels())
		}
	}
	if want := []string{"Issuer/ray-selfsigned-issuer-c", "Certificate/ray-ca-certificate-c", "Issuer/ray-ca-issuer-c", "Certificate/ray-head-cert-c", "Certificate/ray-worker-cert-c"}; !slices.Equal(got, want) {
		t.Fatalf("objects %v, want %v", got, want)
	}
	field := func(o *unstructured.Unstructured, path ...string) any {
		v, _, _ := unstructured.NestedFieldNoCopy(o.Object, append([]string{"spec"}, path...)...)
		return v
	}
	for _, tc := range []struct {
		obj  *unstructured.Unstructured
		path []string
		want any
	}{
		{objs[1], []string{"secretName"}, "c-ca-secret-01234567"},
		{objs[1], []string{"isCA"}, true},
		{objs[1], []string{"privateKey", "size"}, int64(4096)},
		{objs[1], []string{"duration"}, "87600h0m0s"},
		{objs[2], []string{"ca", "secretName"}, "c-ca-secret-01234567"},
		{objs[3], []string{"secretName"}, "ray-head-secret-c"},
		{objs[3], []string{"issuerRef", "name"}, "ray-ca-issuer-c"},
		{objs[3], []string{"dnsNames"}, []any{"c-head-svc.ns.svc.cluster.local", "localhost"}},
		{objs[3], []string{"ipAddresses"}, []any{"10.0.0.9", "127.0.0.1"}},
		{objs[4], []string{"dnsNames"}, []any{"localhost"}},
		{objs[4], []string{"ipAddresses"}, []any{"10.0.1.1", "10.0.1.2", "127.0.0.1"}},
		{objs[4], []string{"usages"}, []any{"digital signature", "key encipherment", "server auth", "client auth"}},
	} {
		if got := field(tc.obj, tc.path...); !slices.EqualFunc([]any{got}, []any{tc.want}, func(a, b any) bool { return fmtAny(a) == fmtAny(b) }) {
			t.Errorf("%s %v: %v, want %v", tc.obj.GetName(), tc.path, got, tc.want)
		}
	}
	rc.Spec.TLSOptions = nil
	if objs := builder.TLSObjects(rc, builder.Options{}, nil, nil); objs != nil {
		t.Errorf("no tlsOptions: %v", objs)
	}
}

func fmtAny(v any) string { return fmt.Sprintf("%#v", v) }
