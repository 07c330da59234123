package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	grpcstatus "google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/ray"
)

// fakeGCS stands in for the GCS of every Ray cluster in the suite: it serves Ray's AutoscalerStateService
// (GetClusterResourceState and DrainNode, the wire format of autoscaler.proto) over gRPC, reports one Ray
// node per running worker pod (instance ID = pod name, as in real pods), and records every drain request.
// A drained node reports DRAINING, and DEAD once the drain time of its namespace has passed.
type fakeGCS struct {
	mu sync.Mutex
	// drainTime is how long a drain takes per namespace; a negative value never finishes.
	drainTime map[string]time.Duration
	// stalled are the namespaces whose drain requests the GCS takes and never answers (hostile_test.go).
	stalled map[string]bool
	drains  map[string]drainCall // pod namespace/name -> first drain request
	calls   []drainCall
	pods    map[string]string // hex node ID -> pod namespace/name
	// tokens are the Ray auth tokens of the namespaces whose cluster has token auth on: as Ray's GCS, the
	// fake refuses their calls without "authorization: Bearer <token>".
	tokens map[string]string
}

// drainCall is one DrainNode request as the fake GCS saw it.
type drainCall struct {
	Pod      string
	At       time.Time
	Reason   int32
	Deadline time.Time
}

var gcs *fakeGCS

// startFakeGCS serves the fake GCS at KRAY_E2E_GCS_ADDRESS, the address hack/e2e.sh gives the operator.
func startFakeGCS(ctx context.Context) error {
	addr := os.Getenv("KRAY_E2E_GCS_ADDRESS")
	if addr == "" {
		return nil
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	gcs = &fakeGCS{drainTime: map[string]time.Duration{}, stalled: map[string]bool{}, drains: map[string]drainCall{}, pods: map[string]string{}, tokens: map[string]string{}}
	srv := grpc.NewServer(grpc.ForceServerCodec(ray.RawCodec{}), grpc.UnknownServiceHandler(gcs.handle))
	go func() { _ = srv.Serve(lis) }()
	go func() { <-ctx.Done(); srv.Stop() }()
	return nil
}

// setDrainTime makes drains of pods in ns take d (negative: never finish).
func (f *fakeGCS) setDrainTime(ns string, d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.drainTime[ns] = d
}

// nodeIDOf is the Ray node ID the fake GCS gives the pod with uid (28 bytes, as Ray's).
func nodeIDOf(uid types.UID) []byte {
	sum := sha256.Sum256([]byte(uid))
	return sum[:28]
}

// requireToken makes the GCS of namespace ns's cluster refuse calls that do not carry token.
func (f *fakeGCS) requireToken(ns, token string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tokens[ns] = token
}

// authorized reports whether a call to the GCS of namespace ns carries what it requires.
func (f *fakeGCS) authorized(ctx context.Context, ns string) bool {
	want, ok := f.tokens[ns]
	if !ok {
		return true
	}
	md, _ := metadata.FromIncomingContext(ctx)
	got := md.Get(ray.AuthMetadataKey)
	return len(got) == 1 && got[0] == ray.BearerPrefix+want
}

// drainedPods returns the drain requests for pods of namespace ns, in arrival order.
func (f *fakeGCS) drainedPods(ns string) []drainCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []drainCall
	for _, c := range f.calls {
		if len(c.Pod) > len(ns) && c.Pod[:len(ns)+1] == ns+"/" {
			out = append(out, c)
		}
	}
	return out
}

func (f *fakeGCS) handle(_ any, stream grpc.ServerStream) error {
	method, _ := grpc.MethodFromServerStream(stream)
	var req []byte
	if err := stream.RecvMsg(&req); err != nil {
		return err
	}
	switch method {
	case ray.MethodGetClusterResourceState:
		nodes, err := f.nodes(stream.Context())
		if err != nil {
			return grpcstatus.Error(codes.Unavailable, err.Error())
		}
		return stream.SendMsg(ray.EncodeNodes(nodes))
	case ray.MethodDrainNode:
		r, err := ray.DecodeDrainRequest(req)
		if err != nil {
			return grpcstatus.Error(codes.InvalidArgument, err.Error())
		}
		if _, err := f.workerPods(stream.Context()); err != nil { // knows the node's cluster before checking the token
			return grpcstatus.Error(codes.Unavailable, err.Error())
		}
		f.mu.Lock()
		call := drainCall{Pod: f.pods[hex.EncodeToString(r.NodeID)], At: time.Now(), Reason: r.Reason, Deadline: r.Deadline}
		if ns, _, _ := strings.Cut(call.Pod, "/"); !f.authorized(stream.Context(), ns) {
			f.mu.Unlock()
			return grpcstatus.Error(codes.Unauthenticated, "invalid or missing authentication token")
		}
		f.calls = append(f.calls, call)
		if _, ok := f.drains[call.Pod]; !ok && call.Pod != "" {
			f.drains[call.Pod] = call
		}
		ns, _, _ := strings.Cut(call.Pod, "/")
		stalled := f.stalled[ns]
		f.mu.Unlock()
		if stalled {
			<-stream.Context().Done()
			return grpcstatus.FromContextError(stream.Context().Err()).Err()
		}
		return stream.SendMsg(ray.EncodeDrainReply(ray.DrainReply{Accepted: true}))
	}
	return grpcstatus.Errorf(codes.Unimplemented, "fake GCS does not serve %s", method)
}

// nodes reports a Ray node for every worker pod with an IP.
func (f *fakeGCS) nodes(ctx context.Context) ([]ray.Node, error) {
	pods, err := f.workerPods(ctx)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var nodes []ray.Node
	for _, p := range pods {
		// One server stands for every cluster's GCS: a call without a token-auth cluster's token does not
		// see that cluster's nodes (its own GCS would refuse the whole call).
		if !f.authorized(ctx, p.Namespace) {
			continue
		}
		key := p.Namespace + "/" + p.Name
		n := ray.Node{ID: nodeIDOf(p.UID), InstanceID: p.Name, IP: p.Status.PodIP, Status: ray.NodeStatusRunning}
		if call, ok := f.drains[key]; ok {
			// As Ray's GCS: DRAINING (never with an idle duration) until the raylet, out of work, exits and
			// the node is DEAD.
			n.Status = ray.NodeStatusDraining
			if d, ok := f.drainTime[p.Namespace]; ok && d >= 0 && time.Since(call.At) >= d {
				n.Status = ray.NodeStatusDead
			}
		}
		nodes = append(nodes, n)
	}
	return nodes, nil
}

// drained reports whether a drain of the pod ns/name was asked for: its Ray node takes no new work.
func (f *fakeGCS) drained(ns, name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.drains[ns+"/"+name]
	return ok
}

// workerPods lists the running worker pods, each a Ray node, and maps their node IDs to them.
func (f *fakeGCS) workerPods(ctx context.Context) ([]corev1.Pod, error) {
	list := &corev1.PodList{}
	if err := k8s.List(ctx, list, client.MatchingLabels{constants.LabelNodeType: constants.NodeTypeWorker}); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.Status.PodIP == "" || p.DeletionTimestamp != nil {
			continue
		}
		f.pods[hex.EncodeToString(nodeIDOf(p.UID))] = p.Namespace + "/" + p.Name
		out = append(out, p)
	}
	return out, nil
}
