package ray

import (
	"context"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/metadata"
)

// Full method names of Ray's AutoscalerStateService (package ray.rpc.autoscaler).
const (
	MethodGetClusterResourceState = "/ray.rpc.autoscaler.AutoscalerStateService/GetClusterResourceState"
	MethodDrainNode               = "/ray.rpc.autoscaler.AutoscalerStateService/DrainNode"
)

// Ray's token authentication: the metadata key and the prefix of its value.
const (
	AuthMetadataKey = "authorization"
	BearerPrefix    = "Bearer "
)

// maxReply bounds the bytes of a GCS answer (gRPC's default, named here because DecodeNodes' bounds assume it):
// a GetClusterResourceStateReply of Ray's largest clusters fits.
const maxReply = 4 << 20

// callTimeout bounds one GCS call, so a silent GCS never stalls a reconcile.
const callTimeout = 5 * time.Second

// RawCodec is a gRPC codec for messages that are already encoded: it sends a []byte as is and receives into
// a *[]byte. It carries the name "proto" so the wire content type is the one Ray's GCS expects.
type RawCodec struct{}

var _ encoding.Codec = RawCodec{}

// Marshal returns v, which must be a []byte.
func (RawCodec) Marshal(v any) ([]byte, error) {
	b, ok := v.([]byte)
	if !ok {
		return nil, fmt.Errorf("RawCodec: cannot marshal %T", v)
	}
	return b, nil
}

// Unmarshal stores a copy of data in v, which must be a *[]byte.
func (RawCodec) Unmarshal(data []byte, v any) error {
	p, ok := v.(*[]byte)
	if !ok {
		return fmt.Errorf("RawCodec: cannot unmarshal into %T", v)
	}
	*p = append((*p)[:0], data...)
	return nil
}

// Name is "proto".
func (RawCodec) Name() string { return "proto" }

// idleConn is how long a connection no Dial asked for is kept: a cluster that was deleted, or that drains
// nothing, releases its connection after it.
const idleConn = 10 * time.Minute

// GRPCDialer dials Ray GCS servers over plaintext gRPC and keeps one connection per address while it is used.
type GRPCDialer struct {
	mu    sync.Mutex
	conns map[string]*conn
	// now is the clock; nil is time.Now.
	now func() time.Time
}

// conn is a connection and when a Dial last asked for it.
type conn struct {
	cc   *grpc.ClientConn
	used time.Time
}

// Dial returns the Client of the GCS at address; connections are made lazily and reused (per address: the
// token travels with each call, not with the connection). Connections idle for idleConn are closed.
func (d *GRPCDialer) Dial(address, token string) (Client, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := time.Now
	if d.now != nil {
		now = d.now
	}
	t := now()
	for a, c := range d.conns {
		if a != address && t.Sub(c.used) > idleConn {
			_ = c.cc.Close()
			delete(d.conns, a)
		}
	}
	if c, ok := d.conns[address]; ok {
		c.used = t
		return grpcClient{conn: c.cc, token: token}, nil
	}
	c, err := grpc.NewClient(address,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(RawCodec{}), grpc.MaxCallRecvMsgSize(maxReply)))
	if err != nil {
		return nil, fmt.Errorf("dial Ray GCS %s: %w", address, err)
	}
	if d.conns == nil {
		d.conns = map[string]*conn{}
	}
	d.conns[address] = &conn{cc: c, used: t}
	return grpcClient{conn: c, token: token}, nil
}

type grpcClient struct {
	conn  *grpc.ClientConn
	token string
}

// outgoing bounds a call's context and adds the auth token, if any.
func (c grpcClient) outgoing(ctx context.Context) (context.Context, context.CancelFunc) {
	if c.token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, AuthMetadataKey, BearerPrefix+c.token)
	}
	return context.WithTimeout(ctx, callTimeout)
}

func (c grpcClient) Nodes(ctx context.Context) ([]Node, error) {
	ctx, cancel := c.outgoing(ctx)
	defer cancel()
	var reply []byte
	if err := c.conn.Invoke(ctx, MethodGetClusterResourceState, []byte{}, &reply); err != nil {
		return nil, fmt.Errorf("GetClusterResourceState: %w", err)
	}
	return DecodeNodes(reply)
}

func (c grpcClient) Drain(ctx context.Context, nodeID []byte, reason string, deadline time.Time) (DrainReply, error) {
	if len(nodeID) == 0 {
		return DrainReply{}, errEmptyNodeID
	}
	ctx, cancel := c.outgoing(ctx)
	defer cancel()
	var reply []byte
	if err := c.conn.Invoke(ctx, MethodDrainNode, EncodeDrainRequest(nodeID, reason, deadline), &reply); err != nil {
		return DrainReply{}, fmt.Errorf("DrainNode: %w", err)
	}
	return DecodeDrainReply(reply)
}
