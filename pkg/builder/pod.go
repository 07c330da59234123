package builder

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/names"
	"github.com/kray-project/kray/pkg/spec"
)

// Environment variable names kray sets on Ray containers (KubeRay's names: Ray reads them).
const (
	envFQRayIP               = "FQ_RAY_IP"
	envRayIP                 = "RAY_IP"
	envClusterName           = "RAY_CLUSTER_NAME"
	envClusterNamespace      = "RAY_CLUSTER_NAMESPACE"
	envCloudInstanceID       = "RAY_CLOUD_INSTANCE_ID"
	envNodeTypeName          = "RAY_NODE_TYPE_NAME"
	envGenRayStartCmd        = "KUBERAY_GEN_RAY_START_CMD"
	envRayPort               = "RAY_PORT"
	envRayAddress            = "RAY_ADDRESS"
	envUsageStatsInUse       = "RAY_USAGE_STATS_KUBERAY_IN_USE"
	envUsageStatsExtraTags   = "RAY_USAGE_STATS_EXTRA_TAGS"
	envDiskUsage             = "RAY_DASHBOARD_ENABLE_K8S_DISK_USAGE"
	envHeadPodName           = "RAY_HEAD_POD_NAME"
	envCRDVersion            = "KUBERAY_CRD_VER"
	envGenAutoscalerStartCmd = "KUBERAY_GEN_AUTOSCALER_START_CMD"
	envTaskWaitForDeathInfo  = "RAY_timeout_ms_task_wait_for_death_info"
	envGCSRequestTimeout     = "RAY_gcs_server_request_timeout_seconds"
	envServeKVTimeout        = "RAY_SERVE_KV_TIMEOUT_S"
)

// HeadPodTemplate returns the pod template of the head Advanced StatefulSet. It does not modify rc.
func HeadPodTemplate(rc *rayv1.RayCluster, opts Options) corev1.PodTemplateSpec {
	head := rc.Spec.HeadGroupSpec
	tmpl := *head.Template.DeepCopy()
	params := startParams(head.RayStartParams, head.Resources, head.Labels)
	setDefault(params, "dashboard-host", "0.0.0.0")
	autoscaling := spec.AutoscalingEnabled(rc)
	if autoscaling {
		setDefault(params, "no-monitor", "true")
	}
	tmpl.Labels = podLabels(rc, tmpl.Labels, head.Labels, constants.NodeTypeHead, constants.HeadGroupName)
	if spec.ServedByRayService(rc) {
		tmpl.Labels[constants.LabelServe] = "false" // the RayService controller sets it from the proxy's health
	}
	tmpl.Annotations = podAnnotations(rc, tmpl.Annotations, true)
	if autoscaling {
		tmpl.Spec.ServiceAccountName = names.AutoscalerServiceAccountFor(rc)
		if v := rc.Spec.AutoscalerOptions; v != nil && v.Version != nil {
			enabled := "false"
			if *v.Version == rayv1.AutoscalerVersionV2 {
				enabled = "true"
			}
			appendEnvIfAbsent(&tmpl.Spec.Containers[constants.RayContainerIndex], corev1.EnvVar{Name: constants.EnvAutoscalerV2, Value: enabled})
		}
		tmpl.Spec.Containers = append(tmpl.Spec.Containers, autoscalerContainer(rc, tmpl.Spec.Containers[constants.RayContainerIndex]))
	}
	configureFT(rc, &tmpl, params, true)
	configureAuth(rc, &tmpl)
	configureTLS(rc, &tmpl, true)
	finishPod(rc, &tmpl, params, true, opts)
	if autoscaling {
		addEmptyDir(&tmpl.Spec, RayLogsVolumeName, RayLogsMountPath, "", nil,
			&tmpl.Spec.Containers[constants.RayContainerIndex], &tmpl.Spec.Containers[len(tmpl.Spec.Containers)-1])
	}
	addCollector(rc, &tmpl, true, opts)
	opts.PodDefaults.apply(&tmpl, opts.PodDefaults.HeadSidecars)
	return tmpl
}

