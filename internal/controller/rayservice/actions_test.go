package rayservice

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/internal/writetest"
	"github.com/kray-project/kray/pkg/constants"
)

// A Gateway, HTTPRoute or Service of the RayService's name that someone else made is reported in a Warning and
// not changed, with no error: the RayService tries again at its next poll instead of backing off, so deleting
// the object (which its cache does not see) lets it go on within a poll.
func TestForeignObjectOfTheRayServicesNameIsRetriedAtThePoll(t *testing.T) {
	svc := service(stepwise(50, 50, 1))
	svc.UID = "svc-uid"
	gateway := Gateway(svc)
	service := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: svc.Namespace, Name: ServeServiceName(svc),
		Labels: map[string]string{constants.LabelCluster: "c1"}}}
	for _, tc := range []struct {
		name    string
		foreign client.Object
		sync    func(r *Reconciler) (string, error)
	}{
		{"Gateway", &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: svc.Namespace, Name: gateway.Name}, Spec: gwv1.GatewaySpec{GatewayClassName: "someone-elses"}},
			func(r *Reconciler) (string, error) {
				ev, err := r.syncRouting(context.Background(), svc, gateway.DeepCopy(), nil)
				return ev.Reason + " " + ev.Message, err
			}},
		{"Service", &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: svc.Namespace, Name: service.Name}},
			func(r *Reconciler) (string, error) {
				ev, err := r.syncService(context.Background(), svc, Observed{}, service.DeepCopy())
				return ev.Reason + " " + ev.Message, err
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			scheme := runtime.NewScheme()
			for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, rayv1.AddToScheme, gwv1.Install} {
				if err := add(scheme); err != nil {
					t.Fatal(err)
				}
			}
			api := fake.NewClientBuilder().WithScheme(scheme).WithObjects(tc.foreign).Build()
			writer := writetest.New(api)
			r := &Reconciler{APIReader: api, Writer: writer}
			ev, err := tc.sync(r)
			if err != nil || !strings.Contains(ev, "exists and is not controlled by RayService") || !strings.HasPrefix(ev, "FailedToCreate") {
				t.Fatalf("foreign %s: %q, %v; want a FailedToCreate Warning naming it and no error", tc.name, ev, err)
			}
			for _, w := range writer.Writes() {
				if w.Kind != "" && w.Verb != "create" {
					t.Errorf("kray wrote the foreign %s: %s", tc.name, w)
				}
			}
			if err := api.Delete(context.Background(), tc.foreign); err != nil {
				t.Fatal(err)
			}
			if ev, err := tc.sync(r); err != nil || !strings.HasPrefix(ev, "Created") {
				t.Errorf("once the foreign %s is gone: %q, %v; want it created", tc.name, ev, err)
			}
		})
	}
}
