package ray

import (
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// Field numbers of the autoscaler.proto messages kray reads or writes.
const (
	fieldReplyClusterResourceState = 1  // GetClusterResourceStateReply.cluster_resource_state
	fieldStateNodeStates           = 3  // ClusterResourceState.node_states
	fieldNodeID                    = 1  // NodeState.node_id
	fieldNodeInstanceID            = 2  // NodeState.instance_id
	fieldNodeStatus                = 8  // NodeState.status
	fieldNodeIdleMs                = 9  // NodeState.idle_duration_ms
	fieldNodeIP                    = 10 // NodeState.node_ip_address
	fieldDrainNodeID               = 1  // DrainNodeRequest.node_id
	fieldDrainReason               = 2  // DrainNodeRequest.reason
	fieldDrainReasonMessage        = 3  // DrainNodeRequest.reason_message
	fieldDrainDeadlineMs           = 4  // DrainNodeRequest.deadline_timestamp_ms
	fieldDrainAccepted             = 1  // DrainNodeReply.is_accepted
	fieldDrainRejection            = 2  // DrainNodeReply.rejection_reason_message
	fieldClusterIDStatus           = 1  // gcs_service.proto GetClusterIdReply.status
	fieldClusterID                 = 2  // gcs_service.proto GetClusterIdReply.cluster_id
	fieldGcsStatusCode             = 1  // gcs.proto GcsStatus.code
	fieldGcsStatusMessage          = 2  // gcs.proto GcsStatus.message
)

// Bounds on what kray keeps of a GCS answer: gRPC bounds its bytes (maxReply), these the memory decoding them
// takes, since a head answers what its image makes it answer.
const (
	// maxNodes bounds the nodes of a cluster's state; Ray's largest clusters hold a few thousand.
	maxNodes = 10000
	// maxRejection bounds a drain rejection's reason, which goes into an event, and a GCS status message.
	maxRejection = 512
	// maxClusterID bounds a cluster ID; Ray's are 28 bytes (a UniqueID).
	maxClusterID = 64
)

// DrainReasonPreemption is DRAIN_NODE_REASON_PREEMPTION: the GCS may not reject it.
const DrainReasonPreemption = 2

// DrainRequest is a decoded DrainNodeRequest.
type DrainRequest struct {
	NodeID   []byte
	Reason   int32
	Message  string
	Deadline time.Time
}

// EncodeDrainRequest encodes a DrainNodeRequest with the preemption reason.
func EncodeDrainRequest(nodeID []byte, message string, deadline time.Time) []byte {
	var b []byte
	b = protowire.AppendTag(b, fieldDrainNodeID, protowire.BytesType)
	b = protowire.AppendBytes(b, nodeID)
	b = protowire.AppendTag(b, fieldDrainReason, protowire.VarintType)
	b = protowire.AppendVarint(b, DrainReasonPreemption)
	b = protowire.AppendTag(b, fieldDrainReasonMessage, protowire.BytesType)
	b = protowire.AppendString(b, message)
	if !deadline.IsZero() {
		b = protowire.AppendTag(b, fieldDrainDeadlineMs, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(deadline.UnixMilli()))
	}
	return b
}

// DecodeDrainRequest decodes a DrainNodeRequest (the fake GCS of kray's tests serves with it).
func DecodeDrainRequest(b []byte) (DrainRequest, error) {
	var r DrainRequest
	err := eachField(b, func(num protowire.Number, typ protowire.Type, v []byte, n uint64) error {
		switch num {
		case fieldDrainNodeID:
			r.NodeID = append([]byte(nil), v...)
		case fieldDrainReason:
			r.Reason = int32(n)
		case fieldDrainReasonMessage:
			r.Message = string(v)
		case fieldDrainDeadlineMs:
			r.Deadline = time.UnixMilli(int64(n))
		}
		return nil
	})
	return r, err
}

// EncodeDrainReply encodes a DrainNodeReply.
func EncodeDrainReply(r DrainReply) []byte {
	var b []byte
	if r.Accepted {
		b = protowire.AppendTag(b, fieldDrainAccepted, protowire.VarintType)
		b = protowire.AppendVarint(b, 1)
	}
	if r.Rejection != "" {
		b = protowire.AppendTag(b, fieldDrainRejection, protowire.BytesType)
		b = protowire.AppendString(b, r.Rejection)
	}
	return b
}

// DecodeDrainReply decodes a DrainNodeReply.
func DecodeDrainReply(b []byte) (DrainReply, error) {
	var r DrainReply
	err := eachField(b, func(num protowire.Number, _ protowire.Type, v []byte, n uint64) error {
		switch num {
		case fieldDrainAccepted:
			r.Accepted = n != 0
		case fieldDrainRejection:
			r.Rejection = string(v[:min(len(v), maxRejection)])
		}
		return nil
	})
	return r, err
}

// EncodeNodes encodes a GetClusterResourceStateReply holding nodes.
func EncodeNodes(nodes []Node) []byte {
	var state []byte
	for _, n := range nodes {
		var m []byte
		m = protowire.AppendTag(m, fieldNodeID, protowire.BytesType)
		m = protowire.AppendBytes(m, n.ID)
		m = protowire.AppendTag(m, fieldNodeInstanceID, protowire.BytesType)
		m = protowire.AppendString(m, n.InstanceID)
		m = protowire.AppendTag(m, fieldNodeStatus, protowire.VarintType)
		m = protowire.AppendVarint(m, uint64(n.Status))
		m = protowire.AppendTag(m, fieldNodeIdleMs, protowire.VarintType)
		m = protowire.AppendVarint(m, uint64(n.Idle.Milliseconds()))
		m = protowire.AppendTag(m, fieldNodeIP, protowire.BytesType)
		m = protowire.AppendString(m, n.IP)
		state = protowire.AppendTag(state, fieldStateNodeStates, protowire.BytesType)
		state = protowire.AppendBytes(state, m)
	}
	var b []byte
	b = protowire.AppendTag(b, fieldReplyClusterResourceState, protowire.BytesType)
	return protowire.AppendBytes(b, state)
}

// DecodeNodes decodes the nodes of a GetClusterResourceStateReply, skipping every other field and entries
// without a node ID; more than maxNodes is an error.
func DecodeNodes(b []byte) ([]Node, error) {
	var nodes []Node
	err := eachField(b, func(num protowire.Number, typ protowire.Type, state []byte, _ uint64) error {
		if num != fieldReplyClusterResourceState || typ != protowire.BytesType {
			return nil
		}
		return eachField(state, func(num protowire.Number, typ protowire.Type, m []byte, _ uint64) error {
			if num != fieldStateNodeStates || typ != protowire.BytesType {
				return nil
			}
			var n Node
			err := eachField(m, func(num protowire.Number, _ protowire.Type, v []byte, x uint64) error {
				switch num {
				case fieldNodeID:
					n.ID = append([]byte(nil), v...)
				case fieldNodeInstanceID:
					n.InstanceID = string(v)
				case fieldNodeStatus:
					n.Status = NodeStatus(int32(x))
				case fieldNodeIdleMs:
					n.Idle = time.Duration(int64(x)) * time.Millisecond
				case fieldNodeIP:
					n.IP = string(v)
				}
				return nil
			})
			switch {
			case err != nil:
				return err
			case len(n.ID) == 0:
				return nil
			case len(nodes) == maxNodes:
				return fmt.Errorf("the GCS lists more than %d nodes, the most kray reads", maxNodes)
			}
			nodes = append(nodes, n)
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	return nodes, nil
}

// eachField calls fn for every top-level field of a protobuf message: v holds length-delimited payloads and
// n varint values. Fixed-width and group fields are skipped.
func eachField(b []byte, fn func(num protowire.Number, typ protowire.Type, v []byte, n uint64) error) error {
	for len(b) > 0 {
		num, typ, l := protowire.ConsumeTag(b)
		if l < 0 {
			return fmt.Errorf("malformed protobuf tag: %w", protowire.ParseError(l))
		}
		b = b[l:]
		var v []byte
		var n uint64
		switch typ {
		case protowire.VarintType:
			n, l = protowire.ConsumeVarint(b)
		case protowire.BytesType:
			v, l = protowire.ConsumeBytes(b)
		default:
			l = protowire.ConsumeFieldValue(num, typ, b)
		}
		if l < 0 {
			return fmt.Errorf("malformed protobuf field %d: %w", num, protowire.ParseError(l))
		}
		b = b[l:]
		if typ != protowire.VarintType && typ != protowire.BytesType {
			continue
		}
		if err := fn(num, typ, v, n); err != nil {
			return err
		}
	}
	return nil
}

// EncodeClusterIDReply encodes a GetClusterIdReply with an OK status.
func EncodeClusterIDReply(id []byte) []byte {
	var b []byte
	b = protowire.AppendTag(b, fieldClusterIDStatus, protowire.BytesType)
	b = protowire.AppendBytes(b, nil)
	b = protowire.AppendTag(b, fieldClusterID, protowire.BytesType)
	return protowire.AppendBytes(b, id)
}

// DecodeClusterIDReply decodes a GetClusterIdReply: the cluster ID, or an error when the GCS answered with a
// status other than OK, or with no ID or one longer than any Ray ClusterID.
func DecodeClusterIDReply(b []byte) ([]byte, error) {
	var id []byte
	var code uint64
	var message string
	err := eachField(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		switch {
		case num == fieldClusterID && typ == protowire.BytesType:
			id = append([]byte(nil), v...)
		case num == fieldClusterIDStatus && typ == protowire.BytesType:
			return eachField(v, func(num protowire.Number, _ protowire.Type, v []byte, n uint64) error {
				switch num {
				case fieldGcsStatusCode:
					code = n
				case fieldGcsStatusMessage:
					message = string(v[:min(len(v), maxRejection)])
				}
				return nil
			})
		}
		return nil
	})
	switch {
	case err != nil:
		return nil, err
	case code != 0:
		return nil, fmt.Errorf("GetClusterId: GCS status %d: %s", code, message)
	case len(id) == 0 || len(id) > maxClusterID:
		return nil, fmt.Errorf("GetClusterId: a cluster ID of %d bytes", len(id))
	}
	return id, nil
}

// errEmptyNodeID is returned for a drain request without a node.
var errEmptyNodeID = errors.New("empty Ray node ID")
