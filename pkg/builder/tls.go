package builder

import (
	"net"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/names"
)

// mTLS in Ray pods (KubeRay v1.7's names and values: Ray reads the variables, and users' tooling the rest).
const (
	// TLSVolumeName is the pod volume of the node's certificate Secret.
	TLSVolumeName = "ray-tls"
	// TLSMountPath is where the Secret is mounted, read-only.
	TLSMountPath = "/etc/ray/tls"
	// TLSWaitContainerName is the first init container of a TLS pod: it waits until the node's certificate
	// names the pod's IP, which Ray's gRPC peers verify.
	TLSWaitContainerName = "wait-for-tls-ip-san"

	EnvRayUseTLS        = "RAY_USE_TLS"
	EnvRayTLSServerCert = "RAY_TLS_SERVER_CERT"
	EnvRayTLSServerKey  = "RAY_TLS_SERVER_KEY"
	EnvRayTLSCACert     = "RAY_TLS_CA_CERT"
)

// TLSEnv are the variables Ray reads to turn on mutual TLS on every gRPC connection, in KubeRay's order.
var TLSEnv = []string{EnvRayUseTLS, EnvRayTLSServerCert, EnvRayTLSServerKey, EnvRayTLSCACert}

// Keys of a certificate Secret that cert-manager writes.
const (
	TLSSecretCert = "tls.crt"
	TLSSecretKey  = "tls.key"
	TLSSecretCA   = "ca.crt"
)

// cert-manager's API, which kray writes without importing its Go types.
var (
	IssuerGVK      = schema.GroupVersionKind{Group: "cert-manager.io", Version: "v1", Kind: "Issuer"}
	CertificateGVK = schema.GroupVersionKind{Group: "cert-manager.io", Version: "v1", Kind: "Certificate"}
)

// Values of the app.kubernetes.io/component label on the cert-manager objects (KubeRay's).
const (
	TLSComponentSelfSignedIssuer = "selfsigned-issuer"
	TLSComponentCACertificate    = "ca-certificate"
	TLSComponentCAIssuer         = "ca-issuer"
	TLSComponentHeadCertificate  = "head-certificate"
	TLSComponentWorkerCert       = "worker-certificate"
)

// Lifetimes of the certificates (KubeRay's): the CA ten years, renewed 30 days before; a node's 90 days,
// renewed 15 days before.
const (
	tlsCADuration      = "87600h0m0s"
	tlsCARenewBefore   = "720h0m0s"
	tlsLeafDuration    = "2160h0m0s"
	tlsLeafRenewBefore = "360h0m0s"
	tlsCAKeySize       = 4096
	tlsLoopbackIP      = "127.0.0.1"
)

// tlsWaitScript loops until the certificate at TLSMountPath names the pod's IP (KubeRay's check: openssl from
// the Ray image, every 5 s, no deadline: the kubelet refreshes the Secret's volume after cert-manager reissues).
const tlsWaitScript = `CERT="` + TLSMountPath + `/` + TLSSecretCert + `"
if [ -z "${POD_IP}" ]; then
  POD_IP=$(hostname -i 2>/dev/null | awk '{print $1}')
fi
if ! command -v openssl >/dev/null 2>&1; then
  echo "openssl not found; cannot verify IP SAN" >&2
  exit 1
fi
echo "Waiting for TLS cert to include IP SAN for ${POD_IP}..."
while true; do
  if openssl x509 -in "${CERT}" -noout -text 2>/dev/null | grep -qE "IP Address:${POD_IP}([^0-9.]|$)"; then
    echo "TLS cert now includes IP SAN for ${POD_IP}"
    exit 0
  fi
  echo "IP SAN for ${POD_IP} not yet in cert, retrying in 5s..."
  sleep 5
done
`

// TLSEnabled reports whether the cluster asks for mTLS (tlsOptions.enabled).
func TLSEnabled(rc *rayv1.RayCluster) bool {
	return rc.Spec.TLSOptions != nil && ptr.Deref(rc.Spec.TLSOptions.Enabled, false)
}

