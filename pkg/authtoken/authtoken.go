// Package authtoken reads the Ray auth token of a cluster with token authentication, for kray's own calls to
// its Ray services (the GCS drain, the dashboard's Job API).
package authtoken

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/builder"
	"github.com/kray-project/kray/pkg/names"
	"github.com/kray-project/kray/pkg/spec"
)

// ErrK8sTokenAuth reports a cluster whose Ray checks Kubernetes tokens (enableK8sTokenAuth), which kray's
// clients do not send.
var ErrK8sTokenAuth = errors.New("the cluster uses Kubernetes token auth (enableK8sTokenAuth), which kray's Ray clients do not support")

// Read returns the token rc's Ray expects, "" when token auth is off. It reads the Secret by name through r,
// which should be the API server itself (get only: no list, no watch, no Secret kept in memory).
func Read(ctx context.Context, r client.Reader, rc *rayv1.RayCluster) (string, error) {
	switch {
	case !spec.AuthEnabled(rc):
		return "", nil
	case spec.K8sTokenAuth(rc):
		return "", ErrK8sTokenAuth
	}
	key := client.ObjectKey{Namespace: rc.Namespace, Name: names.AuthSecretFor(rc)}
	secret := &corev1.Secret{}
	if err := r.Get(ctx, key, secret); err != nil {
		return "", fmt.Errorf("read the Ray auth token from Secret %s: %w", key, err)
	}
	token := string(secret.Data[builder.AuthTokenKey])
	if token == "" {
		return "", fmt.Errorf("Secret %s holds no %q key", key, builder.AuthTokenKey)
	}
	return token, nil
}
