// Package names derives every object name kray creates from a RayCluster, within Kubernetes' and Kruise's limits.
package names

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// MaxWorkloadName is the longest CloneSet or Advanced StatefulSet name whose pods' controller-revision-hash
// label still fits in 63 characters.
const MaxWorkloadName = 52

// MaxObjectName bounds Service, ServiceAccount, Role and RoleBinding names; 63 keeps them valid DNS labels.
const MaxObjectName = 63

// hashLen is the number of hex characters of the suffix that makes a shortened name unique.
const hashLen = 8

// Shorten returns name unchanged when it fits in max characters, otherwise a deterministic prefix of name
// followed by "-" and a hash of the whole name, max characters long; the result never ends in "-" before the hash.
func Shorten(name string, max int) string {
	if len(name) <= max {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	suffix := hex.EncodeToString(sum[:])[:hashLen]
	prefix := strings.TrimRight(name[:max-hashLen-1], "-.")
	return prefix + "-" + suffix
}

// HeadService is the head Service name, "<cluster>-head-svc".
func HeadService(cluster string) string {
	return Shorten(cluster+"-head-svc", MaxObjectName)
}

// HeadStatefulSet is the head Advanced StatefulSet name, "<cluster>-head"; its pod is "<name>-0".
func HeadStatefulSet(cluster string) string {
	return Shorten(strings.ToLower(cluster)+"-head", MaxWorkloadName)
}

// HeadPod is the name of the single head pod that the head Advanced StatefulSet creates.
func HeadPod(cluster string) string {
	return HeadStatefulSet(cluster) + "-0"
}

// WorkerCloneSet is the worker CloneSet name, "<cluster>-<group>-worker", lowercased like KubeRay's pod prefix.
func WorkerCloneSet(cluster, group string) string {
	return Shorten(strings.ToLower(cluster+"-"+group)+"-worker", MaxWorkloadName)
}

// AutoscalerRBAC is the name of the autoscaler's ServiceAccount (when the template names none), Role and RoleBinding.
func AutoscalerRBAC(cluster string) string {
	return Shorten(cluster, MaxObjectName)
}

// AuthSecret is the Secret kray generates for Ray token auth, "<cluster>".
func AuthSecret(cluster string) string {
	return Shorten(cluster, MaxObjectName)
}

// GCSStoragePVC is the operator-managed PVC of the embedded GCS store, "<cluster>-gcs-pvc".
func GCSStoragePVC(cluster string) string {
	return Shorten(cluster+"-gcs-pvc", MaxObjectName)
}

// HeadIngress is the Ingress in front of the head's dashboard, "<cluster>-head-ingress".
func HeadIngress(cluster string) string {
	return Shorten(cluster+"-head-ingress", MaxObjectName)
}

// HeadDisruptionBudget is the PodDisruptionBudget of the head, "<cluster>-head-pdb".
func HeadDisruptionBudget(cluster string) string {
	return Shorten(cluster+"-head-pdb", MaxObjectName)
}

// ImagePullJob is the ImagePullJob of one image and node selector of a cluster, "<cluster>-prepull-<key>",
// key naming the image and selector.
func ImagePullJob(cluster, key string) string {
	return Shorten(cluster+"-prepull-"+key, MaxObjectName)
}

// ServeService is the Service in front of Ray Serve on every pod, "<cluster>-serve-svc".
func ServeService(cluster string) string {
	return Shorten(cluster+"-serve-svc", MaxObjectName)
}

// RedisCleanupJob is the Job that deletes a deleted cluster's GCS data from Redis, "<cluster>-redis-cleanup".
func RedisCleanupJob(cluster string) string {
	return Shorten(cluster+"-redis-cleanup", MaxObjectName)
}

// HeadlessWorkerService is the headless Service of multi-host workers, "<cluster>-headless".
func HeadlessWorkerService(cluster string) string {
	return Shorten(cluster+"-headless", MaxObjectName)
}

// WorkerRestart is the ContainerRecreateRequest that restarts one run of a pod's Ray container,
// "<pod>-restart-<hash of the run>": one name per run, so that the restart is asked once.
func WorkerRestart(pod, run string) string {
	sum := sha256.Sum256([]byte(run))
	return Shorten(pod+"-restart-"+hex.EncodeToString(sum[:])[:hashLen], MaxObjectName)
}

// HeadNetworkPolicy is the NetworkPolicy of the head pod, "<cluster>-head" (KubeRay's name; a NetworkPolicy
// name may be 253 characters long, so it is never shortened).
func HeadNetworkPolicy(cluster string) string {
	return cluster + "-head"
}

// WorkerNetworkPolicy is the NetworkPolicy of one worker group's pods, "<cluster>-workers-<group>"
// (KubeRay's name, never shortened).
func WorkerNetworkPolicy(cluster, group string) string {
	return cluster + "-workers-" + group
}

// The cert-manager objects of a tlsOptions cluster (KubeRay's names, never shortened: an Issuer or a
// Certificate name may be 253 characters long).

// TLSSelfSignedIssuer is the Issuer that signs the cluster's CA, "ray-selfsigned-issuer-<cluster>".
func TLSSelfSignedIssuer(cluster string) string { return "ray-selfsigned-issuer-" + cluster }

// TLSCACertificate is the cluster's CA Certificate, "ray-ca-certificate-<cluster>".
func TLSCACertificate(cluster string) string { return "ray-ca-certificate-" + cluster }

// TLSCASecret is the CA's Secret, "<cluster>-ca-secret-<first 8 characters of the RayCluster's UID>": a
// cluster created again under the same name gets a new CA.
func TLSCASecret(cluster, uid string) string {
	if len(uid) > 8 {
		uid = uid[:8]
	}
	return cluster + "-ca-secret-" + uid
}

// TLSCAIssuer is the Issuer that signs the head's and the workers' certificates with the CA,
// "ray-ca-issuer-<cluster>".
func TLSCAIssuer(cluster string) string { return "ray-ca-issuer-" + cluster }

// TLSHeadCertificate is the head's Certificate, "ray-head-cert-<cluster>".
func TLSHeadCertificate(cluster string) string { return "ray-head-cert-" + cluster }

// TLSHeadSecret is the Secret of TLSHeadCertificate, "ray-head-secret-<cluster>".
func TLSHeadSecret(cluster string) string { return "ray-head-secret-" + cluster }

// TLSWorkerCertificate is the Certificate every worker group shares, "ray-worker-cert-<cluster>".
func TLSWorkerCertificate(cluster string) string { return "ray-worker-cert-" + cluster }

// TLSWorkerSecret is the Secret of TLSWorkerCertificate, "ray-worker-secret-<cluster>".
func TLSWorkerSecret(cluster string) string { return "ray-worker-secret-" + cluster }
