package authtoken

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	rayv1 "github.com/kray-project/kray/api/v1"
)

func TestRead(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	api := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"}, Data: map[string][]byte{"auth_token": []byte("s3cret")}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "empty", Namespace: "ns"}},
	).Build()
	cluster := func(auth *rayv1.AuthOptions) *rayv1.RayCluster {
		return &rayv1.RayCluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"}, Spec: rayv1.RayClusterSpec{AuthOptions: auth}}
	}
	token := &rayv1.AuthOptions{Mode: rayv1.AuthModeToken}
	tests := []struct {
		name, want, wantErr string
		rc                  *rayv1.RayCluster
	}{
		{name: "auth off", rc: cluster(nil)},
		{name: "the generated Secret", rc: cluster(token), want: "s3cret"},
		{name: "Kubernetes token auth", rc: cluster(&rayv1.AuthOptions{Mode: rayv1.AuthModeToken, EnableK8sTokenAuth: ptr.To(true)}), wantErr: ErrK8sTokenAuth.Error()},
		{name: "a Secret without the key", rc: cluster(&rayv1.AuthOptions{Mode: rayv1.AuthModeToken, SecretName: ptr.To("empty")}), wantErr: `holds no "auth_token" key`},
		{name: "no Secret", rc: cluster(&rayv1.AuthOptions{Mode: rayv1.AuthModeToken, SecretName: ptr.To("gone")}), wantErr: "read the Ray auth token from Secret ns/gone"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Read(context.Background(), api, tt.rc)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				if tt.wantErr == ErrK8sTokenAuth.Error() && !errors.Is(err, ErrK8sTokenAuth) {
					t.Errorf("err is not ErrK8sTokenAuth")
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("Read = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}
