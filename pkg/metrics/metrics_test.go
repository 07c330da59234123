package metrics

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// gaugeValue is g's value.
func gaugeValue(g prometheus.Gauge) float64 {
	m := &dto.Metric{}
	if err := g.Write(m); err != nil {
		panic(err)
	}
	return m.GetGauge().GetValue()
}

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

// A RayJob has KubeRay's info series and one deployment status series, its latest, until it is forgotten
// with its execution durations.
func TestJobSeries(t *testing.T) {
	ObserveJob("ns", "other", "u0", "Running")
	ObserveJob("ns", "j", "u1", "Initializing")
	ObserveJob("ns", "j", "u1", "Running")
	ObserveJobExecution("ns", "j", "u1", "Retrying", 0, 3*time.Second)
	ObserveJob("ns", "j", "u1", "Complete")
	ObserveJobExecution("ns", "j", "u1", "Complete", 1, 5*time.Second)
	if i, s, d := series(jobInfo), series(jobDeploymentStatus), series(jobExecutionDuration); i != 2 || s != 2 || d != 2 {
		t.Fatalf("info %d, status %d, duration %d series; want 2, 2 (one per RayJob) and 2 (one per attempt of j)", i, s, d)
	}
	if g, err := jobDeploymentStatus.GetMetricWithLabelValues("j", "ns", "u1", "Complete"); err != nil || gaugeValue(g) != 1 {
		t.Errorf("j's status series is not its latest, Complete: %v", err)
	}
	if got := gaugeValue(jobExecutionDuration.WithLabelValues("j", "ns", "u1", "Complete", "1")); got != 5 {
		t.Errorf("second attempt's duration %v, want 5", got)
	}
	ForgetJob("ns", "j")
	if i, s, d := series(jobInfo), series(jobDeploymentStatus), series(jobExecutionDuration); i != 1 || s != 1 || d != 0 {
		t.Errorf("after forgetting j: info %d, status %d, duration %d; want other's 1, 1 and 0", i, s, d)
	}
	ForgetJob("ns", "other")
}
