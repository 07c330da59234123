package metrics

import (
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// KubeRay v1.5.0's RayJob series, under its names and labels, so dashboards built on KubeRay read kray too.
var (
	jobInfo = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kuberay_job_info",
		Help: "Metadata information about RayJob custom resources",
	}, []string{"name", "namespace", "uid"})
	jobDeploymentStatus = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kuberay_job_deployment_status",
		Help: "The RayJob's current deployment status",
	}, []string{"name", "namespace", "uid", "deployment_status"})
	jobExecutionDuration = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kuberay_job_execution_duration_seconds",
		Help: "Duration from when the RayJob's JobDeploymentStatus leaves Initializing to Retrying or a terminal state (Complete or Failed).",
	}, []string{"name", "namespace", "uid", "job_deployment_status", "retry_count"})
)

func init() {
	crmetrics.Registry.MustRegister(jobInfo, jobDeploymentStatus, jobExecutionDuration)
}

// jobSeries is what a RayJob's info and deployment status series are labelled with, to replace them when
// either changes.
type jobSeries struct{ uid, status string }

// jobs holds each observed RayJob's jobSeries by "namespace/name".
var jobs sync.Map

// ObserveJob records a RayJob's info series and its deployment status series, replacing the previous ones.
func ObserveJob(namespace, name, uid, deploymentStatus string) {
	now := jobSeries{uid: uid, status: deploymentStatus}
	old, seen := jobs.Swap(namespace+"/"+name, now)
	if seen && old.(jobSeries) == now {
		return
	}
	if seen {
		was := old.(jobSeries)
		jobInfo.DeleteLabelValues(name, namespace, was.uid)
		jobDeploymentStatus.DeleteLabelValues(name, namespace, was.uid, was.status)
	}
	jobInfo.WithLabelValues(name, namespace, uid).Set(1)
	jobDeploymentStatus.WithLabelValues(name, namespace, uid, deploymentStatus).Set(1)
}

// ObserveJobExecution records how long an attempt ran, from the start of the attempt to the status it
// ended in (Complete, Failed or Retrying), after retries earlier failures; as KubeRay, one series per
// outcome and retry count.
func ObserveJobExecution(namespace, name, uid, deploymentStatus string, retries int, took time.Duration) {
	jobExecutionDuration.WithLabelValues(name, namespace, uid, deploymentStatus, strconv.Itoa(retries)).Set(took.Seconds())
}

// ForgetJob drops a deleted RayJob's series.
func ForgetJob(namespace, name string) {
	if old, seen := jobs.LoadAndDelete(namespace + "/" + name); seen {
		was := old.(jobSeries)
		jobInfo.DeleteLabelValues(name, namespace, was.uid)
		jobDeploymentStatus.DeleteLabelValues(name, namespace, was.uid, was.status)
	}
	jobExecutionDuration.DeletePartialMatch(prometheus.Labels{"name": name, "namespace": namespace})
}
