package raycluster

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"

	"k8s.io/apimachinery/pkg/types"

	"github.com/kray-project/kray/pkg/builder"
	"github.com/kray-project/kray/pkg/names"
)

// reconcileAuthSecret creates the Secret holding a generated Ray auth token (32 random bytes, base64) once.
// kray may create Secrets but never read them, so it remembers in memory that the Secret exists; after a
// restart the first create answers AlreadyExists, which also counts as existing.
func (r *Reconciler) reconcileAuthSecret(ctx context.Context, s *state) error {
	if builder.AuthSecret(s.effective, "") == nil {
		return nil
	}
	key := types.NamespacedName{Namespace: s.rc.Namespace, Name: s.rc.Name}
	made := string(s.rc.UID) + "/" + names.AuthSecretFor(s.effective)
	if v, ok := r.createdSecrets.Load(key); ok && v == made {
		return nil
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return fmt.Errorf("generate auth token: %w", err)
	}
	secret := builder.AuthSecret(s.effective, base64.StdEncoding.EncodeToString(raw))
	created, err := r.create(ctx, secret)
	if err != nil {
		s.warn(EventFailedToCreateSecret, "Failed to create Secret %s/%s: %v", secret.Namespace, secret.Name, err)
		return fmt.Errorf("create Secret %s: %w", secret.Name, err)
	}
	if created {
		s.normal(EventCreatedSecret, "Created Secret %s/%s holding the Ray auth token", secret.Namespace, secret.Name)
	}
	r.createdSecrets.Store(key, made)
	return nil
}
