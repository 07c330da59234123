package ray

import (
	"context"
	"net"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// The client sends a cluster's token as Ray's token authentication expects it, and nothing without one.
func TestGRPCClientSendsTheToken(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan []string, 4)
	srv := grpc.NewServer(grpc.ForceServerCodec(RawCodec{}), grpc.UnknownServiceHandler(func(_ any, stream grpc.ServerStream) error {
		var req []byte
		if err := stream.RecvMsg(&req); err != nil {
			return err
		}
		md, _ := metadata.FromIncomingContext(stream.Context())
		got <- md.Get(AuthMetadataKey)
		return stream.SendMsg(EncodeNodes(nil))
	}))
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()

	d := &GRPCDialer{}
	for _, tc := range []struct {
		token string
		want  []string
	}{
		{token: "s3cret", want: []string{"Bearer s3cret"}},
		{token: "", want: nil},
	} {
		c, err := d.Dial(lis.Addr().String(), Credentials{Token: tc.token})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Nodes(context.Background()); err != nil {
			t.Fatal(err)
		}
		if h := <-got; len(h) != len(tc.want) || (len(h) == 1 && h[0] != tc.want[0]) {
			t.Errorf("token %q: authorization metadata %q, want %q", tc.token, h, tc.want)
		}
	}
}

// A connection no Dial asked for in idleConn is closed and forgotten at the next Dial, so the connections
// follow the clusters that exist rather than every cluster there ever was.
func TestGRPCDialerForgetsIdleConnections(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	d := &GRPCDialer{now: func() time.Time { return now }}
	for _, address := range []string{"a.ns.svc:6379", "b.ns.svc:6379"} {
		if _, err := d.Dial(address, Credentials{}); err != nil {
			t.Fatal(err)
		}
	}
	now = now.Add(idleConn / 2)
	if _, err := d.Dial("a.ns.svc:6379", Credentials{}); err != nil {
		t.Fatal(err)
	}
	now = now.Add(idleConn/2 + time.Second)
	if _, err := d.Dial("c.ns.svc:6379", Credentials{}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for address := range d.conns {
		got = append(got, address)
	}
	slices.Sort(got)
	if want := []string{"a.ns.svc:6379", "c.ns.svc:6379"}; !slices.Equal(got, want) {
		t.Errorf("connections %v, want %v", got, want)
	}
}
