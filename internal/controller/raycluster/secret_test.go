package raycluster

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rayv1 "github.com/kray-project/kray/api/v1"
)

// What kray remembers of a cluster's auth Secret goes when the cluster goes, so memory follows the clusters
// that exist; a cluster of the same name made again (a new UID) gets its Secret made again.
func TestAuthSecretMemoryGoesWithTheCluster(t *testing.T) {
	rc := cluster("c").group("a", 1).with(func(rc *rayv1.RayCluster) {
		rc.Spec.RayVersion = "2.52.0"
		rc.Spec.AuthOptions = &rayv1.AuthOptions{Mode: rayv1.AuthModeToken}
	}).obj()
	e := newEnv(t, rc)
	e.mustReconcile(rc)
	key := types.NamespacedName{Namespace: "ns", Name: "c"}
	if _, ok := e.r.createdSecrets.Load(key); !ok {
		t.Fatal("the Secret made is not remembered")
	}
	live := &rayv1.RayCluster{}
	if err := e.api.Get(context.Background(), key, live); err != nil {
		t.Fatal(err)
	}
	live.Finalizers = nil
	if err := e.api.Update(context.Background(), live); err != nil {
		t.Fatal(err)
	}
	if err := e.api.Delete(context.Background(), live); client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
	e.mustReconcile(rc)
	if v, ok := e.r.createdSecrets.Load(key); ok {
		t.Errorf("a deleted cluster is still remembered: %v", v)
	}
}
