package main

import (
	"crypto/tls"
	"fmt"
	"os"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/kray-project/kray/pkg/ray"
)

// Ray's TLS settings (ray_config_def.h USE_TLS, TLS_SERVER_CERT, TLS_SERVER_KEY, TLS_CA_CERT, read from the
// environment with the RAY_ prefix).
const (
	envUseTLS     = "RAY_USE_TLS"
	envServerCert = "RAY_TLS_SERVER_CERT"
	envServerKey  = "RAY_TLS_SERVER_KEY"
	envCACert     = "RAY_TLS_CA_CERT"
)

// rayTLS is this process's TLS material, read once, as Ray reads its certificate files only when a process
// starts: a certificate renewed later reaches the process only when it is restarted.
var rayTLS = sync.OnceValues(loadTLS)

// loadTLS reads the files Ray's variables name when RAY_USE_TLS is on ("1" or "true", as Ray's tls_utils
// reads it); nil when it is off. Like Ray, it refuses TLS without all three files.
func loadTLS() (*ray.TLSFiles, error) {
	if v := strings.ToLower(os.Getenv(envUseTLS)); v != "1" && v != "true" {
		return nil, nil
	}
	paths := []string{os.Getenv(envServerCert), os.Getenv(envServerKey), os.Getenv(envCACert)}
	var data [3][]byte
	for i, p := range paths {
		if p == "" {
			return nil, fmt.Errorf("If the environment variable RAY_USE_TLS is set to true then RAY_TLS_SERVER_CERT, RAY_TLS_SERVER_KEY and RAY_TLS_CA_CERT must also be set.")
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		data[i] = b
	}
	return &ray.TLSFiles{Cert: data[0], Key: data[1], CA: data[2]}, nil
}

// serverOptions are a gRPC server's transport options: with TLS on, Ray's servers require a client
// certificate and verify it against the CA (GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY).
func serverOptions() ([]grpc.ServerOption, error) {
	files, err := rayTLS()
	if err != nil || files == nil {
		return nil, err
	}
	config, err := files.ServerConfig()
	if err != nil {
		return nil, err
	}
	return []grpc.ServerOption{grpc.Creds(credentials.NewTLS(config))}, nil
}

// transport is a gRPC client's transport: with TLS on, Ray's clients present the node's certificate and
// verify the server's against the CA and the dialed host. Material that cannot be used fails every call (the
// process checked it at start: checkTLS).
func transport() grpc.DialOption {
	files, err := rayTLS()
	if err == nil && files == nil {
		return grpc.WithTransportCredentials(insecure.NewCredentials())
	}
	var config *tls.Config
	if err == nil {
		config, err = files.ClientConfig()
	}
	if err != nil {
		config = &tls.Config{MinVersion: tls.VersionTLS12, GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return nil, err }}
	}
	return grpc.WithTransportCredentials(credentials.NewTLS(config))
}

// checkTLS fails a process whose TLS settings Ray would refuse, before it serves or calls anything.
func checkTLS() error {
	files, err := rayTLS()
	if err != nil || files == nil {
		return err
	}
	if _, err := files.ClientConfig(); err != nil {
		return err
	}
	_, err = files.ServerConfig()
	return err
}

// clientCredentials are what `ray list nodes` presents to a GCS.
func clientCredentials() ray.Credentials {
	files, _ := rayTLS()
	return ray.Credentials{TLS: files}
}
