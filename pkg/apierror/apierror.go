// Package apierror classifies the API server's errors the same way for every controller.
package apierror

import (
	"errors"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// NamespaceGoing reports whether err says that the namespace written to is being deleted (Forbidden, cause
// NamespaceTerminating) or no longer exists (NotFound for the namespace itself, not for an object in it): every
// object in it is going away, and a write for it is moot rather than a failure to retry.
func NamespaceGoing(err error) bool {
	if err == nil {
		return false
	}
	if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
		return true
	}
	var st apierrors.APIStatus
	if !apierrors.IsNotFound(err) || !errors.As(err, &st) {
		return false
	}
	d := st.Status().Details
	return d != nil && d.Kind == "namespaces"
}
