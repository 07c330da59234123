// Package writetest is a recording fake of a controller's write seam: it applies every write to a
// controller-runtime fake client, records it, and makes the writes a test chooses fail.
package writetest

import (
	"context"
	"fmt"
	"slices"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// The verbs of a recorded write.
const (
	Create = "create"
	Update = "update"
	Patch  = "patch"
	Delete = "delete"
	Status = "status"
	// CreateDryRun matches, in Fail and FailOnce, the dry-run creates that Create does not match.
	CreateDryRun = "create-dry-run"
)

// Write is one write as the controller sent it.
type Write struct {
	Verb string
	Kind string
	Name string
	// DryRun is set on a dry-run request, which changes nothing.
	DryRun bool
}

// String is "verb Kind/name", with " (dry run)" for a dry run.
func (w Write) String() string {
	s := fmt.Sprintf("%s %s/%s", w.Verb, w.Kind, w.Name)
	if w.DryRun {
		s += " (dry run)"
	}
	return s
}

// Writer records writes and applies them to Client. It is safe for concurrent use.
type Writer struct {
	// Client is where writes go; reads in the test see them.
	Client client.Client

	mu     sync.Mutex
	writes []Write
	faults []fault
}

type fault struct {
	verb, kind, name string
	err              error
	times            int // < 0: every time
}

// New returns a Writer that applies writes to c.
func New(c client.Client) *Writer { return &Writer{Client: c} }

// Fail makes every write matching verb, kind and name fail with err; an empty kind or name matches any, and a
// dry-run create matches only the verb CreateDryRun.
// A failed write is recorded and changes nothing.
func (w *Writer) Fail(verb, kind, name string, err error) { w.addFault(verb, kind, name, err, -1) }

// FailOnce is Fail for the next matching write only.
func (w *Writer) FailOnce(verb, kind, name string, err error) { w.addFault(verb, kind, name, err, 1) }

func (w *Writer) addFault(verb, kind, name string, err error, times int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.faults = append(w.faults, fault{verb: verb, kind: kind, name: name, err: err, times: times})
}

// Writes returns the writes recorded so far, dry runs included.
func (w *Writer) Writes() []Write {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.writes)
}

// ClearFaults forgets the faults that have not fired yet.
func (w *Writer) ClearFaults() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.faults = nil
}

// Reset forgets the recorded writes (not the faults).
func (w *Writer) Reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes = nil
}

// record records the write and returns the error a fault asks for, if any.
func (w *Writer) record(verb string, obj client.Object, dryRun bool) error {
	kind := obj.GetObjectKind().GroupVersionKind().Kind
	if gvk, err := apiutil.GVKForObject(obj, w.Client.Scheme()); err == nil {
		kind = gvk.Kind
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes = append(w.writes, Write{Verb: verb, Kind: kind, Name: obj.GetName(), DryRun: dryRun})
	match := verb
	if dryRun && verb == Create {
		match = CreateDryRun
	}
	for i := range w.faults {
		f := &w.faults[i]
		if f.times == 0 || f.verb != match || (f.kind != "" && f.kind != kind) || (f.name != "" && f.name != obj.GetName()) {
			continue
		}
		if f.times > 0 {
			f.times--
		}
		return f.err
	}
	return nil
}

func (w *Writer) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	o := (&client.CreateOptions{}).ApplyOptions(opts)
	if err := w.record(Create, obj, slices.Contains(o.DryRun, metav1.DryRunAll)); err != nil {
		return err
	}
	return w.Client.Create(ctx, obj, opts...)
}

func (w *Writer) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	o := (&client.UpdateOptions{}).ApplyOptions(opts)
	if err := w.record(Update, obj, slices.Contains(o.DryRun, metav1.DryRunAll)); err != nil {
		return err
	}
	return w.Client.Update(ctx, obj, opts...)
}

func (w *Writer) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	o := (&client.PatchOptions{}).ApplyOptions(opts)
	if err := w.record(Patch, obj, slices.Contains(o.DryRun, metav1.DryRunAll)); err != nil {
		return err
	}
	return w.Client.Patch(ctx, obj, patch, opts...)
}

func (w *Writer) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	o := (&client.DeleteOptions{}).ApplyOptions(opts)
	if err := w.record(Delete, obj, slices.Contains(o.DryRun, metav1.DryRunAll)); err != nil {
		return err
	}
	return w.Client.Delete(ctx, obj, opts...)
}

// UpdateStatus writes obj's status subresource.
func (w *Writer) UpdateStatus(ctx context.Context, obj client.Object) error {
	if err := w.record(Status, obj, false); err != nil {
		return err
	}
	return w.Client.Status().Update(ctx, obj)
}