// WorkerPodTemplate returns the pod template of a worker group's CloneSet. It does not modify rc or group.
// Under upgradeStrategy RollingUpdate it leaves out KubeRay's wait-gcs-ready init container: that container
// runs the Ray image, and Kruise can update a pod in place only when nothing but container images and
// metadata changed, so with it every Ray upgrade would recreate the workers. `ray start` waits for the GCS
// itself, and the kubelet restarts a worker that gave up.
func WorkerPodTemplate(rc *rayv1.RayCluster, group *rayv1.WorkerGroupSpec, opts Options) corev1.PodTemplateSpec {
	tmpl := *group.Template.DeepCopy()
	tmpl.Name = ""
	params := startParams(group.RayStartParams, group.Resources, group.Labels)
	fqdn := HeadServiceFQDN(rc, opts)
	setDefault(params, "address", fqdn+":"+GCSPort(rc))
	tmpl.Labels = podLabels(rc, tmpl.Labels, group.Labels, constants.NodeTypeWorker, group.GroupName)
	if spec.ServedByRayService(rc) {
		tmpl.Labels[constants.LabelServe] = "true" // the readiness probe checks the Serve proxy
	}
	tmpl.Annotations = podAnnotations(rc, tmpl.Annotations, false)
	if !spec.Rolling(rc) && !opts.NoInitContainerInjection {
		tmpl.Spec.InitContainers = append(tmpl.Spec.InitContainers, waitGCSReadyContainer(tmpl.Spec.Containers[constants.RayContainerIndex], fqdn, GCSPort(rc)))
	}
	configureFT(rc, &tmpl, params, false)
	configureAuth(rc, &tmpl)
	configureTLS(rc, &tmpl, false)
	finishPod(rc, &tmpl, params, false, opts)
	addCollector(rc, &tmpl, false, opts)
	opts.PodDefaults.apply(&tmpl, opts.PodDefaults.WorkerSidecars)
	return tmpl
}

// finishPod applies the steps shared by head and worker: metrics port, /dev/shm, the ray start command,
// init container and Ray container env, probes, and the restartPolicy Kruise accepts.
func finishPod(rc *rayv1.RayCluster, tmpl *corev1.PodTemplateSpec, params map[string]string, head bool, opts Options) {
	tmpl.Namespace = ""
	ray := &tmpl.Spec.Containers[constants.RayContainerIndex]
	setDefault(params, "metrics-export-port", fmt.Sprint(DefaultMetricsPort))
	setDefault(params, "dashboard-agent-listen-port", fmt.Sprint(DefaultDashboardAgentPort))
	params["block"] = "true"
	if !hasPortNamed(ray.Ports, "metrics") {
		ray.Ports = append(ray.Ports, corev1.ContainerPort{Name: "metrics", ContainerPort: DefaultMetricsPort, Protocol: corev1.ProtocolTCP})
	}
	if _, ok := params["plasma-directory"]; !ok {
		addEmptyDir(&tmpl.Spec, SharedMemoryVolumeName, SharedMemoryMountPath, corev1.StorageMediumMemory, shmSize(ray.Resources), ray)
	}
	addResourceParams(params, ray.Resources)
	start := rayStartCommand(head, params)
	if cmd, args, ok := containerCommand(*ray, start, isTrue(rc.Annotations[constants.AnnotationOverwriteContainerCmd]), opts.LoginShell); ok {
		ray.Command, ray.Args = cmd, args
	}
	fqdn := HeadServiceFQDN(rc, opts)
	for i := range tmpl.Spec.InitContainers {
		appendEnvIfAbsent(&tmpl.Spec.InitContainers[i], corev1.EnvVar{Name: envFQRayIP, Value: fqdn}, corev1.EnvVar{Name: envRayIP, Value: names.HeadService(rc.Name)})
	}
	appendEnvIfAbsent(ray, opts.PodDefaults.Env...)
	setRayContainerEnv(rc, ray, head, start, opts)
	if !opts.NoProbesInjection {
		addProbes(rc, ray, head, params)
	}
	if requested := requestedRestartPolicy(rc, tmpl.Spec.RestartPolicy); requested != "" && requested != corev1.RestartPolicyAlways {
		tmpl.Annotations[constants.AnnotationRestartPolicy] = string(requested)
	}
	tmpl.Spec.RestartPolicy = corev1.RestartPolicyAlways
}

