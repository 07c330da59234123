package apierror

import (
	"errors"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestNamespaceGoing(t *testing.T) {
	terminating := &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: 403, Reason: metav1.StatusReasonForbidden,
		Message: `rayclusters.ray.io "x" is forbidden: unable to create new content in namespace ns because it is being terminated`,
		Details: &metav1.StatusDetails{Name: "x", Kind: "rayclusters", Causes: []metav1.StatusCause{{Type: corev1.NamespaceTerminatingCause}}}}}
	for _, tt := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"terminating", terminating, true},
		{"terminating, wrapped and joined", errors.Join(errors.New("other"), fmt.Errorf("create: %w", terminating)), true},
		{"namespace gone", apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "ns"), true},
		{"an object gone", apierrors.NewNotFound(schema.GroupResource{Resource: "services"}, "x"), false},
		{"forbidden otherwise", apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "x", errors.New("no")), false},
		{"not an API error", errors.New("connection refused"), false},
	} {
		if got := NamespaceGoing(tt.err); got != tt.want {
			t.Errorf("%s: %t, want %t", tt.name, got, tt.want)
		}
	}
}
