package ray

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// testCA is a certificate authority that signs leaf certificates for a test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ray-ca-test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// leaf returns a PEM certificate and key for server and client use, naming ips (as a Ray node's does) and DNS
// names (the others).
func (ca *testCA) leaf(t *testing.T, ips ...string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, name := range ips {
		if ip := net.ParseIP(name); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, name)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

// startTLSGCS serves an empty node table over mutual TLS as Ray's gRPC servers do with RAY_USE_TLS: a client
// certificate signed by ca is required and verified.
func startTLSGCS(t *testing.T, ca *testCA, names ...string) string {
	t.Helper()
	if len(names) == 0 {
		names = []string{"127.0.0.1"}
	}
	certPEM, keyPEM := ca.leaf(t, names...)
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.pem)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	creds := credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{pair}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert})
	srv := grpc.NewServer(grpc.Creds(creds), grpc.ForceServerCodec(RawCodec{}), grpc.UnknownServiceHandler(func(_ any, stream grpc.ServerStream) error {
		var req []byte
		if err := stream.RecvMsg(&req); err != nil {
			return err
		}
		return stream.SendMsg(EncodeNodes(nil))
	}))
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

// With a cluster's mTLS material the client reaches a GCS that requires client certificates; a GCS whose
// certificate another CA signed, or a client certificate the GCS's CA did not sign, fails with an error that
// says what to do, and plaintext fails too: nothing is skipped.
func TestGRPCClientOverMutualTLS(t *testing.T) {
	ca, other := newTestCA(t), newTestCA(t)
	address := startTLSGCS(t, ca)
	cert, key := ca.leaf(t, "127.0.0.1")
	otherCert, otherKey := other.leaf(t, "127.0.0.1")
	d := &GRPCDialer{}
	for _, tc := range []struct {
		name  string
		creds Credentials
		want  string // "" is success
	}{
		{"the cluster's certificate and CA", Credentials{TLS: &TLSFiles{Cert: cert, Key: key, CA: ca.pem}}, ""},
		{"another CA", Credentials{TLS: &TLSFiles{Cert: cert, Key: key, CA: other.pem}}, "does not verify with the cluster's CA"},
		{"a client certificate of another CA", Credentials{TLS: &TLSFiles{Cert: otherCert, Key: otherKey, CA: ca.pem}}, "GetClusterResourceState"},
		{"plaintext", Credentials{}, "GetClusterResourceState"},
	} {
		c, err := d.Dial(address, tc.creds)
		if err != nil {
			t.Fatalf("%s: dial: %v", tc.name, err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		_, err = c.Nodes(ctx)
		cancel()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v, want success", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}

// Material that is not a key pair or holds no CA is refused when dialing, naming which.
func TestGRPCDialerRefusesBrokenTLSMaterial(t *testing.T) {
	ca := newTestCA(t)
	cert, key := ca.leaf(t, "127.0.0.1")
	d := &GRPCDialer{}
	if _, err := d.Dial("127.0.0.1:1", Credentials{TLS: &TLSFiles{Cert: cert, Key: []byte("x"), CA: ca.pem}}); err == nil || !strings.Contains(err.Error(), "certificate and key") {
		t.Errorf("broken key: %v", err)
	}
	if _, err := d.Dial("127.0.0.1:1", Credentials{TLS: &TLSFiles{Cert: cert, Key: key, CA: []byte("none")}}); err == nil || !strings.Contains(err.Error(), "CA: no PEM certificate") {
		t.Errorf("no CA: %v", err)
	}
}

// A GCS dialed at its pod's IP with the name it is known by as authority: its certificate, which names only
// that name (a head Service's), verifies; without the authority it does not.
func TestGRPCClientDialsAnIPByName(t *testing.T) {
	ca := newTestCA(t)
	address := startTLSGCS(t, ca, "heal-head-svc.ns.svc.cluster.local")
	_, port, _ := net.SplitHostPort(address)
	cert, key := ca.leaf(t, "127.0.0.1")
	files := &TLSFiles{Cert: cert, Key: key, CA: ca.pem}
	d := &GRPCDialer{}
	for _, tc := range []struct {
		authority string
		ok        bool
	}{{"heal-head-svc.ns.svc.cluster.local:" + port, true}, {"", false}} {
		c, err := d.Dial(address, Credentials{TLS: files, Authority: tc.authority})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		_, err = c.Nodes(ctx)
		cancel()
		if (err == nil) != tc.ok {
			t.Errorf("authority %q: %v, want success %v", tc.authority, err, tc.ok)
		}
	}
}
