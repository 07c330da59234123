package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// series counts a collector's series.
func series(c prometheus.Collector) int {
	ch := make(chan prometheus.Metric, 100)
	c.Collect(ch)
	close(ch)
	return len(ch)
}

// A cluster has one state series, the latest, until it is forgotten; other clusters' series stay.
func TestClusterStateSeries(t *testing.T) {
	ObserveCluster("ns", "other", "ready", 4)
	ObserveCluster("ns", "c", "", 0)
	ObserveCluster("ns", "c", "ready", 4)
	ObserveCluster("ns", "c", "ready", 3)
	if n := series(clusterInfo); n != 2 {
		t.Fatalf("%d state series for two clusters, want 2", n)
	}
	Forget("ns", "c")
	if n, p := series(clusterInfo), series(clusterPods); n != 1 || p != 1 {
		t.Errorf("%d state and %d pod series after forgetting c, want other's 1 and 1", n, p)
	}
	if !clusterInfo.DeleteLabelValues("ns", "other", "ready") {
		t.Error("other's series is not its latest state, ready")
	}
	Forget("ns", "other")
}
