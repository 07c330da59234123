package controller

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/kray-project/kray/pkg/builder"
	"github.com/kray-project/kray/pkg/constants"
)

// reconcileIngress creates the head Ingress when enableIngress is set, and brings an Ingress kray owns back
// to the spec (KubeRay updates it in place).
func (r *Reconciler) reconcileIngress(ctx context.Context, s *state) error {
	desired := builder.HeadIngress(s.rc)
	if desired == nil {
		return nil
	}
	live := &networkingv1.Ingress{}
	if err := r.createOnce(ctx, s, desired, live, constants.EventCreatedIngress, constants.EventFailedToCreateIngress); err != nil || live.UID == "" {
		return err
	}
	if !ownedBy(live, s.rc) || (equality.Semantic.DeepEqual(live.Spec, desired.Spec) && hasAll(live.Annotations, desired.Annotations)) {
		return nil
	}
	// Annotations that others (an ingress controller) add are kept; kray's own are brought back.
	live.Spec = desired.Spec
	for k, v := range desired.Annotations {
		if live.Annotations == nil {
			live.Annotations = map[string]string{}
		}
		live.Annotations[k] = v
	}
	if err := r.Client.Update(ctx, live); err != nil {
		s.warn(constants.EventFailedToUpdateIngress, "Failed to update Ingress %s/%s: %v", live.Namespace, live.Name, err)
		return fmt.Errorf("update Ingress %s: %w", live.Name, err)
	}
	s.normal(constants.EventUpdatedIngress, "Updated Ingress %s/%s", live.Namespace, live.Name)
	return nil
}

// reconcileAuthSecret creates the Secret holding a generated Ray auth token (32 random bytes, base64) once.
// kray may create Secrets but never read them, so it remembers in memory that the Secret exists; after a
// restart the first create answers AlreadyExists, which also counts as existing.
func (r *Reconciler) reconcileAuthSecret(ctx context.Context, s *state) error {
	if builder.AuthSecret(s.rc, "") == nil {
		return nil
	}
	key := string(s.rc.UID) + "/Secret/" + builder.AuthSecretName(s.rc)
	if _, done := r.createdSecrets.Load(key); done {
		return nil
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return fmt.Errorf("generate auth token: %w", err)
	}
	secret := builder.AuthSecret(s.rc, base64.StdEncoding.EncodeToString(raw))
	switch err := r.Client.Create(ctx, secret); {
	case err == nil:
		s.normal(constants.EventCreatedSecret, "Created Secret %s/%s holding the Ray auth token", secret.Namespace, secret.Name)
	case ignoreAlreadyExists(err) != nil:
		s.warn(constants.EventFailedToCreateSecret, "Failed to create Secret %s/%s: %v", secret.Namespace, secret.Name, err)
		return fmt.Errorf("create Secret %s: %w", secret.Name, err)
	}
	r.createdSecrets.Store(key, true)
	return nil
}

// reconcileServeService creates the serve Service once when the cluster asks for it.
func (r *Reconciler) reconcileServeService(ctx context.Context, s *state) error {
	svc := builder.ServeService(s.rc)
	if svc == nil {
		return nil
	}
	return r.createOnce(ctx, s, svc, &corev1.Service{}, constants.EventCreatedService, constants.EventFailedToCreateService)
}

// reconcileGCSStoragePVC creates the embedded GCS store's PVC once; the head pod mounts it.
func (r *Reconciler) reconcileGCSStoragePVC(ctx context.Context, s *state) error {
	pvc := builder.GCSStoragePVC(s.rc)
	if pvc == nil {
		return nil
	}
	return r.createOnce(ctx, s, pvc, &corev1.PersistentVolumeClaim{}, constants.EventCreatedPVC, constants.EventFailedToCreatePVC)
}

// hasAll reports whether got holds every key of want with the same value.
func hasAll(got, want map[string]string) bool {
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}