// configureTLS mounts the node's certificate Secret into the Ray container, the autoscaler and the workers'
// wait-gcs-ready, sets Ray's TLS variables on them, and puts TLSWaitContainerName first among the init
// containers. Other containers are left as they are (KubeRay's set). It runs before finishPod, which gives
// every init container the head's address.
func configureTLS(rc *rayv1.RayCluster, tmpl *corev1.PodTemplateSpec, head bool) {
	if !TLSEnabled(rc) {
		return
	}
	secret := names.TLSWorkerSecret(rc.Name)
	if head {
		secret = names.TLSHeadSecret(rc.Name)
	}
	if !slices.ContainsFunc(tmpl.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == TLSVolumeName }) {
		tmpl.Spec.Volumes = append(tmpl.Spec.Volumes, corev1.Volume{
			Name:         TLSVolumeName,
			VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: secret}},
		})
	}
	ray := &tmpl.Spec.Containers[constants.RayContainerIndex]
	tlsContainer(ray)
	for i := range tmpl.Spec.Containers {
		if c := &tmpl.Spec.Containers[i]; c.Name == AutoscalerContainerName {
			tlsContainer(c)
		}
	}
	for i := range tmpl.Spec.InitContainers {
		if c := &tmpl.Spec.InitContainers[i]; c.Name == WaitGCSReadyInitContainerName {
			tlsContainer(c)
		}
	}
	if slices.ContainsFunc(tmpl.Spec.InitContainers, func(c corev1.Container) bool { return c.Name == TLSWaitContainerName }) {
		return
	}
	limits := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("64Mi")}
	wait := corev1.Container{
		Name:            TLSWaitContainerName,
		Image:           ray.Image,
		ImagePullPolicy: ray.ImagePullPolicy,
		SecurityContext: ray.SecurityContext.DeepCopy(),
		Command:         []string{"sh", "-c"},
		Args:            []string{tlsWaitScript},
		Env:             []corev1.EnvVar{fieldEnv("POD_IP", "status.podIP")},
		VolumeMounts:    []corev1.VolumeMount{tlsMount()},
		Resources:       corev1.ResourceRequirements{Limits: limits, Requests: limits.DeepCopy()},
	}
	tmpl.Spec.InitContainers = append([]corev1.Container{wait}, tmpl.Spec.InitContainers...)
}

// tlsContainer sets Ray's TLS variables and the certificate mount on c, keeping what c already has.
func tlsContainer(c *corev1.Container) {
	appendEnvIfAbsent(c,
		corev1.EnvVar{Name: EnvRayUseTLS, Value: "1"},
		corev1.EnvVar{Name: EnvRayTLSServerCert, Value: TLSMountPath + "/" + TLSSecretCert},
		corev1.EnvVar{Name: EnvRayTLSServerKey, Value: TLSMountPath + "/" + TLSSecretKey},
		corev1.EnvVar{Name: EnvRayTLSCACert, Value: TLSMountPath + "/" + TLSSecretCA},
	)
	if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
		return m.Name == TLSVolumeName || m.MountPath == TLSMountPath
	}) {
		c.VolumeMounts = append(c.VolumeMounts, tlsMount())
	}
}

func tlsMount() corev1.VolumeMount {
	return corev1.VolumeMount{Name: TLSVolumeName, MountPath: TLSMountPath, ReadOnly: true}
}

