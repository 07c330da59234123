package ray

import (
	"context"
	"net"
	"testing"

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
		c, err := d.Dial(lis.Addr().String(), tc.token)
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
