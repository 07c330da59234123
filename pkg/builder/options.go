// Package builder turns a RayCluster into the objects kray writes: the head Service, the head Advanced
// StatefulSet, one CloneSet per worker group, the autoscaler's RBAC, and the pod templates inside them.
//
// Every function here is pure: no client, no environment, no logging, no clock. The same input always gives
// the same output, which the golden tests pin.
package builder

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"

	"github.com/kray-project/kray/pkg/batchscheduler"
	"github.com/kray-project/kray/pkg/constants"
)

// Options are the operator-level settings that shape generated objects.
type Options struct {
	// ClusterDomain is the cluster DNS domain used in the head Service FQDN; empty means "cluster.local".
	ClusterDomain string
	// Version is kray's version, reported to Ray's usage stats; empty means "dev".
	Version string
	// NoInitContainerInjection leaves out the workers' wait-gcs-ready init container
	// (KubeRay's ENABLE_INIT_CONTAINER_INJECTION=false).
	NoInitContainerInjection bool
	// NoProbesInjection leaves the Ray container's probes as the user wrote them
	// (KubeRay's ENABLE_PROBES_INJECTION=false).
	NoProbesInjection bool
	// LoginShell runs the generated Ray command in a login shell, bash -lc (KubeRay's ENABLE_LOGIN_SHELL).
	LoginShell bool
	// HeadClusterIPService gives the default head Service a cluster IP instead of making it headless
	// (KubeRay's ENABLE_RAY_HEAD_CLUSTER_IP_SERVICE).
	HeadClusterIPService bool
	// Scheduling is how this cluster's pods are scheduled (a batch scheduler, a gang); the zero value is
	// Kubernetes' default scheduler.
	Scheduling batchscheduler.Scheduling
	// LiveTemplates are the pod templates of the cluster's existing workloads, by workload name: the scheduler
	// metadata a workload's template already has is kept (batchscheduler.Scheduling.Keep), so a change of the
	// cluster's labels never restarts pods for it.
	LiveTemplates map[string]*corev1.PodTemplateSpec
	// PodDefaults are what the operator's Configuration file adds to every Ray pod (KubeRay's
	// headSidecarContainers, workerSidecarContainers, defaultContainerEnvs, defaultPodLabels and
	// defaultPodAnnotations).
	PodDefaults PodDefaults
	// IngressAnnotationPrefixes are the prefixes of the RayCluster annotations copied onto the head Ingress
	// (IngressAnnotationCopied); nil is DefaultIngressAnnotationPrefixes.
	IngressAnnotationPrefixes []string
	// OperatorPeer, when set, is who the operator's pods are: the head's NetworkPolicy lets them in on the
	// ports the operator calls (OperatorPorts).
	OperatorPeer *networkingv1.NetworkPolicyPeer
}

// PodDefaults are platform-wide additions to Ray pods. A label, annotation or env var the pod already has,
// from the user or from kray, wins over a default of the same name.
type PodDefaults struct {
	// HeadSidecars and WorkerSidecars are appended to the containers of head and worker pods.
	HeadSidecars, WorkerSidecars []corev1.Container
	// Env is added to the Ray container of every pod.
	Env []corev1.EnvVar
	// Labels and Annotations are added to every pod.
	Labels, Annotations map[string]string
}

func (o Options) clusterDomain() string {
	if o.ClusterDomain == "" {
		return constants.DefaultClusterDomain
	}
	return o.ClusterDomain
}

func (o Options) version() string {
	if o.Version == "" {
		return "dev"
	}
	return o.Version
}
