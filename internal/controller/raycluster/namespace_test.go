package raycluster

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kray-project/kray/internal/writetest"
)

// A cluster whose namespace is being deleted, or is gone, is going away with it: its reconcile returns no
// error (no retry, no stack trace in the log) and writes no status; any other failure is still an error.
func TestNamespaceGoingAwayIsNotAFailure(t *testing.T) {
	terminating := &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: 403, Reason: metav1.StatusReasonForbidden,
		Message: `secrets "x" is forbidden: unable to create new content in namespace ns because it is being terminated`,
		Details: &metav1.StatusDetails{Name: "x", Kind: "secrets", Causes: []metav1.StatusCause{{Type: corev1.NamespaceTerminatingCause, Message: "namespace ns is being terminated", Field: "metadata.namespace"}}}}}
	gone := apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "ns")
	objectGone := apierrors.NewNotFound(schema.GroupResource{Resource: "services"}, "x")
	for _, tt := range []struct {
		name    string
		err     error
		wantErr bool
	}{
		{"namespace terminating", terminating, false},
		{"namespace gone", gone, false},
		{"an object not found is a real failure", objectGone, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rc := cluster("c").group("g", 1).obj()
			e := newEnv(t, rc)
			e.writer.Fail(writetest.Create, "", "", tt.err)
			writes, res, err := e.reconcile(rc)
			if (err != nil) != tt.wantErr {
				t.Fatalf("Reconcile error %v, want an error: %t", err, tt.wantErr)
			}
			if !tt.wantErr {
				if res.RequeueAfter != 0 || res.Requeue {
					t.Errorf("result %+v: a cluster going away is not retried", res)
				}
				for _, w := range writes {
					if w == "status RayCluster/c" {
						t.Errorf("writes %v: no status for a cluster going away", writes)
					}
				}
			}
			if len(writes) == 0 {
				t.Fatalf("no write was tried: the test did not reach a create")
			}
		})
	}
}
