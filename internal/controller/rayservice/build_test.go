package rayservice

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/constants"
)

// ServeService follows KubeRay v1.7: the head's serving ports ("serve", "serve-*"), a custom Service's
// own definition of a port of the same name, its type or else the head group's.
func TestServeService(t *testing.T) {
	headPorts := func(ports ...corev1.ContainerPort) func(*rayv1.RayService) {
		return func(s *rayv1.RayService) {
			s.Spec.RayClusterSpec.HeadGroupSpec.Template.Spec.Containers[0].Ports = ports
		}
	}
	custom := func(typ corev1.ServiceType, ports ...corev1.ServicePort) func(*rayv1.RayService) {
		return func(s *rayv1.RayService) {
			s.Spec.ServeService = &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "custom", Labels: map[string]string{"team": "a"}},
				Spec: corev1.ServiceSpec{Type: typ, Ports: ports}}
		}
	}
	nodePort := func(s *rayv1.RayService) {
		s.Spec.RayClusterSpec.HeadGroupSpec.ServiceType = corev1.ServiceTypeNodePort
	}
	h2c := "kubernetes.io/h2c"
	for _, tt := range []struct {
		name      string
		edits     []func(*rayv1.RayService)
		wantName  string
		wantType  corev1.ServiceType
		wantPorts []corev1.ServicePort
		wantErr   bool
	}{
		{name: "the head's serve port", wantName: "svc-serve-svc", wantType: corev1.ServiceTypeClusterIP,
			wantPorts: []corev1.ServicePort{{Name: "serve", Port: 8000}}},
		{name: "every serving port, the head group's type", edits: []func(*rayv1.RayService){nodePort,
			headPorts(corev1.ContainerPort{Name: "dashboard", ContainerPort: 8265}, corev1.ContainerPort{Name: "serve-grpc", ContainerPort: 9000}, corev1.ContainerPort{Name: "serve", ContainerPort: 8001})},
			wantName: "svc-serve-svc", wantType: corev1.ServiceTypeNodePort,
			wantPorts: []corev1.ServicePort{{Name: "serve", Port: 8001}, {Name: "serve-grpc", Port: 9000}}},
		{name: "no serving port and no custom Service", edits: []func(*rayv1.RayService){headPorts(corev1.ContainerPort{Name: "dashboard", ContainerPort: 8265})},
			wantErr: true},
		{name: "a head without ports gets serve:8000", edits: []func(*rayv1.RayService){headPorts()},
			wantName: "svc-serve-svc", wantType: corev1.ServiceTypeClusterIP, wantPorts: []corev1.ServicePort{{Name: "serve", Port: 8000}}},
		{name: "custom without a type takes the head group's", edits: []func(*rayv1.RayService){nodePort, custom("")},
			wantName: "custom", wantType: corev1.ServiceTypeNodePort, wantPorts: []corev1.ServicePort{{Name: "serve", Port: 8000}}},
		{name: "custom type kept", edits: []func(*rayv1.RayService){nodePort, custom(corev1.ServiceTypeLoadBalancer)},
			wantName: "custom", wantType: corev1.ServiceTypeLoadBalancer, wantPorts: []corev1.ServicePort{{Name: "serve", Port: 8000}}},
		{name: "custom definition of a serving port kept", edits: []func(*rayv1.RayService){
			headPorts(corev1.ContainerPort{Name: "serve", ContainerPort: 8000}, corev1.ContainerPort{Name: "serve-grpc", ContainerPort: 9000}),
			custom("", corev1.ServicePort{Name: "serve-grpc", Port: 9000, AppProtocol: &h2c}, corev1.ServicePort{Name: "other", Port: 1})},
			wantName: "custom", wantType: corev1.ServiceTypeClusterIP,
			wantPorts: []corev1.ServicePort{{Name: "serve", Port: 8000}, {Name: "serve-grpc", Port: 9000, AppProtocol: &h2c}}},
		{name: "custom ports kept when the head names no serving port", edits: []func(*rayv1.RayService){
			headPorts(corev1.ContainerPort{Name: "dashboard", ContainerPort: 8265}), custom("", corev1.ServicePort{Name: "serve", Port: 8080})},
			wantName: "custom", wantType: corev1.ServiceTypeClusterIP, wantPorts: []corev1.ServicePort{{Name: "serve", Port: 8080}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			svc := service(tt.edits...)
			got, err := ServeService(svc, Cluster(svc, "svc-abcde"))
			if tt.wantErr {
				if err == nil || err.Error() != ErrNoServePort.Error() {
					t.Fatalf("err = %v, want %v", err, ErrNoServePort)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Name != tt.wantName || got.Spec.Type != tt.wantType {
				t.Errorf("name %s, type %s; want %s, %s", got.Name, got.Spec.Type, tt.wantName, tt.wantType)
			}
			if diff := cmp.Diff(tt.wantPorts, got.Spec.Ports); diff != "" {
				t.Errorf("ports (-want +got):\n%s", diff)
			}
			if want := map[string]string{constants.LabelCluster: "svc-abcde", constants.LabelServe: "true"}; !cmp.Equal(got.Spec.Selector, want) {
				t.Errorf("selector %v, want %v", got.Spec.Selector, want)
			}
		})
	}
}
