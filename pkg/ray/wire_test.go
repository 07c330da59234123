package ray

import (
	"runtime"
	"strings"

	"encoding/hex"
	"google.golang.org/protobuf/encoding/protowire"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// The expected bytes are written out by hand from autoscaler.proto's field numbers and wire types, so the
// encoder is checked against the schema and not against its own decoder.

func TestEncodeDrainRequest(t *testing.T) {
	got := hex.EncodeToString(EncodeDrainRequest([]byte{1, 2}, "m", time.UnixMilli(1000)))
	// node_id (1, bytes) 0102; reason (2, varint) 2; reason_message (3, bytes) "m"; deadline (4, varint) 1000.
	if want := "0a020102" + "1002" + "1a016d" + "20e807"; got != want {
		t.Fatalf("DrainNodeRequest = %s, want %s", got, want)
	}
	back, err := DecodeDrainRequest(EncodeDrainRequest([]byte{1, 2}, "m", time.UnixMilli(1000)))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(DrainRequest{NodeID: []byte{1, 2}, Reason: DrainReasonPreemption, Message: "m", Deadline: time.UnixMilli(1000)}, back); diff != "" {
		t.Fatalf("round trip (-want +got):\n%s", diff)
	}
}

func TestDecodeDrainReply(t *testing.T) {
	// is_accepted (1, varint) false is absent; rejection_reason_message (2, bytes) "busy".
	b, _ := hex.DecodeString("120462757379")
	got, err := DecodeDrainReply(b)
	if err != nil || got != (DrainReply{Rejection: "busy"}) {
		t.Fatalf("DecodeDrainReply = %+v, %v", got, err)
	}
	b, _ = hex.DecodeString("0801")
	if got, err := DecodeDrainReply(b); err != nil || !got.Accepted {
		t.Fatalf("DecodeDrainReply(accepted) = %+v, %v", got, err)
	}
	if got := hex.EncodeToString(EncodeDrainReply(DrainReply{Accepted: true})); got != "0801" {
		t.Fatalf("EncodeDrainReply = %s", got)
	}
}

func TestDecodeNodes(t *testing.T) {
	// NodeState: node_id ab, instance_id "p", status DRAINING, idle 5 ms, node_ip_address "1.2.3.4", and an
	// empty total_resources entry (field 5) that must be skipped.
	node := "0a01ab" + "120170" + "4004" + "4805" + "5207312e322e332e34" + "2a00"
	// ClusterResourceState: cluster_resource_state_version (1) 7, node_states (3).
	state := "0807" + "1a15" + node
	b, err := hex.DecodeString("0a19" + state)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeNodes(b)
	if err != nil {
		t.Fatal(err)
	}
	want := []Node{{ID: []byte{0xab}, InstanceID: "p", Status: NodeStatusDraining, Idle: 5 * time.Millisecond, IP: "1.2.3.4"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("DecodeNodes (-want +got):\n%s", diff)
	}
	back, err := DecodeNodes(EncodeNodes(want))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, back); diff != "" {
		t.Fatalf("round trip (-want +got):\n%s", diff)
	}
	if _, err := DecodeNodes([]byte{0x0a, 0x05, 0x01}); err == nil {
		t.Fatal("truncated message decoded without error")
	}
}

func TestDrained(t *testing.T) {
	for _, tc := range []struct {
		n    Node
		want bool
	}{
		{Node{Status: NodeStatusRunning}, false},
		{Node{Status: NodeStatusDraining}, false},
		{Node{Status: NodeStatusDraining, Idle: time.Second}, false}, // a real GCS never reports this pair
		{Node{Status: NodeStatusIdle, Idle: time.Second}, true},
		{Node{Status: NodeStatusDead}, true},
	} {
		if got := tc.n.Drained(); got != tc.want {
			t.Errorf("%v idle %v: Drained() = %v, want %v", tc.n.Status, tc.n.Idle, got, tc.want)
		}
	}
}

func TestFindNode(t *testing.T) {
	nodes := []Node{
		{ID: []byte{1}, IP: "10.0.0.1", Status: NodeStatusDead},
		{ID: []byte{2}, IP: "10.0.0.1", Status: NodeStatusRunning},
		{ID: []byte{3}, InstanceID: "pod-b", IP: "10.0.0.9", Status: NodeStatusRunning},
	}
	if n, ok := FindNode(nodes, "pod-a", "10.0.0.1"); !ok || n.ID[0] != 2 {
		t.Errorf("by IP: got %v %v, want the live node 2", n.ID, ok)
	}
	if n, ok := FindNode(nodes, "pod-b", "10.0.0.1"); !ok || n.ID[0] != 3 {
		t.Errorf("by instance ID: got %v %v, want node 3", n.ID, ok)
	}
	if _, ok := FindNode(nodes, "pod-c", ""); ok {
		t.Error("a pod without IP or instance ID matched a node")
	}
}

// A GetClusterResourceStateReply as large as gRPC receives (4 MiB) costs kray no more memory than the nodes
// it may hold: entries without a node ID are skipped, and a list longer than maxNodes is refused.
func TestDecodeNodesMemoryIsBounded(t *testing.T) {
	reply := func(node []byte, n int) []byte {
		var state []byte
		for range n {
			state = protowire.AppendTag(state, fieldStateNodeStates, protowire.BytesType)
			state = protowire.AppendBytes(state, node)
		}
		b := protowire.AppendTag(nil, fieldReplyClusterResourceState, protowire.BytesType)
		return protowire.AppendBytes(b, state)
	}
	oneByteID := protowire.AppendBytes(protowire.AppendTag(nil, fieldNodeID, protowire.BytesType), []byte{1})
	for name, tc := range map[string]struct {
		b     []byte
		nodes int
		err   string
	}{
		"empty entries":       {b: reply(nil, 2<<20)},
		"one-byte IDs":        {b: reply(oneByteID, 4<<20/5), err: "more than 10000 nodes"},
		"as many as it holds": {b: reply(oneByteID, maxNodes), nodes: maxNodes},
	} {
		var nodes []Node
		var err error
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		nodes, err = DecodeNodes(tc.b)
		runtime.ReadMemStats(&after)
		if got := after.TotalAlloc - before.TotalAlloc; got > 4<<20 {
			t.Errorf("%s: decoding %d KiB allocated %d MiB", name, len(tc.b)>>10, got>>20)
		}
		if len(nodes) != tc.nodes || (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: %d nodes, %v; want %d, an error saying %q", name, len(nodes), err, tc.nodes, tc.err)
		}
	}
}

// A drain rejection goes into an event: it is cut at maxRejection bytes.
func TestDecodeDrainReplyCutsTheRejection(t *testing.T) {
	got, err := DecodeDrainReply(EncodeDrainReply(DrainReply{Rejection: strings.Repeat("r", 1<<20)}))
	if err != nil || len(got.Rejection) > maxRejection || !strings.HasPrefix(got.Rejection, "rrr") {
		t.Errorf("rejection of %d bytes, %v", len(got.Rejection), err)
	}
}

func TestClusterIDReply(t *testing.T) {
	id := []byte(strings.Repeat("c", 28))
	// status (1, bytes) empty: an OK GcsStatus; cluster_id (2, bytes) the 28 bytes.
	if got, want := hex.EncodeToString(EncodeClusterIDReply(id)), "0a00"+"121c"+hex.EncodeToString(id); got != want {
		t.Fatalf("GetClusterIdReply = %s, want %s", got, want)
	}
	for _, tc := range []struct {
		name, reply string
		want        []byte
		err         string
	}{
		{name: "ok", reply: "0a00121c" + hex.EncodeToString(id), want: id},
		{name: "no status", reply: "121c" + hex.EncodeToString(id), want: id},
		{name: "status first after the ID", reply: "121c" + hex.EncodeToString(id) + "0a00", want: id},
		// status {code (1, varint) 14; message (2, bytes) "down"}.
		{name: "status not OK", reply: "0a08080e1204646f776e121c" + hex.EncodeToString(id), err: "GCS status 14: down"},
		{name: "no ID", reply: "0a00", err: "a cluster ID of 0 bytes"},
		{name: "an ID too long", reply: "1241" + strings.Repeat("00", 65), err: "a cluster ID of 65 bytes"},
		{name: "malformed", reply: "12ff", err: "malformed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, _ := hex.DecodeString(tc.reply)
			got, err := DecodeClusterIDReply(b)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("DecodeClusterIDReply = %x, %v, want an error with %q", got, err, tc.err)
				}
				return
			}
			if err != nil || string(got) != string(tc.want) {
				t.Fatalf("DecodeClusterIDReply = %x, %v, want %x", got, err, tc.want)
			}
		})
	}
}
