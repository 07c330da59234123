package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/kray-project/kray/pkg/ray"
)

// The calls between the fake's head and its workers. Ray's raylet registers with the GCS and the GCS forwards a
// drain to the raylet (NodeManagerService.DrainRaylet); kray never sees these calls, so they carry only what
// the fake needs: the node ID (field 1), the instance ID, the pod name as in KubeRay's RAY_CLOUD_INSTANCE_ID
// (field 2), the raylet's address (field 3) and its CPUs for tasks (field 4).
const (
	methodRegisterNode   = "/ray.rpc.NodeInfoGcsService/RegisterNode"
	methodUnregisterNode = "/ray.rpc.NodeInfoGcsService/UnregisterNode"
	methodDrainRaylet    = "/ray.rpc.NodeManagerService/DrainRaylet"
)

// defaultRayletPort is the port the fake raylet serves DrainRaylet and gRPC health on unless
// --node-manager-port names one (Ray picks a random port).
const defaultRayletPort = "6380"

// Ray's GCS health check of raylets (health_check_period_ms, health_check_failure_threshold), shortened so
// that a raylet that is gone is DEAD within seconds.
const (
	healthCheckPeriod    = time.Second
	healthCheckThreshold = 3
)

// nodeIDLen is the length of a Ray NodeID.
const nodeIDLen = 28

// gcsNode is one node of the fake GCS's node table.
type gcsNode struct {
	id         []byte
	instanceID string
	address    string // the raylet's host:port
	cpus       int
	registered time.Time
	draining   bool
	dead       bool
	misses     int
}

// gcs is the fake head's GCS: the node table raylets register in, the autoscaler state service kray calls,
// and the health check that marks a raylet that stopped answering DEAD.
type gcs struct {
	// clusterID is the cluster's ID, new at every start of a GCS without fault tolerance: a raylet of the GCS
	// before presents the old one and is refused, as Ray's GCS refuses it.
	clusterID []byte
	// store keeps the cluster ID and the live nodes in Redis (fault tolerance), nil without.
	store *redisStore
	mu    sync.Mutex
	nodes []*gcsNode
	// serve is the head's Serve, which places replicas on the nodes.
	serve *serve
	// tasks is the head's task table; attempts are the pushes running, by attempt ID.
	tasks    *taskTable
	attempts map[uint64]attempt
}

// newGCS is a GCS of a new cluster ID, with no node and no task.
func newGCS() *gcs {
	return &gcs{clusterID: newNodeID(), tasks: newTaskTable(time.Now), attempts: map[uint64]attempt{}}
}

// handle answers one GCS call: the health check of `ray health-check`, raylet registration, and the
// autoscaler state service (GetClusterResourceState, DrainNode). Any other method is Unimplemented.
func (g *gcs) handle(_ any, stream grpc.ServerStream) error {
	method, _ := grpc.MethodFromServerStream(stream)
	var req []byte
	if err := stream.RecvMsg(&req); err != nil {
		return err
	}
	if id := clusterIDOf(stream.Context()); id != "" && id != hex.EncodeToString(g.clusterID) {
		// Ray's server call: a request with another cluster's ID comes from a raylet of the GCS before.
		return status.Error(codes.Unauthenticated, "WrongClusterID: Perhaps the client is accessing GCS after it has restarted.")
	}
	switch method {
	case ray.MethodGetClusterID:
		return stream.SendMsg(ray.EncodeClusterIDReply(g.clusterID))
	case methodCheckAliveHeartbeat, methodCheckAliveNodeInfo:
		return stream.SendMsg([]byte{})
	case methodRegisterNode:
		n := decodeNode(req)
		g.mu.Lock()
		n.registered = time.Now()
		g.nodes = append(g.nodes, n)
		g.mu.Unlock()
		g.keep(stream.Context(), n, true)
		fmt.Printf("GCS: node %x registered (instance %s, raylet %s)\n", n.id, n.instanceID, n.address)
		return stream.SendMsg([]byte{})
	case methodUnregisterNode:
		id := decodeNode(req).id
		g.mu.Lock()
		n := g.find(id)
		if n != nil {
			n.dead = true
			g.cancelNode(id)
		}
		g.mu.Unlock()
		if n != nil {
			g.keep(stream.Context(), n, false)
		}
		fmt.Printf("GCS: node %x unregistered\n", id)
		return stream.SendMsg([]byte{})
	case methodReplicasOn:
		return stream.SendMsg(encodeCount(g.serve.replicasOn(decodeNode(req).id)))
	case ray.MethodGetClusterResourceState:
		return stream.SendMsg(ray.EncodeNodes(g.nodeStates()))
	case ray.MethodDrainNode:
		return g.drain(stream, req)
	}
	return status.Errorf(codes.Unimplemented, "unknown method %s", method)
}