// requestedRestartPolicy is the restartPolicy the user meant: the template's, or Never when autoscaler v2
// implies it (KubeRay forces Never for v2).
func requestedRestartPolicy(rc *rayv1.RayCluster, templatePolicy corev1.RestartPolicy) corev1.RestartPolicy {
	if templatePolicy == "" && spec.AutoscalingEnabled(rc) && spec.AutoscalerV2(rc) {
		return corev1.RestartPolicyNever
	}
	return templatePolicy
}

// startParams copies the user's ray start params and folds in the group's `resources` and `labels` maps.
func startParams(user, groupResources, groupLabels map[string]string) map[string]string {
	params := make(map[string]string, len(user)+8)
	for k, v := range user {
		params[k] = v
	}
	applyGroupResources(params, groupResources)
	applyGroupLabels(params, groupLabels)
	return params
}

// podLabels merges KubeRay's default pod labels under the template's and group's labels; the cluster,
// node type and group labels always win because selectors and the autoscaler depend on them.
func podLabels(rc *rayv1.RayCluster, template, group map[string]string, nodeType, groupName string) map[string]string {
	identifier := rc.Name + "-" + nodeType
	labels := map[string]string{
		constants.LabelIsRayNode:  constants.IsRayNodeValue,
		constants.LabelIdentifier: checkLabel(identifier),
		constants.LabelAppName:    constants.AppNameDefault,
		constants.LabelCreatedBy:  constants.CreatedByValue,
		constants.LabelCluster:    rc.Name,
		constants.LabelNodeType:   nodeType,
		constants.LabelGroup:      groupName,
	}
	for k, v := range template {
		labels[k] = v
	}
	for k, v := range group {
		labels[k] = v
	}
	labels[constants.LabelCluster] = rc.Name
	labels[constants.LabelNodeType] = nodeType
	labels[constants.LabelGroup] = groupName
	return labels
}

// checkLabel keeps the last 63 characters of a label value and replaces a leading punctuation mark, as KubeRay does.
func checkLabel(s string) string {
	if len(s) > 63 {
		s = s[len(s)-63:]
	}
	if s != "" && strings.ContainsRune("-_.", rune(s[0])) {
		s = "r" + s[1:]
	}
	return s
}

func podAnnotations(rc *rayv1.RayCluster, template map[string]string, head bool) map[string]string {
	out := make(map[string]string, len(template)+2)
	for k, v := range template {
		out[k] = v
	}
	if isTrue(rc.Annotations[constants.AnnotationOverwriteContainerCmd]) {
		out[constants.AnnotationOverwriteContainerCmd] = "true"
	}
	return out
}

// setRayContainerEnv appends KubeRay's Ray container env vars in KubeRay's order; "if absent" ones keep a user value.
func setRayContainerEnv(rc *rayv1.RayCluster, c *corev1.Container, head bool, start string, opts Options) {
	port := GCSPort(rc)
	address := "127.0.0.1:" + port
	if !head {
		fqdn := HeadServiceFQDN(rc, opts)
		address = fqdn + ":" + port
		c.Env = append(c.Env, corev1.EnvVar{Name: envFQRayIP, Value: fqdn}, corev1.EnvVar{Name: envRayIP, Value: names.HeadService(rc.Name)})
	}
	c.Env = append(c.Env,
		fieldEnv(envClusterName, "metadata.labels['"+constants.LabelCluster+"']"),
		fieldEnv(envClusterNamespace, "metadata.namespace"),
		fieldEnv(envCloudInstanceID, "metadata.name"),
		fieldEnv(envNodeTypeName, "metadata.labels['"+constants.LabelGroup+"']"),
		corev1.EnvVar{Name: envGenRayStartCmd, Value: start},
	)
	appendEnvIfAbsent(c, corev1.EnvVar{Name: envRayPort, Value: port})
	if spec.ServedByRayService(rc) {
		// Serve fails over faster when a dead node's tasks are not awaited and GCS calls time out soon.
		appendEnvIfAbsent(c, corev1.EnvVar{Name: envTaskWaitForDeathInfo, Value: "0"},
			corev1.EnvVar{Name: envGCSRequestTimeout, Value: "5"}, corev1.EnvVar{Name: envServeKVTimeout, Value: "5"})
	}
	appendEnvIfAbsent(c, corev1.EnvVar{Name: envRayAddress, Value: address})
	appendEnvIfAbsent(c, corev1.EnvVar{Name: envUsageStatsInUse, Value: "1"})
	if head {
		c.Env = append(c.Env, corev1.EnvVar{Name: envUsageStatsExtraTags, Value: "kuberay_version=" + opts.version() + ";kuberay_crd=" + spec.OriginatedFrom(rc)})
	}
	appendEnvIfAbsent(c, corev1.EnvVar{Name: envDiskUsage, Value: "1"})
}

