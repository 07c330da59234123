// Package metrics defines kray's Prometheus metrics, registered with controller-runtime's registry so they
// are served on the operator's metrics endpoint next to the controller-runtime ones.
package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	phaseDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "kray_reconcile_phase_duration_seconds",
		Help:    "Time spent in each reconcile phase.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
	}, []string{"phase"})
	phaseErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kray_reconcile_phase_errors_total",
		Help: "Reconcile phases that returned an error.",
	}, []string{"phase"})
	clusterInfo = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kray_raycluster_info",
		Help: "One series per RayCluster with its state; the value is always 1.",
	}, []string{"namespace", "name", "state"})
	clusterPods = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kray_raycluster_pods",
		Help: "Pods labelled with the RayCluster's name, as last observed.",
	}, []string{"namespace", "name"})
	drainReleases = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kray_worker_drain_releases_total",
		Help: "Worker pods released for deletion after a drain, by outcome (drained, no_node, timed_out, disabled, no_restart).",
	}, []string{"outcome"})
	drainDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "kray_worker_drain_duration_seconds",
		Help:    "Time from kray's drain request to a worker pod's release, whatever the outcome.",
		Buckets: prometheus.ExponentialBuckets(0.5, 2, 14),
	})
	workerRestarts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kray_worker_restarts_total",
		Help: "Worker pods restarted because they lost their Ray node, by reason (HeadReplaced, NotInGCS) and how (in_place, replaced).",
	}, []string{"reason", "how"})
	timeToReady = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "kray_raycluster_time_to_ready_seconds",
		Help:    "Time from a RayCluster's creation to its first ready state.",
		Buckets: prometheus.ExponentialBuckets(0.25, 2, 14),
	})
)

func init() {
	crmetrics.Registry.MustRegister(phaseDuration, phaseErrors, clusterInfo, clusterPods, timeToReady, drainReleases, drainDuration, workerRestarts)
}

// ObservePhase records one phase's duration and whether it failed.
func ObservePhase(phase string, d time.Duration, err error) {
	phaseDuration.WithLabelValues(phase).Observe(d.Seconds())
	if err != nil {
		phaseErrors.WithLabelValues(phase).Inc()
	}
}

// clusterStates holds each observed RayCluster's state ("namespace/name" to state): the label of its one
// clusterInfo series, so that a new state replaces it without scanning every cluster's series.
var clusterStates sync.Map

// ObserveCluster records a RayCluster's state and pod count, replacing its previous state series.
func ObserveCluster(namespace, name, state string, pods int) {
	if old, seen := clusterStates.Swap(namespace+"/"+name, state); !seen || old.(string) != state {
		if seen {
			clusterInfo.DeleteLabelValues(namespace, name, old.(string))
		}
		clusterInfo.WithLabelValues(namespace, name, state).Set(1)
	}
	clusterPods.WithLabelValues(namespace, name).Set(float64(pods))
}

// ObserveFirstReady records the time a RayCluster took to become ready the first time.
func ObserveFirstReady(d time.Duration) {
	timeToReady.Observe(d.Seconds())
}

// Forget drops a deleted RayCluster's series.
func Forget(namespace, name string) {
	if old, seen := clusterStates.LoadAndDelete(namespace + "/" + name); seen {
		clusterInfo.DeleteLabelValues(namespace, name, old.(string))
	}
	clusterPods.DeleteLabelValues(namespace, name)
	kubeRayProvisionedDuration.DeletePartialMatch(prometheus.Labels{"name": name, "namespace": namespace})
}

// Outcomes of ObserveDrainRelease.
const (
	DrainDrained  = "drained"
	DrainNoNode   = "no_node"
	DrainTimedOut = "timed_out"
	DrainDisabled = "disabled"
	// DrainNoRestart releases a pod held for an in-place update that restarts no container (labels or
	// annotations only): its Ray node keeps running, so nothing is drained.
	DrainNoRestart = "no_restart"
)

// ObserveDrainRelease records a worker pod released for deletion and, when a drain was started, how long
// it took.
func ObserveDrainRelease(outcome string, d time.Duration) {
	drainReleases.WithLabelValues(outcome).Inc()
	if d > 0 {
		drainDuration.Observe(d.Seconds())
	}
}

// How a worker that lost its Ray node was restarted (WorkerRestarted).
const (
	// RestartInPlace: its Ray container was recreated in the same pod (a Kruise ContainerRecreateRequest).
	RestartInPlace = "in_place"
	// RestartReplaced: its CloneSet replaced the pod.
	RestartReplaced = "replaced"
)

// WorkerRestarted records the restart of a worker that lost its Ray node.
func WorkerRestarted(reason, how string) {
	workerRestarts.WithLabelValues(reason, how).Inc()
}
