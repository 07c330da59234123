package raycluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kray-project/kray/internal/controller/shared"
	"github.com/kray-project/kray/pkg/builder"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/names"
	"github.com/kray-project/kray/pkg/ray"
)

// errCertificatesNotReady holds a new cluster's head and workers back until cert-manager has issued the
// certificates their pods mount; the Certificates' own status changes reconcile the cluster again, and
// certificatesRetry does if no such change comes.
var errCertificatesNotReady = fmt.Errorf("%w: cert-manager has not issued the head's and the workers' certificates yet", errNotYet)

// certificatesRetry is how soon a cluster waiting for its certificates is looked at again without an event
// (KubeRay's 30 s).
const certificatesRetry = 30 * time.Second

// reconcileCertificates keeps the cert-manager objects of a tlsOptions cluster (builder.TLSObjects): the
// Issuers and the CA Certificate are created once, as KubeRay does; the head's and the workers' Certificates
// are created, and brought back to the spec when the pods' IPs (their IP SANs) or kray's labels changed,
// which makes cert-manager reissue them. A new cluster's workloads wait for both node certificates
// (errCertificatesNotReady); an existing cluster's pods wait in their wait-for-tls-ip-san init container.
// A certificate within expiryWarning of its end is reported.
func (r *Reconciler) reconcileCertificates(ctx context.Context, s *state) error {
	if !builder.TLSEnabled(s.effective) {
		return nil
	}
	headIPs, workerIPs := nodeIPs(s.children.pods)
	desired := builder.TLSObjects(s.effective, r.Options, headIPs, workerIPs)
	var errs []error
	live := map[string]*unstructured.Unstructured{}
	for _, d := range desired {
		got, err := r.reconcileTLSObject(ctx, s, d)
		if err != nil {
			s.warn(EventMTLSFailedToReconcile, "Failed to reconcile mTLS %s %s/%s: %v", d.GetKind(), d.GetNamespace(), d.GetName(), err)
			errs = append(errs, err)
			continue
		}
		live[d.GetName()] = got
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	for _, name := range certificateNames(s.rc.Name) {
		if left, ok := expiresIn(live[name], r.clock()); ok && left < expiryWarning {
			s.warn(EventMTLSCertificateExpiringSoon, "TLS certificate %s expires in %.1f hours; Ray does not hot-reload certs so a pod restart will be needed after renewal",
				name, left.Hours())
		}
	}
	if s.children.headSet != nil {
		return nil
	}
	head, worker := live[names.TLSHeadCertificate(s.rc.Name)], live[names.TLSWorkerCertificate(s.rc.Name)]
	if !certificateReady(head) || !certificateReady(worker) {
		s.normal(EventMTLSCertsNotReady, "Waiting for cert-manager to issue mTLS certificates")
		s.retryAfter(certificatesRetry)
		return errCertificatesNotReady
	}
	s.normal(EventMTLSPKIReady, "mTLS PKI is ready: CA, head, and worker certificates issued")
	return nil
}

// certificateNames are the cluster's Certificates, each with a Secret of its own.
func certificateNames(cluster string) []string {
	return []string{names.TLSCACertificate(cluster), names.TLSHeadCertificate(cluster), names.TLSWorkerCertificate(cluster)}
}

// reconcileCertificateSecrets gives each Secret cert-manager wrote for the cluster's Certificates an owner
// reference to its Certificate (ownSecret). Nothing waits for it: it runs after the workloads.
func (r *Reconciler) reconcileCertificateSecrets(ctx context.Context, s *state) error {
	if !r.MTLS || !builder.TLSEnabled(s.effective) {
		return nil
	}
	var errs []error
	for _, name := range certificateNames(s.rc.Name) {
		cert := &unstructured.Unstructured{}
		cert.SetGroupVersionKind(builder.CertificateGVK)
		switch err := r.Cache.Get(ctx, client.ObjectKey{Namespace: s.rc.Namespace, Name: name}, cert); {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			errs = append(errs, fmt.Errorf("get Certificate %s: %w", name, err))
			continue
		}
		if !ownedBy(cert, s.rc) {
			continue
		}
		if err := r.ownSecret(ctx, cert); err != nil {
			s.warn(EventMTLSFailedToReconcile, "Failed to reconcile mTLS Secret of Certificate %s/%s: %v", s.rc.Namespace, name, err)
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// reconcileTLSObject creates desired, or brings the node Certificate the RayCluster controls back to its spec
// and labels; it returns the object as it now is. The Issuers and the CA Certificate are never updated.
func (r *Reconciler) reconcileTLSObject(ctx context.Context, s *state, desired *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(desired.GroupVersionKind())
	made, err := r.createIfMissing(ctx, desired, live)
	switch {
	case err != nil:
		return nil, fmt.Errorf("create %s %s: %w", desired.GetKind(), desired.GetName(), err)
	case made:
		return desired, nil
	case !ownedBy(live, s.rc):
		return nil, notOwnedError(desired.GetKind(), desired.GetName())
	case !updatable(desired):
		return live, nil
	}
	if equality.Semantic.DeepEqual(live.Object["spec"], desired.Object["spec"]) && hasAll(live.GetLabels(), desired.GetLabels()) {
		return live, nil
	}
	// A merge patch, not an update: cert-manager writes the Certificate's status all the while, which would
	// make an update conflict.
	updated := live.DeepCopy()
	updated.Object["spec"] = desired.Object["spec"]
	updated.SetLabels(withAll(updated.GetLabels(), desired.GetLabels()))
	if err := r.Writer.Patch(ctx, updated, client.MergeFrom(live)); err != nil {
		return nil, fmt.Errorf("patch %s %s: %w", desired.GetKind(), desired.GetName(), err)
	}
	ips, _, _ := unstructured.NestedStringSlice(desired.Object, "spec", "ipAddresses")
	s.normal(EventMTLSCertificatesUpdated, "Updated %s SANs (IPs: %v)", desired.GetName(), ips)
	return updated, nil
}

// expiryWarning is how close to its end a certificate is reported (KubeRay's 24 hours): Ray keeps the
// certificate it loaded at start, so its pods need a restart after the renewal.
const expiryWarning = 24 * time.Hour

// expiresIn is how long cert stays valid by its status.notAfter, if cert-manager reported one.
func expiresIn(cert *unstructured.Unstructured, now time.Time) (time.Duration, bool) {
	if cert == nil {
		return 0, false
	}
	v, _, _ := unstructured.NestedString(cert.Object, "status", "notAfter")
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return 0, false
	}
	return t.Sub(now), true
}

// updatable reports whether kray keeps obj to its spec after creating it: only the head's and the workers'
// Certificates, whose IP SANs follow the pods.
func updatable(obj *unstructured.Unstructured) bool {
	c := obj.GetLabels()[constants.LabelComponent]
	return c == builder.TLSComponentHeadCertificate || c == builder.TLSComponentWorkerCert
}

// certificateReady reports whether cert-manager has issued cert's current spec (condition Ready at its
// generation).
func certificateReady(cert *unstructured.Unstructured) bool {
	if cert == nil {
		return false
	}
	conditions, _, _ := unstructured.NestedSlice(cert.Object, "status", "conditions")
	for _, c := range conditions {
		m, ok := c.(map[string]any)
		if !ok || m["type"] != "Ready" {
			continue
		}
		gen, _, _ := unstructured.NestedInt64(m, "observedGeneration")
		return m["status"] == string(metav1.ConditionTrue) && gen == cert.GetGeneration()
	}
	return false
}

// nodeIPs returns the IPs of the cluster's running head and worker pods, the IP SANs of their certificates.
func nodeIPs(pods []corev1.Pod) (head, worker []string) {
	for i := range pods {
		p := &pods[i]
		if p.DeletionTimestamp != nil || p.Status.PodIP == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		switch p.Labels[constants.LabelNodeType] {
		case constants.NodeTypeHead:
			head = append(head, p.Status.PodIP)
		case constants.NodeTypeWorker:
			worker = append(worker, p.Status.PodIP)
		}
	}
	return head, worker
}

// ownSecret adds an owner reference to cert on the Secret cert-manager wrote for it, once, so that deleting
// the cluster (and with it the Certificate) deletes the Secret and its private key; cert-manager leaves the
// Secret behind by default. Secrets are not cached: the metadata is read once per Secret per operator run.
func (r *Reconciler) ownSecret(ctx context.Context, cert *unstructured.Unstructured) error {
	if cert == nil || cert.GetUID() == "" {
		return nil
	}
	name, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName")
	key := types.NamespacedName{Namespace: cert.GetNamespace(), Name: name}
	if done, ok := r.ownedSecrets.Load(key); ok && done == cert.GetUID() {
		return nil
	}
	secret := &metav1.PartialObjectMetadata{}
	secret.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	switch err := r.APIReader.Get(ctx, key, secret); {
	case apierrors.IsNotFound(err):
		return nil // not issued yet
	case err != nil:
		return fmt.Errorf("read Secret %s: %w", name, err)
	}
	ref := metav1.OwnerReference{APIVersion: builder.CertificateGVK.GroupVersion().String(), Kind: builder.CertificateGVK.Kind, Name: cert.GetName(), UID: cert.GetUID()}
	for _, o := range secret.GetOwnerReferences() {
		if o.UID == ref.UID {
			r.ownedSecrets.Store(key, cert.GetUID())
			return nil
		}
	}
	patch := client.MergeFrom(secret.DeepCopy())
	secret.SetOwnerReferences(append(secret.GetOwnerReferences(), ref))
	if err := r.Writer.Patch(ctx, secret, patch); err != nil {
		return fmt.Errorf("add the owner reference of Certificate %s to Secret %s: %w", cert.GetName(), name, err)
	}
	r.ownedSecrets.Store(key, cert.GetUID())
	return nil
}

// forgetCertificateSecrets drops what ownedSecrets holds of a deleted cluster's Secrets.
func (r *Reconciler) forgetCertificateSecrets(cluster types.NamespacedName) {
	r.ownedSecrets.Range(func(k, _ any) bool {
		key, ok := k.(types.NamespacedName)
		if ok && key.Namespace == cluster.Namespace && (key.Name == names.TLSHeadSecret(cluster.Name) ||
			key.Name == names.TLSWorkerSecret(cluster.Name) || strings.HasPrefix(key.Name, names.TLSCASecret(cluster.Name, ""))) {
			r.ownedSecrets.Delete(k)
		}
		return true
	})
}

// readTLSFiles reads the head's certificate Secret of a tlsOptions cluster, which kray presents to its GCS and
// verifies the GCS with; nil for a cluster without mTLS.
func (r *Reconciler) readTLSFiles(ctx context.Context, s *state) (*ray.TLSFiles, error) {
	if !builder.TLSEnabled(s.effective) {
		return nil, nil
	}
	name := names.TLSHeadSecret(s.rc.Name)
	secret := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: s.rc.Namespace, Name: name}, secret); err != nil {
		return nil, fmt.Errorf("read the head's TLS Secret %s, whose certificate kray presents to the GCS: %w", name, err)
	}
	for _, k := range []string{builder.TLSSecretCert, builder.TLSSecretKey, builder.TLSSecretCA} {
		if len(secret.Data[k]) == 0 {
			return nil, fmt.Errorf("the head's TLS Secret %s has no %s", name, k)
		}
	}
	return &ray.TLSFiles{Cert: secret.Data[builder.TLSSecretCert], Key: secret.Data[builder.TLSSecretKey], CA: secret.Data[builder.TLSSecretCA]}, nil
}

// CertManagerServed reports whether the API server serves cert-manager's Issuers and Certificates
// (cert-manager.io/v1), which a tlsOptions cluster needs; it is asked once, at start (KubeRay's behaviour:
// install cert-manager, then restart the operator).
func CertManagerServed(d discovery.DiscoveryInterface) (bool, error) {
	return shared.Served(d, builder.CertificateGVK.GroupVersion().String(), "issuers", "certificates")
}

// tlsObjectKinds are empty cert-manager objects of the kinds kray writes, for the cache and the watches.
func tlsObjectKinds() []client.Object {
	var out []client.Object
	for _, gvk := range []schema.GroupVersionKind{builder.IssuerGVK, builder.CertificateGVK} {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		out = append(out, u)
	}
	return out
}

// CacheCertificates scopes the cache of cert-manager's Issuers and Certificates to those labelled with
// ray.io/cluster, for an operator that serves tlsOptions.
func CacheCertificates(opts *cache.Options) {
	for _, obj := range tlsObjectKinds() {
		opts.ByObject[obj] = cache.ByObject{Label: ownedSelector()}
	}
}
