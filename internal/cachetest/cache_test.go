package cachetest

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func TestCacheFiltersAndLags(t *testing.T) {
	ctx := context.Background()
	labelled := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns", Labels: map[string]string{"ray.io/cluster": "c"}}}
	bare := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "ns"}}
	api := fake.NewClientBuilder().WithObjects(labelled, bare).Build()
	sel, err := labels.Parse("ray.io/cluster")
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(api, clientgoscheme.Scheme, cache.Options{ByObject: map[client.Object]cache.ByObject{&corev1.Service{}: {Label: sel}}}, &corev1.ServiceList{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(labelled), &corev1.Service{}); !apierrors.IsNotFound(err) {
		t.Fatalf("before the first Sync: %v, want NotFound", err)
	}
	if err := c.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	got := &corev1.Service{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(labelled), got); err != nil || got.ResourceVersion == "" {
		t.Fatalf("labelled Service: %v (%q), want it with its resourceVersion", err, got.ResourceVersion)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(bare), &corev1.Service{}); !apierrors.IsNotFound(err) {
		t.Fatalf("unlabelled Service: %v, want NotFound (filtered out)", err)
	}
	late := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "late", Namespace: "ns", Labels: map[string]string{"ray.io/cluster": "c"}}}
	if err := api.Create(ctx, late); err != nil {
		t.Fatal(err)
	}
	list := &corev1.ServiceList{}
	if err := c.List(ctx, list, client.InNamespace("ns")); err != nil || len(list.Items) != 1 {
		t.Fatalf("lagging list: %d items, %v; want only the one synced", len(list.Items), err)
	}
	if err := c.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.List(ctx, list, client.InNamespace("ns"), client.MatchingLabels{"ray.io/cluster": "c"}); err != nil || len(list.Items) != 2 {
		t.Fatalf("after Sync: %d items, %v; want 2", len(list.Items), err)
	}
	if err := c.List(ctx, list, client.InNamespace("other")); err != nil || len(list.Items) != 0 {
		t.Fatalf("another namespace: %d items, %v; want none", len(list.Items), err)
	}
	if err := c.List(ctx, &corev1.PodList{}); err == nil {
		t.Fatal("a kind the cache does not hold was listed without an error")
	}
}
