package main

import "testing"

// Kruise alone applies exactly what kray builds for a cluster, without the owner reference no RayCluster
// could satisfy.
func TestBuiltObjects(t *testing.T) {
	objs, err := builtObjects("ns", "c-001", smallCluster)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"services/c-001-head-svc", "statefulsets/c-001-head", "clonesets/c-001-workers-worker"}
	if len(objs) != len(want) {
		t.Fatalf("%d objects, want %d", len(objs), len(want))
	}
	for i, o := range objs {
		if got := o.gvr.Resource + "/" + o.obj.GetName(); got != want[i] {
			t.Errorf("object %d is %s, want %s", i, got, want[i])
		}
		if o.obj.GetNamespace() != "ns" || len(o.obj.GetOwnerReferences()) != 0 {
			t.Errorf("%s: namespace %q, owner references %v", want[i], o.obj.GetNamespace(), o.obj.GetOwnerReferences())
		}
	}
}
