package metrics

import (
	"context"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	rayv1 "github.com/kray-project/kray/api/v1"
)

// KubeRay v1.5.0's RayService series, under its names and labels, computed at each scrape from the
// RayServices in the informer cache.
var (
	serviceInfo = prometheus.NewDesc("kuberay_service_info",
		"Metadata information about RayService custom resources", []string{"name", "namespace", "uid"}, nil)
	serviceReady = prometheus.NewDesc("kuberay_service_condition_ready",
		"Describes whether the RayService is ready. Ready means users can send requests to the underlying cluster and the number of serve endpoints is greater than 0.",
		[]string{"name", "namespace", "uid", "condition"}, nil)
	serviceUpgrading = prometheus.NewDesc("kuberay_service_condition_upgrade_in_progress",
		"Describes whether the RayService is performing a zero-downtime upgrade.", []string{"name", "namespace", "uid", "condition"}, nil)
)

// serviceCollector reports the RayService series of the RayServices reader lists.
type serviceCollector struct {
	reader client.Reader
}

// RegisterRayServices registers the RayService series, read at each scrape from reader (the cache).
func RegisterRayServices(reader client.Reader) error {
	return crmetrics.Registry.Register(serviceCollector{reader: reader})
}

func (c serviceCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- serviceInfo
	ch <- serviceReady
	ch <- serviceUpgrading
}

// Collect emits the series of every RayService; a failed list emits none, as a scrape of a cache that is
// not ready yet.
func (c serviceCollector) Collect(ch chan<- prometheus.Metric) {
	list := &rayv1.RayServiceList{}
	if err := c.reader.List(context.Background(), list); err != nil {
		return
	}
	for i := range list.Items {
		s := &list.Items[i]
		labels := []string{s.Name, s.Namespace, string(s.UID)}
		ch <- prometheus.MustNewConstMetric(serviceInfo, prometheus.GaugeValue, 1, labels...)
		ready := meta.IsStatusConditionTrue(s.Status.Conditions, string(rayv1.RayServiceReady))
		ch <- prometheus.MustNewConstMetric(serviceReady, prometheus.GaugeValue, 1, append(labels, strconv.FormatBool(ready))...)
		upgrading := meta.IsStatusConditionTrue(s.Status.Conditions, string(rayv1.UpgradeInProgress))
		ch <- prometheus.MustNewConstMetric(serviceUpgrading, prometheus.GaugeValue, 1, append(labels, strconv.FormatBool(upgrading))...)
	}
}
