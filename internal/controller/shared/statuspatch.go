package shared

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	rayv1 "github.com/kray-project/kray/api/v1"
)

// statusPatcher writes the status subresource of kray's custom resources with a JSON patch of two operations:
// set metadata.resourceVersion to the one the status was computed from, and set status to the new status.
// The API server applies it to the stored object, so a concurrent write fails it with a Conflict as an Update
// would, and the status is replaced whole (a field no longer set is removed). Unlike an Update, neither the
// spec (the pod templates: most of a RayCluster's bytes) is encoded and sent, nor the answer decoded: kray
// reads its objects from the informer cache, never from a write's answer.
type statusPatcher struct {
	scheme *runtime.Scheme
	mapper meta.RESTMapper
	cfg    *rest.Config
	http   *http.Client

	mu      sync.Mutex
	targets map[schema.GroupVersionKind]statusTarget
}

// statusTarget is where the status of one kind is written.
type statusTarget struct {
	client     rest.Interface
	resource   string
	namespaced bool
}

// jsonPatchOp is one operation of an RFC 6902 JSON patch.
type jsonPatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// statusOf returns the status of the kinds whose status kray writes.
func statusOf(obj client.Object) (any, error) {
	switch o := obj.(type) {
	case *rayv1.RayCluster:
		return o.Status, nil
	case *rayv1.RayJob:
		return o.Status, nil
	case *rayv1.RayService:
		return o.Status, nil
	case *rayv1.RayCronJob:
		return o.Status, nil
	default:
		return nil, fmt.Errorf("no status write for %T", obj)
	}
}

// statusPatch is the JSON patch that sets obj's status, conditional on obj's resourceVersion. "add" sets a
// member whether or not it exists (a new object has no status yet).
func statusPatch(obj client.Object) ([]byte, error) {
	if obj.GetResourceVersion() == "" {
		return nil, fmt.Errorf("write the status of %s/%s: no resourceVersion to write it against", obj.GetNamespace(), obj.GetName())
	}
	st, err := statusOf(obj)
	if err != nil {
		return nil, err
	}
	return json.Marshal([]jsonPatchOp{
		{Op: "add", Path: "/metadata/resourceVersion", Value: obj.GetResourceVersion()},
		{Op: "add", Path: "/status", Value: st},
	})
}

// write sends obj's status; the answer's body is read but not decoded unless it is an error.
func (p *statusPatcher) write(ctx context.Context, obj client.Object) error {
	body, err := statusPatch(obj)
	if err != nil {
		return err
	}
	t, err := p.target(obj)
	if err != nil {
		return err
	}
	return t.client.Patch(types.JSONPatchType).
		NamespaceIfScoped(obj.GetNamespace(), t.namespaced).
		Resource(t.resource).
		Name(obj.GetName()).
		SubResource("status").
		Body(body).
		Do(ctx).
		Error()
}

// target returns, building it on first use, where obj's kind's status is written.
func (p *statusPatcher) target(obj client.Object) (statusTarget, error) {
	gvk, err := apiutil.GVKForObject(obj, p.scheme)
	if err != nil {
		return statusTarget{}, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if t, ok := p.targets[gvk]; ok {
		return t, nil
	}
	mapping, err := p.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return statusTarget{}, fmt.Errorf("map %s: %w", gvk, err)
	}
	c, err := apiutil.RESTClientForGVK(gvk, true, false, p.cfg, serializer.NewCodecFactory(p.scheme), p.http)
	if err != nil {
		return statusTarget{}, fmt.Errorf("REST client for %s: %w", gvk, err)
	}
	t := statusTarget{client: c, resource: mapping.Resource.Resource, namespaced: mapping.Scope.Name() == meta.RESTScopeNameNamespace}
	if p.targets == nil {
		p.targets = map[schema.GroupVersionKind]statusTarget{}
	}
	p.targets[gvk] = t
	return t, nil
}
