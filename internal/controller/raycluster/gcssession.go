package raycluster

import (
	"context"
	"net"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kray-project/kray/pkg/authtoken"
	"github.com/kray-project/kray/pkg/builder"
	"github.com/kray-project/kray/pkg/ray"
)

// gcsSession is one reconcile's calls to its cluster's GCS, shared by the phases that need them (drains and
// worker membership): one client within one budget (gcsBudget), the cluster's token read once, and the node
// table listed at most once.
type gcsSession struct {
	address string
	client  ray.Client
	// spent reports whether the reconcile's time for GCS calls is spent.
	spent func() bool
	// failure is the first call that ran out of time, for the breaker; nil (the func) when no call reached
	// the GCS: it is paused, or the token could not be read.
	failure func() error
	listed  bool
	nodes   []ray.Node
	listErr error
}

// ClusterID asks the GCS for its cluster ID.
func (g *gcsSession) ClusterID(ctx context.Context) ([]byte, error) {
	return g.client.ClusterID(ctx)
}

// openGCS returns the reconcile's GCS session, opening it on first use: a paused GCS (gcsBreaker), an
// unreadable token or an unreadable TLS Secret gives a session whose calls fail at once without reaching the
// GCS.
func (r *Reconciler) openGCS(ctx context.Context, s *state) *gcsSession {
	if s.gcs != nil {
		return s.gcs
	}
	g := &gcsSession{address: r.gcsAddress(s), spent: func() bool { return false }}
	s.gcs = g
	if paused := r.gcs.paused(client.ObjectKeyFromObject(s.rc), r.now().Time); paused != nil {
		g.client = failedClient{paused}
		return g
	}
	token, err := authtoken.Read(ctx, r.APIReader, s.effective)
	if err != nil {
		g.client = failedClient{err}
		return g
	}
	files, err := r.readTLSFiles(ctx, s)
	if err != nil {
		g.client = failedClient{err}
		return g
	}
	target, creds := g.address, ray.Credentials{Token: token, TLS: files}
	if ip := r.headIP(s); ip != "" {
		// The head Service is headless: its name resolves to the head pod's IP, and a connection made by that
		// name keeps the IP it resolved, which a replaced head no longer has, until gRPC resolves it again (30 s
		// apart at most). Dialing the pod's IP, by the Service's name, reaches a new head at once.
		target, creds.Authority = net.JoinHostPort(ip, builder.GCSPort(s.effective)), g.address
	}
	bc := newBudgetedClient(r.rayClient(target, creds))
	g.client, g.spent, g.failure = bc, bc.spent, bc.failure
	return g
}

// headIP is the IP of the head pod the cluster's GCS runs in, "" when kray dials a GCS of its own
// (--ray-gcs-address) or the head pod has none.
func (r *Reconciler) headIP(s *state) string {
	if r.RayGCSAddress != "" {
		return ""
	}
	if head := s.headPod(); head != nil {
		return head.Status.PodIP
	}
	return ""
}

// Nodes lists the cluster's Ray nodes once per session.
func (g *gcsSession) Nodes(ctx context.Context) ([]ray.Node, error) {
	if !g.listed {
		g.listed = true
		g.nodes, g.listErr = g.client.Nodes(ctx)
	}
	return g.nodes, g.listErr
}

// closeGCS records in the breaker how the reconcile's GCS calls went, when it made any: a paused GCS stays
// paused until its pause ends.
func (r *Reconciler) closeGCS(s *state) {
	if s.gcs != nil && s.gcs.failure != nil {
		r.gcs.record(client.ObjectKeyFromObject(s.rc), r.now().Time, s.gcs.failure())
	}
}