// nodeStates lists the nodes as GetClusterResourceState does: the live ones first, then the dead ones. A
// node being drained is DRAINING; a live one is RUNNING while it runs a task, else IDLE since it registered or
// its last task ended.
func (g *gcs) nodeStates() []ray.Node {
	g.mu.Lock()
	defer g.mu.Unlock()
	var alive, dead []ray.Node
	for _, n := range g.nodes {
		s := ray.Node{ID: n.id, InstanceID: n.instanceID, IP: hostOf(n.address)}
		switch {
		case n.dead:
			s.Status = ray.NodeStatusDead
			dead = append(dead, s)
			continue
		case n.draining:
			s.Status = ray.NodeStatusDraining
		default:
			busy, since := g.tasks.busy(n.id)
			if busy {
				s.Status = ray.NodeStatusRunning
				break
			}
			if since.Before(n.registered) {
				since = n.registered
			}
			s.Status, s.Idle = ray.NodeStatusIdle, time.Since(since)
		}
		alive = append(alive, s)
	}
	return append(alive, dead...)
}

// drain answers DrainNode: a node that is dead or unknown is accepted (nothing to drain); a live one is
// asked to drain through its raylet, whose answer is the reply, and is draining once its raylet accepted.
func (g *gcs) drain(stream grpc.ServerStream, req []byte) error {
	r, err := ray.DecodeDrainRequest(req)
	if err != nil {
		return status.Errorf(codes.InvalidArgument, "%v", err)
	}
	g.mu.Lock()
	n := g.find(r.NodeID)
	var address string
	if n != nil && !n.dead {
		address = n.address
	}
	g.mu.Unlock()
	if address == "" {
		return stream.SendMsg(ray.EncodeDrainReply(ray.DrainReply{Accepted: true}))
	}
	ctx, cancel := context.WithTimeout(stream.Context(), 5*time.Second)
	defer cancel()
	b, err := callReply(ctx, address, methodDrainRaylet, req)
	if err != nil {
		return status.Errorf(codes.Unavailable, "raylet %s: %v", address, err)
	}
	reply, err := ray.DecodeDrainReply(b)
	if err != nil {
		return status.Errorf(codes.Internal, "raylet %s: %v", address, err)
	}
	if !reply.Accepted {
		fmt.Printf("GCS: node %x refused the drain: %s\n", r.NodeID, reply.Rejection)
		return stream.SendMsg(ray.EncodeDrainReply(reply))
	}
	g.mu.Lock()
	n.draining = true
	g.mu.Unlock()
	fmt.Printf("GCS: node %x draining (%s)\n", r.NodeID, r.Message)
	return stream.SendMsg(ray.EncodeDrainReply(reply))
}

// keep records a node's liveness in the GCS's Redis, when it has one.
func (g *gcs) keep(ctx context.Context, n *gcsNode, alive bool) {
	if g.store == nil {
		return
	}
	if err := g.store.keepNode(ctx, n, alive); err != nil {
		fmt.Fprintf(os.Stderr, "GCS: cannot keep node %x in Redis: %v\n", n.id, err)
	}
}

