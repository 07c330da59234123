// Package cachetest is a reconciler test's informer cache: a separate view of a fake API server that holds
// only what the operator's cache options let in (per-kind label selectors), and that shows the server's
// objects as of its last Sync, so that a test can set up "on the server, not (yet) in the cache".
package cachetest

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// Cache is a client.Reader over snapshots of API's objects of the kinds it was given. It is safe for
// concurrent use.
type Cache struct {
	api    client.Reader
	scheme *runtime.Scheme
	kinds  map[schema.GroupVersionKind]client.ObjectList
	// filters are the label selectors of the cache options, by the kind they apply to.
	filters map[schema.GroupVersionKind]labels.Selector

	mu   sync.Mutex
	objs map[schema.GroupVersionKind]map[client.ObjectKey]client.Object
}

// New returns an empty Cache of api's objects of the listed kinds (each a typed list, e.g.
// &corev1.PodList{}), filtered as opts' ByObject label selectors filter the operator's cache. Call Sync to
// fill it.
func New(api client.Reader, scheme *runtime.Scheme, opts cache.Options, kinds ...client.ObjectList) (*Cache, error) {
	c := &Cache{api: api, scheme: scheme, kinds: map[schema.GroupVersionKind]client.ObjectList{},
		filters: map[schema.GroupVersionKind]labels.Selector{}, objs: map[schema.GroupVersionKind]map[client.ObjectKey]client.Object{}}
	for obj, by := range opts.ByObject {
		if by.Label == nil {
			continue
		}
		gvk, err := apiutil.GVKForObject(obj, scheme)
		if runtime.IsNotRegisteredError(err) {
			continue // a kind the test's scheme (and so this cache) does not hold
		}
		if err != nil {
			return nil, err
		}
		c.filters[gvk] = by.Label
	}
	for _, list := range kinds {
		gvk, err := apiutil.GVKForObject(list, scheme)
		if err != nil {
			return nil, err
		}
		gvk.Kind = strings.TrimSuffix(gvk.Kind, "List")
		c.kinds[gvk] = list
	}
	return c, nil
}

// Sync makes the cache show API's objects as they are now (within the label filters).
func (c *Cache) Sync(ctx context.Context) error {
	objs := map[schema.GroupVersionKind]map[client.ObjectKey]client.Object{}
	for gvk, proto := range c.kinds {
		list := proto.DeepCopyObject().(client.ObjectList)
		if err := c.api.List(ctx, list); err != nil {
			return fmt.Errorf("list %s: %w", gvk.Kind, err)
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			return err
		}
		objs[gvk] = map[client.ObjectKey]client.Object{}
		for _, item := range items {
			obj := item.(client.Object)
			if sel, ok := c.filters[gvk]; ok && !sel.Matches(labels.Set(obj.GetLabels())) {
				continue
			}
			objs[gvk][client.ObjectKeyFromObject(obj)] = obj.DeepCopyObject().(client.Object)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.objs = objs
	return nil
}

// Get copies the cached object of key into obj, or returns NotFound.
func (c *Cache) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	gvk, err := c.kind(obj)
	if err != nil {
		return err
	}
	c.mu.Lock()
	stored, ok := c.objs[gvk][key]
	c.mu.Unlock()
	if !ok {
		return apierrors.NewNotFound(schema.GroupResource{Group: gvk.Group, Resource: strings.ToLower(gvk.Kind) + "s"}, key.Name)
	}
	reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(stored.DeepCopyObject()).Elem())
	return nil
}

// List fills list with the cached objects that match its namespace and label selector; a field selector
// is refused (the operator's cache answers those from indexes this view does not have).
func (c *Cache) List(_ context.Context, list client.ObjectList, opts ...client.ListOption) error {
	gvk, err := apiutil.GVKForObject(list, c.scheme)
	if err != nil {
		return err
	}
	gvk.Kind = strings.TrimSuffix(gvk.Kind, "List")
	if _, ok := c.kinds[gvk]; !ok {
		return fmt.Errorf("cachetest: %s is not a cached kind", gvk.Kind)
	}
	lo := (&client.ListOptions{}).ApplyOptions(opts)
	if lo.FieldSelector != nil && !lo.FieldSelector.Empty() {
		return fmt.Errorf("cachetest: field selectors are not supported")
	}
	c.mu.Lock()
	var items []runtime.Object
	for key, obj := range c.objs[gvk] {
		if lo.Namespace != "" && key.Namespace != lo.Namespace {
			continue
		}
		if lo.LabelSelector != nil && !lo.LabelSelector.Matches(labels.Set(obj.GetLabels())) {
			continue
		}
		items = append(items, obj.DeepCopyObject())
	}
	c.mu.Unlock()
	return meta.SetList(list, items)
}

// kind is obj's kind, which must be cached.
func (c *Cache) kind(obj client.Object) (schema.GroupVersionKind, error) {
	gvk, err := apiutil.GVKForObject(obj, c.scheme)
	if err != nil {
		return gvk, err
	}
	if _, ok := c.kinds[gvk]; !ok {
		return gvk, fmt.Errorf("cachetest: %s is not a cached kind", gvk.Kind)
	}
	return gvk, nil
}
