// Package shared is what every kray controller needs around its reconcile: the write seam (Writer) and its
// production form, the status write, the finalizer write, the ownership check, events sent once per
// repetition window, and the clock.
package shared

import (
	"context"
	"net/http"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ConflictRetry is the delay before a reconcile whose status write lost a race runs again; the cache has
// usually caught up with the newer object by then.
const ConflictRetry = 200 * time.Millisecond

// Writer is every kind of write kray's controllers make to the API server. They write only through it, so a
// test can record each write and make any of them fail.
type Writer interface {
	Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error
	Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error
	Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error
	Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error
	// UpdateStatus writes obj's status subresource, failing with a Conflict if obj's resourceVersion is not
	// the stored one. Nothing but the status is written, and obj is not updated from the answer.
	UpdateStatus(ctx context.Context, obj client.Object) error
}

// ClientWriter is the Writer that sends every write to the API server through c, except status writes,
// which go as a status-only JSON patch (statusPatcher) over cfg and httpClient, those of c's manager.
func ClientWriter(c client.Client, cfg *rest.Config, httpClient *http.Client) Writer {
	return clientWriter{Client: c, status: &statusPatcher{scheme: c.Scheme(), mapper: c.RESTMapper(), cfg: cfg, http: httpClient}}
}

type clientWriter struct {
	client.Client
	status *statusPatcher
}

// UpdateStatus writes obj's status, failing with a Conflict if obj's resourceVersion is no longer the
// stored one. Only the status is sent and obj is not updated from the answer.
func (w clientWriter) UpdateStatus(ctx context.Context, obj client.Object) error {
	return w.status.write(ctx, obj)
}

// Clock is c, or the wall clock when c is nil (a controller built without one).
func Clock(c clock.PassiveClock) clock.PassiveClock {
	if c == nil {
		return clock.RealClock{}
	}
	return c
}
