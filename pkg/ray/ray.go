// Package ray is kray's small client for a Ray cluster's GCS: it lists the Ray nodes and asks the GCS to drain
// one, over Ray's gRPC AutoscalerStateService (the service the Ray autoscaler itself uses), and asks the
// cluster's ID of its NodeInfoGcsService (as every raylet does when it starts). Messages are
// encoded by hand with protowire from Ray's autoscaler.proto, so kray needs no generated Ray code.
package ray

import (
	"bytes"
	"context"
	"fmt"
	"time"
)

// NodeStatus is a Ray node's status as the GCS reports it (autoscaler.proto NodeStatus).
type NodeStatus int32

// Values of NodeStatus.
const (
	NodeStatusUnspecified NodeStatus = 0
	NodeStatusRunning     NodeStatus = 1
	NodeStatusDead        NodeStatus = 2
	NodeStatusIdle        NodeStatus = 3
	NodeStatusDraining    NodeStatus = 4
)

func (s NodeStatus) String() string {
	switch s {
	case NodeStatusRunning:
		return "RUNNING"
	case NodeStatusDead:
		return "DEAD"
	case NodeStatusIdle:
		return "IDLE"
	case NodeStatusDraining:
		return "DRAINING"
	}
	return fmt.Sprintf("UNSPECIFIED(%d)", int32(s))
}

// Node is one Ray node (autoscaler.proto NodeState, the fields kray reads).
type Node struct {
	// ID is the node's binary Ray node ID.
	ID []byte
	// InstanceID is the cloud instance the node registered with; KubeRay-style pods set it to the pod name.
	InstanceID string
	// IP is the node's IP address, the pod IP on Kubernetes.
	IP     string
	Status NodeStatus
	// Idle is how long the node has had no work; zero while it runs tasks or actors.
	Idle time.Duration
}

// Drained reports whether the node holds no more work: it is dead, or idle. Ray's GCS reports a node it is
// draining as DRAINING until the raylet, out of work, exits and the node is DEAD; it sets an idle duration
// only on IDLE nodes, never on DRAINING ones.
func (n Node) Drained() bool {
	return n.Status == NodeStatusDead || n.Status == NodeStatusIdle
}

// DrainReply is the GCS's answer to a drain request.
type DrainReply struct {
	Accepted bool
	// Rejection says why the request was refused, when Accepted is false.
	Rejection string
}

// Client reaches one Ray cluster's GCS.
type Client interface {
	// Nodes lists the cluster's Ray nodes.
	Nodes(ctx context.Context) ([]Node, error)
	// Drain asks the GCS to drain a node before deadline; Ray stops scheduling work on it and lets running
	// work finish. The request is idempotent.
	Drain(ctx context.Context, nodeID []byte, reason string, deadline time.Time) (DrainReply, error)
	// ClusterID is the ID of the Ray cluster the GCS serves: a GCS started without fault tolerance has a new
	// one, and one that restores its state from storage keeps it.
	ClusterID(ctx context.Context) ([]byte, error)
}

// Dialer returns the Client of the GCS at address (host:port), which presents creds with every call.
type Dialer interface {
	Dial(address string, creds Credentials) (Client, error)
}

// Credentials are what kray presents to a cluster's GCS.
type Credentials struct {
	// Token, when set, goes with every call, as Ray's token authentication (Ray 2.52+) expects it: gRPC
	// metadata "authorization: Bearer <token>".
	Token string
	// TLS, when set, is the cluster's mTLS material (Ray's RAY_USE_TLS): the connection is TLS, the GCS's
	// certificate must be signed by TLS.CA and name the address's host (Authority's, when set), and kray
	// presents TLS.Cert.
	TLS *TLSFiles
	// Authority, when set, is the host:port the GCS is known by when the address dialed is its pod's IP: the
	// calls' :authority, and the name its certificate must carry.
	Authority string
}

// TLSFiles are PEM-encoded certificate material, as cert-manager writes it into a Secret.
type TLSFiles struct {
	// Cert and Key are the client certificate (chain) and its private key (tls.crt, tls.key).
	Cert, Key []byte
	// CA is the certificate authority the server's certificate is verified with (ca.crt).
	CA []byte
}

// FindNode returns the node running in a pod: the one registered with the pod's name as instance ID, else
// the live node with the pod's IP.
func FindNode(nodes []Node, podName, podIP string) (Node, bool) {
	for _, n := range nodes {
		if n.InstanceID != "" && n.InstanceID == podName {
			return n, true
		}
	}
	for _, n := range nodes {
		if podIP != "" && n.IP == podIP && n.Status != NodeStatusDead {
			return n, true
		}
	}
	return Node{}, false
}

// FindNodeByID returns the node with that ID.
func FindNodeByID(nodes []Node, id []byte) (Node, bool) {
	for _, n := range nodes {
		if bytes.Equal(n.ID, id) {
			return n, true
		}
	}
	return Node{}, false
}