// recover starts the GCS from its Redis, as Ray's GCS does with fault tolerance: the cluster ID kept there
// (or a new one kept for the next start) and the nodes that were alive, alive again until their raylets fail
// the health check. It waits for Redis as Ray's GCS does (redis_db_connect_retries).
func (g *gcs) recover(ctx context.Context, store *redisStore) error {
	var err error
	for range 120 {
		var id []byte
		if id, err = store.clusterID(ctx, g.clusterID); err == nil {
			g.clusterID, g.store = id, store
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	if err != nil {
		return fmt.Errorf("the GCS's Redis at %s: %w", store.address, err)
	}
	nodes, err := store.nodes(ctx)
	if err != nil {
		return fmt.Errorf("the GCS's Redis at %s: %w", store.address, err)
	}
	for _, n := range nodes {
		n.registered = time.Now()
		fmt.Printf("GCS: node %x recovered from Redis (instance %s)\n", n.id, n.instanceID)
	}
	g.nodes = nodes
	return nil
}

func (g *gcs) find(id []byte) *gcsNode {
	for _, n := range g.nodes {
		if string(n.id) == string(id) {
			return n
		}
	}
	return nil
}

// checkHealth marks DEAD every live node whose raylet failed healthCheckThreshold checks in a row, until ctx ends.
func (g *gcs) checkHealth(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(healthCheckPeriod):
		}
		g.mu.Lock()
		var live []*gcsNode
		for _, n := range g.nodes {
			if !n.dead {
				live = append(live, n)
			}
		}
		g.mu.Unlock()
		for _, n := range live {
			ok := healthy(ctx, n.address)
			g.mu.Lock()
			if ok {
				n.misses = 0
			} else if n.misses++; n.misses >= healthCheckThreshold {
				n.dead = true
				g.cancelNode(n.id)
				fmt.Printf("GCS: node %x is dead (its raylet does not answer)\n", n.id)
			}
			dead := n.dead
			g.mu.Unlock()
			if dead {
				g.keep(ctx, n, false)
			}
		}
	}
}

// methodHealthCheck is gRPC's health check, which Ray's GCS calls on each raylet.
const methodHealthCheck = "/grpc.health.v1.Health/Check"

// servingReply is grpc.health.v1.HealthCheckResponse{status: SERVING}.
var servingReply = protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 1)

// healthy reports whether the raylet at address answers its health check SERVING within a second.
func healthy(ctx context.Context, address string) bool {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	reply, err := callReply(ctx, address, methodHealthCheck, []byte{})
	return err == nil && string(reply) == string(servingReply)
}

// metadataClusterID is the gRPC metadata key that carries the caller's cluster ID, as Ray's clients send it.
const metadataClusterID = "ray_cluster_id"

// clusterIDOf is the cluster ID (hex) a call carries, "" when none.
func clusterIDOf(ctx context.Context) string {
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get(metadataClusterID); len(v) > 0 {
		return v[0]
	}
	return ""
}

// withClusterID is ctx whose calls carry the cluster ID id.
func withClusterID(ctx context.Context, id []byte) context.Context {
	return metadata.AppendToOutgoingContext(ctx, metadataClusterID, hex.EncodeToString(id))
}

// call makes one raw call to address.
func call(ctx context.Context, address, method string, req []byte) error {
	_, err := callReply(ctx, address, method, req)
	return err
}

// dial is a raw client of address, with the fake's transport.
func dial(address string) (*grpc.ClientConn, error) {
	return grpc.NewClient(address, grpc.WithDefaultCallOptions(grpc.ForceCodec(ray.RawCodec{})), transport())
}

// callReply makes one raw call to address and returns the reply.
func callReply(ctx context.Context, address, method string, req []byte) ([]byte, error) {
	conn, err := dial(address)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	var reply []byte
	err = conn.Invoke(ctx, method, req, &reply)
	return reply, err
}

// newNodeID is a random Ray NodeID: a raylet gets a new one at every start.
func newNodeID() []byte {
	id := make([]byte, nodeIDLen)
	_, _ = rand.Read(id)
	return id
}

// hostOf is the host of a host:port address.
func hostOf(address string) string {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return address
	}
	return host
}

func encodeNode(n *gcsNode) []byte {
	var b []byte
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	b = protowire.AppendBytes(b, n.id)
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	b = protowire.AppendString(b, n.instanceID)
	b = protowire.AppendTag(b, 3, protowire.BytesType)
	b = protowire.AppendString(b, n.address)
	b = protowire.AppendTag(b, 4, protowire.VarintType)
	return protowire.AppendVarint(b, uint64(n.cpus))
}

func decodeNode(b []byte) *gcsNode {
	n := &gcsNode{}
	for len(b) > 0 {
		num, typ, l := protowire.ConsumeTag(b)
		if l < 0 {
			return n
		}
		b = b[l:]
		if typ == protowire.VarintType {
			v, l := protowire.ConsumeVarint(b)
			if l < 0 {
				return n
			}
			b = b[l:]
			if num == 4 {
				n.cpus = int(v)
			}
			continue
		}
		if typ != protowire.BytesType {
			return n
		}
		v, l := protowire.ConsumeBytes(b)
		if l < 0 {
			return n
		}
		b = b[l:]
		switch num {
		case 1:
			n.id = append([]byte(nil), v...)
		case 2:
			n.instanceID = string(v)
		case 3:
			n.address = string(v)
		}
	}
	return n
}
