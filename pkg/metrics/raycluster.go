package metrics

import (
	"context"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/constants"
)

// KubeRay's RayCluster series, under its names and labels: info and the provisioned condition computed at
// each scrape from the RayClusters in the informer cache, the provisioning time recorded once per cluster.
var (
	kubeRayClusterInfo = prometheus.NewDesc("kuberay_cluster_info",
		"Metadata information about RayCluster custom resources", []string{"name", "namespace", "uid", "owner_kind"}, nil)
	kubeRayClusterProvisioned = prometheus.NewDesc("kuberay_cluster_condition_provisioned",
		"Indicates whether the RayCluster is provisioned", []string{"name", "namespace", "uid", "condition"}, nil)
	kubeRayProvisionedDuration = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kuberay_cluster_provisioned_duration_seconds",
		Help: "The time, in seconds, when a RayCluster's `RayClusterProvisioned` status transitions from false (or unset) to true",
	}, []string{"name", "namespace", "uid"})
)

func init() {
	crmetrics.Registry.MustRegister(kubeRayProvisionedDuration)
}

// clusterCollector reports KubeRay's per-RayCluster series of the RayClusters reader lists.
type clusterCollector struct {
	reader client.Reader
}

// RegisterRayClusters registers KubeRay's RayCluster info and provisioned-condition series, read at each
// scrape from reader (the cache).
func RegisterRayClusters(reader client.Reader) error {
	return crmetrics.Registry.Register(clusterCollector{reader: reader})
}

func (c clusterCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- kubeRayClusterInfo
	ch <- kubeRayClusterProvisioned
}

// Collect emits the series of every RayCluster; a failed list emits none, as a scrape of a cache that is
// not ready yet. owner_kind is the ray.io/originated-from-crd label (RayJob, RayService), else "None".
func (c clusterCollector) Collect(ch chan<- prometheus.Metric) {
	list := &rayv1.RayClusterList{}
	if err := c.reader.List(context.Background(), list); err != nil {
		return
	}
	for i := range list.Items {
		rc := &list.Items[i]
		owner := rc.Labels[constants.LabelOriginatedFromCRD]
		if owner == "" {
			owner = "None"
		}
		ch <- prometheus.MustNewConstMetric(kubeRayClusterInfo, prometheus.GaugeValue, 1, rc.Name, rc.Namespace, string(rc.UID), owner)
		provisioned := meta.IsStatusConditionTrue(rc.Status.Conditions, string(rayv1.RayClusterProvisioned))
		ch <- prometheus.MustNewConstMetric(kubeRayClusterProvisioned, prometheus.GaugeValue, 1, rc.Name, rc.Namespace, string(rc.UID), strconv.FormatBool(provisioned))
	}
}

// ObserveProvisioned records, for a RayCluster whose stored status went from not provisioned to
// RayClusterProvisioned, the time since its creation (KubeRay's kuberay_cluster_provisioned_duration_seconds).
func ObserveProvisioned(rc *rayv1.RayCluster, before, after rayv1.RayClusterStatus, now time.Time) {
	cond := string(rayv1.RayClusterProvisioned)
	if meta.IsStatusConditionTrue(before.Conditions, cond) || !meta.IsStatusConditionTrue(after.Conditions, cond) {
		return
	}
	kubeRayProvisionedDuration.WithLabelValues(rc.Name, rc.Namespace, string(rc.UID)).Set(now.Sub(rc.CreationTimestamp.Time).Seconds())
}
