package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/kray-project/kray/pkg/ray"
)

// methodPushTask runs one task attempt on a node's raylet (field 1: the attempt's ID, field 2: its length in
// milliseconds), as a server stream: one message when the task begins, one when it ends. Ray's owner pushes a
// task to the worker a raylet leased it (CoreWorkerService.PushTask), and the push fails when that worker's node
// dies: so does this call.
const methodPushTask = "/ray.rpc.CoreWorkerService/PushTask"

// taskPlacePeriod is how often the head places pending tasks on free CPUs.
const taskPlacePeriod = 200 * time.Millisecond

// runTasks places pending tasks on the nodes' free CPUs and pushes each attempt to its node, until ctx ends.
func (g *gcs) runTasks(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(taskPlacePeriod):
		}
		g.mu.Lock()
		nodes := make([]taskNode, 0, len(g.nodes))
		address := map[string]string{}
		for _, n := range g.nodes {
			nodes = append(nodes, taskNode{id: n.id, cpus: n.cpus, draining: n.draining, dead: n.dead})
			address[string(n.id)] = n.address
		}
		g.mu.Unlock()
		for _, p := range g.tasks.place(nodes) {
			go g.push(ctx, p, address[string(p.node)])
		}
	}
}

// push runs the attempt p on the raylet at address and records how it ended: completed, refused by a node
// that began draining, or killed with its node. A node the health check finds dead kills its attempts too
// (cancelNode), as the owner's push to a node that vanished fails.
func (g *gcs) push(ctx context.Context, p placement, address string) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	g.mu.Lock()
	g.attempts[p.id] = attempt{node: p.node, cancel: cancel}
	g.mu.Unlock()
	err := pushTask(ctx, address, p, func() { g.tasks.started(p.id) })
	g.mu.Lock()
	delete(g.attempts, p.id)
	n := g.find(p.node)
	preempted := n != nil && n.draining
	g.mu.Unlock()
	switch {
	case err == nil:
		g.tasks.completed(p.id)
	case status.Code(err) == codes.FailedPrecondition:
		g.tasks.refused(p.id)
	default:
		g.tasks.killed(p.id, preempted)
	}
}

// pushTask makes the push of p to the raylet at address, calling began once the raylet began the task, and
// returns when the task ended (nil) or the call failed.
func pushTask(ctx context.Context, address string, p placement, began func()) error {
	conn, err := dial(address)
	if err != nil {
		return err
	}
	defer conn.Close()
	stream, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, methodPushTask)
	if err != nil {
		return err
	}
	if err := stream.SendMsg(encodeTask(p.id, p.length)); err != nil {
		return err
	}
	if err := stream.CloseSend(); err != nil {
		return err
	}
	var msg []byte
	if err := stream.RecvMsg(&msg); err != nil {
		return err
	}
	began()
	if err := stream.RecvMsg(&msg); err != nil {
		return err
	}
	return nil
}

// attempt is a running attempt's node and the cancel of its push.
type attempt struct {
	node   []byte
	cancel context.CancelFunc
}

// cancelNode ends the pushes of the attempts running on the node id, which died; g.mu is held.
func (g *gcs) cancelNode(id []byte) {
	for _, a := range g.attempts {
		if string(a.node) == string(id) {
			a.cancel()
		}
	}
}

// runTask runs one pushed attempt on this node until its end, or until the raylet stops (its container killed, which
// closes the call): then the call fails, as a task whose worker died does. A draining raylet takes no task (Ray's raylet grants
// no lease while draining), and once drained it exits when its last task ends.
func (r *raylet) runTask(stream grpc.ServerStream, req []byte) error {
	_, length := decodeTask(req)
	r.mu.Lock()
	if r.draining || r.gone {
		r.mu.Unlock()
		return status.Error(codes.FailedPrecondition, "the node is draining")
	}
	r.running++
	r.mu.Unlock()
	err := stream.SendMsg([]byte{})
	if err == nil {
		select {
		case <-time.After(length):
		case <-stream.Context().Done(): // the raylet stopped, or its caller went
			err = status.Error(codes.Unavailable, "the task's worker died")
		}
	}
	r.mu.Lock()
	r.running--
	idle := r.draining && r.running == 0
	r.mu.Unlock()
	if idle {
		go r.exit()
	}
	if err != nil {
		return err
	}
	return stream.SendMsg([]byte{})
}

// drainRaylet answers DrainRaylet as Ray's raylet does (NodeManager::HandleDrainRaylet): an idle-termination
// drain is refused while the node runs work, a preemption drain is always accepted; an accepted drain stops the
// node taking tasks, and the raylet exits at once when idle, else when its last task ends. The deadline is
// only recorded: Ray's raylet kills nothing at it, its caller does.
func (r *raylet) drainRaylet(req []byte) []byte {
	d, _ := ray.DecodeDrainRequest(req)
	r.mu.Lock()
	defer r.mu.Unlock()
	if d.Reason == drainReasonIdleTermination && r.running > 0 {
		return ray.EncodeDrainReply(ray.DrainReply{Rejection: "The node to be idle terminated is no longer idle."})
	}
	r.draining = true
	if r.running == 0 {
		go r.exit()
	}
	return ray.EncodeDrainReply(ray.DrainReply{Accepted: true})
}

// drainReasonIdleTermination is DRAIN_NODE_REASON_IDLE_TERMINATION.
const drainReasonIdleTermination = 1

func encodeTask(id uint64, length time.Duration) []byte {
	b := protowire.AppendTag(nil, 1, protowire.VarintType)
	b = protowire.AppendVarint(b, id)
	b = protowire.AppendTag(b, 2, protowire.VarintType)
	return protowire.AppendVarint(b, uint64(length.Milliseconds()))
}

func decodeTask(b []byte) (id uint64, length time.Duration) {
	for len(b) > 0 {
		num, typ, l := protowire.ConsumeTag(b)
		if l < 0 || typ != protowire.VarintType {
			return id, length
		}
		b = b[l:]
		v, l := protowire.ConsumeVarint(b)
		if l < 0 {
			return id, length
		}
		b = b[l:]
		switch num {
		case 1:
			id = v
		case 2:
			length = time.Duration(v) * time.Millisecond
		}
	}
	return id, length
}

// numCPUs is the CPUs a node offers tasks: `ray start --num-cpus` (KubeRay and kray set it from the Ray
// container's CPU limit), else the machine's, as Ray counts them.
func numCPUs(f flags, machine int) int {
	v := f.get("num-cpus", "")
	if v == "" {
		return machine
	}
	n, err := strconv.ParseFloat(v, 64)
	if err != nil || n < 0 {
		fmt.Fprintf(os.Stderr, "ray: --num-cpus %q is not a count; using %d\n", v, machine)
		return machine
	}
	return int(n)
}
