package rayservice

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/internal/controller/shared"
	"github.com/kray-project/kray/pkg/builder"
	"github.com/kray-project/kray/pkg/dashboard"
	"github.com/kray-project/kray/pkg/validation"
)

// Timing of the RayService controller.
const (
	// PollInterval is how often a RayService is looked at again: Serve's application statuses and the head
	// proxies' health have no watch (KubeRay's 2 s).
	PollInterval = 2 * time.Second
	// MaxPollInterval caps the poll of a RayService whose Serve reads keep failing, which doubles with each
	// reconcile in a row they failed in.
	MaxPollInterval = time.Minute
	// DefaultDeletionDelay is how long a cluster that no longer serves is kept when
	// rayClusterDeletionDelaySeconds is unset.
	DefaultDeletionDelay = 60 * time.Second
	// SwitchWait bounds how long a pending cluster whose applications run waits for a ready serve endpoint on
	// every pod Serve runs a proxy on before it takes the traffic with the endpoints it has (at least one):
	// a proxy Serve counts on makes its pod Ready within a readiness probe period or two.
	SwitchWait = 30 * time.Second
)

// ServeRead is one cluster's answer to the Serve API's GET: the details, or why there are none.
type ServeRead struct {
	Details *dashboard.ServeDetails
	Err     error
}

// Observed is what the reconciler read for one RayService: the inputs of Next.
type Observed struct {
	// Service is the RayService as read; Next never changes it.
	Service *rayv1.RayService
	// Clusters are the RayClusters the RayService controls, by name.
	Clusters map[string]*rayv1.RayCluster
	// PendingTaken is set when a RayCluster of the pending cluster's name exists that the RayService does
	// not control: the name is someone else's.
	PendingTaken bool
	// Pods are the pods of the RayService's active and pending clusters.
	Pods []corev1.Pod
	// Serve is the Serve API's answer of the cluster ServeTarget names, by cluster name.
	Serve map[string]ServeRead
	// ServeFailures is how many reconciles in a row, this one included, a Serve read failed in.
	ServeFailures int
	// ProxyHealthy is the health of each probed head pod's Serve proxy, by pod name.
	ProxyHealthy map[string]bool
	// ProxyErr is why a probed head pod's Serve proxy is not healthy, by pod name.
	ProxyErr map[string]error
	// HeadService and ServeService are the RayService's Services, nil when absent or not its own (a
	// suspend deletes them).
	HeadService, ServeService *corev1.Service
	// Applied is what each cluster's Serve last accepted, by cluster name (recorded on the clusters).
	Applied map[string]Served
	// Gateway and HTTPRoute are the RayService's own Gateway API objects of an incremental upgrade, nil when
	// absent or not its own; GatewayErr says why they could not be read (the Gateway API is not installed).
	Gateway    *gwv1.Gateway
	HTTPRoute  *gwv1.HTTPRoute
	GatewayErr error
	// ClusterServeServices are the serve Services of the clusters of an incremental upgrade that exist, by
	// cluster name.
	ClusterServeServices map[string]*corev1.Service
	// Now is the reconcile's clock.
	Now time.Time
	// Suffix is a fresh random name suffix, used when a new cluster needs a name.
	Suffix string
	// Options are the builders' operator-level settings.
	Options builder.Options
	// ZeroDowntime is KubeRay's ENABLE_ZERO_DOWNTIME: whether a RayService without an upgradeStrategy
	// prepares a new cluster for a changed cluster spec.
	ZeroDowntime bool
	// Validation are the operator settings the spec is checked with.
	Validation validation.RayServiceOptions
}

// Served is what one cluster's Serve accepted: a serveConfigV2 and the target_capacity it was put with
// (nil: none). Config is "" when only the config's Hash is known (one larger than maxRecordedConfig).
type Served struct {
	Config   string
	Capacity *int32
	// Hash is configHash(Config), set when read from a cluster's record.
	Hash string
}

// ActionKind names a write Next asks for.
type ActionKind string

// The actions of a Decision.
const (
	CreateCluster ActionKind = "CreateCluster"
	// UpdateCluster rebuilds a cluster's spec, labels and annotations in place (Action.Cluster).
	UpdateCluster ActionKind = "UpdateCluster"
	// DeleteCluster deletes a cluster (Action.Why, when set, ends its event: "during suspend").
	DeleteCluster ActionKind = "DeleteCluster"
	// DeleteService deletes the head or serve Service Action.Service (a suspend's).
	DeleteService ActionKind = "DeleteService"
	// MarkCluster sets (Action.Deadline) or clears (zero) the deletion deadline of a cluster.
	MarkCluster ActionKind = "MarkCluster"
	// MarkSwitch sets (Action.Deadline) or clears (zero) the switch deadline of a cluster.
	MarkSwitch ActionKind = "MarkSwitch"
	// ApplyServe puts serveConfigV2 on the cluster named Action.Name.
	ApplyServe ActionKind = "ApplyServe"
	// LabelHead sets the ray.io/serve label of the head pod Action.Pod to Action.Value (Action.Why says why
	// when "false").
	LabelHead ActionKind = "LabelHead"
	// SyncService creates Action.Service, or points the live one at its cluster.
	SyncService ActionKind = "SyncService"
	// CreateService creates Action.Service (a cluster's serve Service of an incremental upgrade).
	CreateService ActionKind = "CreateService"
	// SyncGateway creates Action.Object (the RayService's Gateway or HTTPRoute), or updates the live one
	// (Action.Live) to it.
	SyncGateway ActionKind = "SyncGateway"
	// DeleteGateway deletes the RayService's Gateway or HTTPRoute Action.Object (a suspend's).
	DeleteGateway ActionKind = "DeleteGateway"
)

// Action is one write Next asks for, with what it writes.
type Action struct {
	Kind    ActionKind
	Name    string
	Cluster *rayv1.RayCluster
	Pod     *corev1.Pod
	Value   string
	// Why says, for LabelHead, why a head leaves the serve Service, and for a deletion why it is made.
	Why      string
	Service  *corev1.Service
	Deadline time.Time
	Config   string
	// Capacity is the target_capacity ApplyServe puts with Config (nil: none).
	Capacity *int32
	// Object is the Gateway or HTTPRoute of SyncGateway and DeleteGateway; Live the one SyncGateway updates.
	Object, Live client.Object
}

// Decision is Next's answer: the status to write, the writes to make, the events and when to look again.
type Decision struct {
	Status       rayv1.RayServiceStatuses
	Actions      []Action
	Events       []shared.Event
	RequeueAfter time.Duration
	// Invalid is set when the spec was refused: nothing is written but the status, whose Ready condition
	// says why (ValidationFailed, as KubeRay v1.7).
	Invalid bool
}

// wantRequeue keeps the earliest of the requeues asked for.
func (d *Decision) wantRequeue(after time.Duration) {
	after = max(after, 100*time.Millisecond)
	if d.RequeueAfter == 0 || after < d.RequeueAfter {
		d.RequeueAfter = after
	}
}
