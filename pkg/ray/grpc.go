package ray

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/metadata"
)

// Full method names of Ray's AutoscalerStateService (package ray.rpc.autoscaler).
const (
	MethodGetClusterResourceState = "/ray.rpc.autoscaler.AutoscalerStateService/GetClusterResourceState"
	MethodDrainNode               = "/ray.rpc.autoscaler.AutoscalerStateService/DrainNode"
	// MethodGetClusterID is NodeInfoGcsService's (package ray.rpc), which a raylet calls first.
	MethodGetClusterID = "/ray.rpc.NodeInfoGcsService/GetClusterId"
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

// GRPCDialer dials Ray GCS servers over gRPC, plaintext or mutual TLS, and keeps one connection per address
// and TLS material while it is used.
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
	tls  bool
}

// Dial returns the Client of the GCS at address; connections are made lazily and reused (per address,
// authority and TLS material: the token travels with each call, not with the connection; renewed certificates
// get a new connection). Connections idle for idleConn are closed.
func (d *GRPCDialer) Dial(address string, creds Credentials) (Client, error) {
	key := address
	if creds.Authority != "" {
		key += "/as/" + creds.Authority
	}
	transport := insecure.NewCredentials()
	if creds.TLS != nil {
		sum := sha256.Sum256(append(append(append([]byte{}, creds.TLS.Cert...), creds.TLS.Key...), creds.TLS.CA...))
		key += "/tls/" + hex.EncodeToString(sum[:8])
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	now := time.Now
	if d.now != nil {
		now = d.now
	}
	t := now()
	for k, c := range d.conns {
		if k != key && t.Sub(c.used) > idleConn {
			_ = c.cc.Close()
			delete(d.conns, k)
		}
	}
	if c, ok := d.conns[key]; ok {
		c.used = t
		return grpcClient{conn: c.cc, token: creds.Token, tls: c.tls}, nil
	}
	if creds.TLS != nil {
		config, err := creds.TLS.ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("dial Ray GCS %s over TLS: %w", address, err)
		}
		transport = credentials.NewTLS(config)
	}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(transport),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(RawCodec{}), grpc.MaxCallRecvMsgSize(maxReply))}
	if creds.Authority != "" {
		opts = append(opts, grpc.WithAuthority(creds.Authority))
	}
	c, err := grpc.NewClient(address, opts...)
	if err != nil {
		return nil, fmt.Errorf("dial Ray GCS %s: %w", address, err)
	}
	if d.conns == nil {
		d.conns = map[string]*conn{}
	}
	d.conns[key] = &conn{cc: c, used: t, tls: creds.TLS != nil}
	return grpcClient{conn: c, token: creds.Token, tls: creds.TLS != nil}, nil
}

// ClientConfig is the TLS configuration of a connection to a Ray gRPC server: Ray's servers require a client
// certificate signed by the cluster's CA, and Ray's clients verify the server's against the dialed host.
func (f *TLSFiles) ClientConfig() (*tls.Config, error) {
	pair, pool, err := f.parse()
	if err != nil {
		return nil, err
	}
	return &tls.Config{Certificates: []tls.Certificate{pair}, RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// ServerConfig is the TLS configuration of a Ray gRPC server (RAY_USE_TLS): it presents Cert and requires a
// client certificate that CA signed.
func (f *TLSFiles) ServerConfig() (*tls.Config, error) {
	pair, pool, err := f.parse()
	if err != nil {
		return nil, err
	}
	return &tls.Config{Certificates: []tls.Certificate{pair}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}, nil
}

func (f *TLSFiles) parse() (tls.Certificate, *x509.CertPool, error) {
	pair, err := tls.X509KeyPair(f.Cert, f.Key)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("certificate and key: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(f.CA) {
		return tls.Certificate{}, nil, errors.New("CA: no PEM certificate")
	}
	return pair, pool, nil
}

// errTLSHint is added to a failed TLS handshake: the usual cause once a cluster ran is a certificate Ray
// loaded before its CA changed, since Ray reads its certificates only at start.
const errTLSHint = "the GCS's certificate does not verify with the cluster's CA (Ray reads its certificates only when it starts: " +
	"a head started before its CA changed must be restarted)"

// callError wraps a failed call, naming a TLS verification failure as such.
func (c grpcClient) callError(method string, err error) error {
	if c.tls && strings.Contains(err.Error(), "authentication handshake failed") {
		return fmt.Errorf("%s: %s: %w", method, errTLSHint, err)
	}
	return fmt.Errorf("%s: %w", method, err)
}

type grpcClient struct {
	conn  *grpc.ClientConn
	token string
	tls   bool
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
		return nil, c.callError("GetClusterResourceState", err)
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
		return DrainReply{}, c.callError("DrainNode", err)
	}
	return DecodeDrainReply(reply)
}

func (c grpcClient) ClusterID(ctx context.Context) ([]byte, error) {
	ctx, cancel := c.outgoing(ctx)
	defer cancel()
	var reply []byte
	if err := c.conn.Invoke(ctx, MethodGetClusterID, []byte{}, &reply); err != nil {
		return nil, c.callError("GetClusterId", err)
	}
	return DecodeClusterIDReply(reply)
}