// TLSObjects returns the cert-manager objects of a tlsOptions cluster, in the order they depend on each
// other: a self-signed Issuer, the cluster's CA Certificate, the CA Issuer, then the head's and the workers'
// Certificates, whose IP SANs are the given pod IPs and 127.0.0.1 (Ray's gRPC peers dial pods by IP and
// verify it). The head's also names localhost and the head Service, which workers and kray dial; the workers'
// only localhost. It returns nil when the cluster does not ask for mTLS.
func TLSObjects(rc *rayv1.RayCluster, opts Options, headIPs, workerIPs []string) []*unstructured.Unstructured {
	if !TLSEnabled(rc) {
		return nil
	}
	caSecret := names.TLSCASecret(rc.Name, string(rc.UID))
	return []*unstructured.Unstructured{
		tlsObject(rc, IssuerGVK, names.TLSSelfSignedIssuer(rc.Name), TLSComponentSelfSignedIssuer, map[string]any{
			"selfSigned": map[string]any{},
		}),
		tlsObject(rc, CertificateGVK, names.TLSCACertificate(rc.Name), TLSComponentCACertificate, map[string]any{
			"secretName":  caSecret,
			"isCA":        true,
			"commonName":  "ray-ca-" + rc.Name,
			"privateKey":  map[string]any{"algorithm": "RSA", "size": int64(tlsCAKeySize)},
			"duration":    tlsCADuration,
			"renewBefore": tlsCARenewBefore,
			"usages":      []any{"cert sign", "crl sign"},
			"issuerRef":   issuerRef(names.TLSSelfSignedIssuer(rc.Name)),
		}),
		tlsObject(rc, IssuerGVK, names.TLSCAIssuer(rc.Name), TLSComponentCAIssuer, map[string]any{
			"ca": map[string]any{"secretName": caSecret},
		}),
		tlsObject(rc, CertificateGVK, names.TLSHeadCertificate(rc.Name), TLSComponentHeadCertificate,
			leafSpec(rc, names.TLSHeadSecret(rc.Name), []string{"localhost", HeadServiceFQDN(rc, opts)}, headIPs)),
		tlsObject(rc, CertificateGVK, names.TLSWorkerCertificate(rc.Name), TLSComponentWorkerCert,
			leafSpec(rc, names.TLSWorkerSecret(rc.Name), []string{"localhost"}, workerIPs)),
	}
}

// leafSpec is a node Certificate's spec: server and client use (Ray presents the same certificate both ways).
func leafSpec(rc *rayv1.RayCluster, secret string, dnsNames, ips []string) map[string]any {
	return map[string]any{
		"secretName":  secret,
		"duration":    tlsLeafDuration,
		"renewBefore": tlsLeafRenewBefore,
		"dnsNames":    anySlice(sortedSet(dnsNames)),
		"ipAddresses": anySlice(sortedSet(append(ips, tlsLoopbackIP))),
		"usages":      []any{"digital signature", "key encipherment", "server auth", "client auth"},
		"issuerRef":   issuerRef(names.TLSCAIssuer(rc.Name)),
	}
}

func issuerRef(name string) map[string]any {
	return map[string]any{"name": name, "kind": IssuerGVK.Kind, "group": IssuerGVK.Group}
}

func tlsObject(rc *rayv1.RayCluster, gvk schema.GroupVersionKind, name, component string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetGroupVersionKind(gvk)
	meta := objectMeta(rc, name, map[string]string{
		constants.LabelAppName:   constants.AppNameDefault,
		constants.LabelCreatedBy: constants.CreatedByValue,
		constants.LabelComponent: component,
		constants.LabelCluster:   rc.Name,
	})
	u.SetName(meta.Name)
	u.SetNamespace(meta.Namespace)
	u.SetLabels(meta.Labels)
	u.SetOwnerReferences(meta.OwnerReferences)
	return u
}

// sortedSet sorts values and drops empty and repeated ones; IPs are compared in their canonical form.
func sortedSet(values []string) []string {
	var out []string
	for _, v := range values {
		if ip := net.ParseIP(v); ip != nil {
			v = ip.String()
		}
		if v != "" && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	slices.Sort(out)
	return out
}

func anySlice(values []string) []any {
	out := make([]any, len(values))
	for i, v := range values {
		out[i] = v
	}
	return out
}