func fieldEnv(name, path string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
}

// appendEnvIfAbsent appends each variable whose name the container does not define yet.
func appendEnvIfAbsent(c *corev1.Container, vars ...corev1.EnvVar) {
	for _, v := range vars {
		if !hasEnv(c.Env, v.Name) {
			c.Env = append(c.Env, v)
		}
	}
}

func hasEnv(env []corev1.EnvVar, name string) bool {
	for _, e := range env {
		if e.Name == name {
			return true
		}
	}
	return false
}

// waitGCSReadyContainer is the worker init container that blocks until the head's GCS answers health checks.
func waitGCSReadyContainer(ray corev1.Container, fqdn, port string) corev1.Container {
	limits := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m"), corev1.ResourceMemory: resource.MustParse("256Mi")}
	script := fmt.Sprintf(`
SECONDS=0
while true; do
  if (( SECONDS <= 120 )); then
    if ray health-check --address %[1]s:%[2]s > /dev/null 2>&1; then
      echo "GCS is ready."
      break
    fi
    echo "$SECONDS seconds elapsed: waiting for GCS to be ready."
  else
    if ray health-check --address %[1]s:%[2]s; then
      echo "GCS is ready. Errors above can be ignored."
      break
    fi
    echo "$SECONDS seconds elapsed: still waiting for GCS to be ready."
  fi
  sleep 5
done
`, fqdn, port)
	c := ray.DeepCopy()
	return corev1.Container{
		Name:            WaitGCSReadyInitContainerName,
		Image:           ray.Image,
		ImagePullPolicy: ray.ImagePullPolicy,
		Command:         []string{"/bin/bash", "-c", "--"},
		Args:            []string{script},
		SecurityContext: c.SecurityContext,
		Env:             c.Env,
		VolumeMounts:    c.VolumeMounts,
		Resources:       corev1.ResourceRequirements{Limits: limits, Requests: limits.DeepCopy()},
	}
}

// addEmptyDir adds an emptyDir volume (once) and mounts it at path in each container that has nothing mounted there.
func addEmptyDir(pod *corev1.PodSpec, name, path string, medium corev1.StorageMedium, size *resource.Quantity, containers ...*corev1.Container) {
	mounted := false
	for _, c := range containers {
		if hasMountAt(c, path) {
			continue
		}
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: name, MountPath: path})
		mounted = true
	}
	if !mounted || hasVolume(pod.Volumes, name) {
		return
	}
	pod.Volumes = append(pod.Volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: medium, SizeLimit: size}}})
}

func hasMountAt(c *corev1.Container, path string) bool {
	for _, m := range c.VolumeMounts {
		if m.MountPath == path {
			return true
		}
	}
	return false
}

// shmSize is the /dev/shm size: the Ray container's memory limit, else its request, else unbounded.
func shmSize(res corev1.ResourceRequirements) *resource.Quantity {
	if q, ok := res.Limits[corev1.ResourceMemory]; ok && !q.IsZero() {
		return &q
	}
	if q, ok := res.Requests[corev1.ResourceMemory]; ok && !q.IsZero() {
		return &q
	}
	return nil
}

func hasPortNamed(ports []corev1.ContainerPort, name string) bool {
	for _, p := range ports {
		if p.Name == name {
			return true
		}
	}
	return false
}

// addProbes injects KubeRay's liveness and readiness probes into the Ray container where the user set none.
func addProbes(rc *rayv1.RayCluster, c *corev1.Container, head bool, params map[string]string) {
	timeout := int32(2)
	if head {
		timeout = 5
	}
	if c.LivenessProbe == nil {
		c.LivenessProbe = rayProbe(rc, head, params, 30, timeout, 120)
	}
	if c.ReadinessProbe == nil {
		c.ReadinessProbe = rayProbe(rc, head, params, 10, timeout, 10)
		if !head && spec.ServedByRayService(rc) {
			c.ReadinessProbe = serveReadinessProbe(c, params, timeout)
		}
	}
}

// serveReadinessProbe is the readiness probe of a RayService worker: the raylet's health and the Serve
// proxy's, failing at the first miss so that the serve Service stops sending traffic to a worker whose
// proxy is gone. It is a command whatever the Ray version, as KubeRay's is.
func serveReadinessProbe(c *corev1.Container, params map[string]string, timeout int32) *corev1.Probe {
	agentPort := paramOr(params, "dashboard-agent-listen-port", fmt.Sprint(DefaultDashboardAgentPort))
	cmd := fmt.Sprintf("wget --tries 1 -T 2 -q -O- http://localhost:%s/api/local_raylet_healthz | grep success", agentPort) +
		fmt.Sprintf(" && wget --tries 1 -T 10 -q -O- http://localhost:%d/-/healthz | grep success", ServePort(c))
	return &corev1.Probe{InitialDelaySeconds: 10, TimeoutSeconds: timeout, PeriodSeconds: 5, SuccessThreshold: 1, FailureThreshold: 1,
		ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"bash", "-c", cmd}}}}
}

// ServePort is the container's port named "serve", else the Serve proxy's default port.
func ServePort(c *corev1.Container) int32 {
	for _, p := range c.Ports {
		if p.Name == constants.ServePortName {
			return p.ContainerPort
		}
	}
	return constants.DefaultServePort
}

func rayProbe(rc *rayv1.RayCluster, head bool, params map[string]string, delay, timeout, failures int32) *corev1.Probe {
	agentPort := paramOr(params, "dashboard-agent-listen-port", fmt.Sprint(DefaultDashboardAgentPort))
	probe := &corev1.Probe{InitialDelaySeconds: delay, TimeoutSeconds: timeout, PeriodSeconds: 5, SuccessThreshold: 1, FailureThreshold: failures}
	if versionAtLeast(rc.Spec.RayVersion, 2, 53, 0) {
		probe.HTTPGet = &corev1.HTTPGetAction{Path: "/api/healthz", Port: intstr.Parse(agentPort)}
		return probe
	}
	cmd := fmt.Sprintf("wget --tries 1 -T 2 -q -O- http://localhost:%s/api/local_raylet_healthz | grep success", agentPort)
	if head {
		dashboard := paramOr(params, "dashboard-port", fmt.Sprint(constants.DefaultDashboardPort))
		cmd += fmt.Sprintf(" && wget --tries 1 -T 10 -q -O- http://localhost:%s/api/gcs_healthz | grep success", dashboard)
	}
	probe.Exec = &corev1.ExecAction{Command: []string{"bash", "-c", cmd}}
	return probe
}

func paramOr(params map[string]string, key, def string) string {
	if v, ok := params[key]; ok && v != "" {
		return v
	}
	return def
}

func setDefault(params map[string]string, key, value string) {
	if _, ok := params[key]; !ok {
		params[key] = value
	}
}

func isTrue(s string) bool { return strings.EqualFold(s, "true") }

// GCSPort is the GCS port workers dial: the head's `port` start param, else 6379.
func GCSPort(rc *rayv1.RayCluster) string {
	return paramOr(rc.Spec.HeadGroupSpec.RayStartParams, "port", DefaultHeadPort)
}

// HeadServiceFQDN is the head Service's in-cluster DNS name.
func HeadServiceFQDN(rc *rayv1.RayCluster, opts Options) string {
	return fmt.Sprintf("%s.%s.svc.%s", names.HeadServiceFor(rc), rc.Namespace, opts.clusterDomain())
}
