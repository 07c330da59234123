package rayjob

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/version"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/batchscheduler"
	"github.com/kray-project/kray/pkg/builder"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/dashboard"
	"github.com/kray-project/kray/pkg/validation"
)

// AnnotationSubmittedOnHead on a K8sJobMode submitter Job is the incarnation (HeadIncarnation) of the head its
// attempt submits to: once the head has another, Ray no longer holds what was submitted and the attempt failed.
const AnnotationSubmittedOnHead = "kray.io/submitted-on-head"

// minRayVersionForMetadata is the first Ray whose `ray job submit` takes --metadata-json.
var minRayVersionForMetadata = version.MustParseGeneric("2.6.0")

// OwnerReference is the controller reference every object created for job carries.
func OwnerReference(job *rayv1.RayJob) metav1.OwnerReference {
	return *metav1.NewControllerRef(job, rayv1.GroupVersion.WithKind("RayJob"))
}

// originLabels are the labels that tie an object to the RayJob it was created for.
func originLabels(job *rayv1.RayJob) map[string]string {
	return map[string]string{
		constants.LabelOriginatedFromCRName: job.Name,
		constants.LabelOriginatedFromCRD:    constants.OriginatedFromRayJob,
	}
}

// Cluster is the RayCluster named name that job runs on: the job's rayClusterSpec, its labels and
// annotations, the origin labels, and a controller reference to the job.
func Cluster(job *rayv1.RayJob, name string) *rayv1.RayCluster {
	labels := map[string]string{}
	for k, v := range job.Labels {
		labels[k] = v
	}
	for k, v := range originLabels(job) {
		labels[k] = v
	}
	mode := job.Spec.SubmissionMode
	if mode == "" {
		mode = rayv1.K8sJobMode
	}
	labels[constants.LabelJobSubmissionMode] = string(mode)
	var annotations map[string]string
	if len(job.Annotations) > 0 {
		annotations = map[string]string{}
		for k, v := range job.Annotations {
			annotations[k] = v
		}
	}
	rc := &rayv1.RayCluster{
		TypeMeta: metav1.TypeMeta{APIVersion: rayv1.GroupVersion.String(), Kind: "RayCluster"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            name,
			Namespace:       job.Namespace,
			Labels:          labels,
			Annotations:     annotations,
			OwnerReferences: []metav1.OwnerReference{OwnerReference(job)},
		},
	}
	if job.Spec.RayClusterSpec != nil {
		rc.Spec = *job.Spec.RayClusterSpec.DeepCopy()
	}
	if job.Spec.SubmissionMode == rayv1.SidecarMode {
		head := &rc.Spec.HeadGroupSpec.Template.Spec
		head.Containers = append(head.Containers, sidecarContainer(job, rc))
	}
	return rc
}

// WithSubmitter gives a K8sJobMode RayJob's cluster rc what its batch scheduler needs of the submitter pod,
// as KubeRay does: under YuniKorn, for a gang, the task groups of the cluster and of the submitter (unless
// the RayJob brings its own), which its pods and the submitter name, so YuniKorn reserves room for the
// submitter from the start; under Volcano, the submitter's resources, which the cluster's PodGroup reserves
// beside its own (the submitter is not counted as a member).
func WithSubmitter(job *rayv1.RayJob, rc *rayv1.RayCluster, scheduler string) {
	s := batchscheduler.Decide(rc, scheduler)
	if !s.Gang || !submitterJobMode(job) {
		return
	}
	tmpl := defaultSubmitterTemplate(rc)
	if job.Spec.SubmitterPodTemplate != nil {
		tmpl = *job.Spec.SubmitterPodTemplate
	}
	if rc.Annotations == nil {
		rc.Annotations = map[string]string{}
	}
	switch s.Scheduler {
	case batchscheduler.YuniKorn:
		if rc.Annotations[batchscheduler.AnnotationTaskGroups] == "" {
			groups := append(batchscheduler.TaskGroups(rc), batchscheduler.SubmitterTaskGroup(&tmpl))
			rc.Annotations[batchscheduler.AnnotationTaskGroups] = batchscheduler.TaskGroupsJSON(groups)
		}
	case batchscheduler.Volcano:
		rc.Annotations[constants.AnnotationSubmitterResources] = batchscheduler.ResourcesJSON(batchscheduler.PodResources(&tmpl.Spec))
	}
}

// sidecarContainer is the SidecarMode container of the head pod: KubeRay's ray-job-submitter, in the head's
// image with KubeRay's default submitter resources, that only follows the logs of the job kray submits (under
// status.jobId, over the Job API) and then waits. It never submits, so a head that Kruise replaces, or a Ray
// container restarted in place, cannot run the job again.
func sidecarContainer(job *rayv1.RayJob, rc *rayv1.RayCluster) corev1.Container {
	c := defaultSubmitterTemplate(rc).Spec.Containers[0]
	port, ok := builder.DashboardPort(rc)
	if !ok {
		port = constants.DefaultDashboardPort
	}
	address := fmt.Sprintf("http://127.0.0.1:%d", port)
	c.Command = []string{"/bin/bash", "-ce", "--"}
	c.Args = []string{SidecarScript(address, job.Status.JobId)}
	c.Env = []corev1.EnvVar{
		{Name: "PYTHONUNBUFFERED", Value: "1"},
		{Name: EnvRayDashboardAddress, Value: strings.TrimPrefix(address, "http://")},
		{Name: EnvRayJobSubmissionID, Value: job.Status.JobId},
	}
	builder.ClientAuthEnv(rc, &c)
	return c
}

// SidecarScript is the SidecarMode container's shell script: wait until the dashboard at address holds the
// job id, follow its logs to the end, then sleep, so the container neither submits nor ends.
func SidecarScript(address, id string) string {
	return strings.Join([]string{
		"until", "ray", "job", "status", "--address", address, id, ">/dev/null", "2>&1", ";",
		"do", "echo", strconv.Quote("Waiting for Ray job " + id + " at " + address + " ..."), ";", "sleep", "2", ";", "done", ";",
		"ray", "job", "logs", "--address", address, "--follow", id, "||", "true", ";",
		"exec", "sleep", "infinity",
	}, " ")
}

// HeadServiceName is the name of the Service that a RayJob keeps in front of the head of its current cluster.
func HeadServiceName(job *rayv1.RayJob) string { return job.Name + "-head-svc" }

// HeadService is the RayJob's own head Service: the ports and type of rc's head Service, selecting rc's
// head, named after the RayJob and owned by it, so its address stays the same across attempts. It carries
// rc's ray.io/cluster label, so kray's cache holds it and a running job checks it without a request.
func HeadService(job *rayv1.RayJob, rc *rayv1.RayCluster, opts builder.Options) *corev1.Service {
	svc := builder.HeadService(rc, opts)
	labels := originLabels(job)
	labels[constants.LabelNodeType] = constants.NodeTypeHead
	labels[constants.LabelIdentifier] = job.Name + "-" + constants.NodeTypeHead
	labels[constants.LabelCluster] = rc.Name
	svc.ObjectMeta = metav1.ObjectMeta{
		Name:            HeadServiceName(job),
		Namespace:       job.Namespace,
		Labels:          labels,
		Annotations:     svc.Annotations,
		OwnerReferences: []metav1.OwnerReference{OwnerReference(job)},
	}
	return svc
}

// SubmitRequest is the Job REST API submission of job under its status.jobId.
func SubmitRequest(job *rayv1.RayJob) (dashboard.SubmitRequest, error) {
	env, err := validation.RuntimeEnv(job.Spec.RuntimeEnvYAML)
	if err != nil {
		return dashboard.SubmitRequest{}, err
	}
	res, err := validation.EntrypointResources(job.Spec.EntrypointResources)
	if err != nil {
		return dashboard.SubmitRequest{}, err
	}
	return dashboard.SubmitRequest{
		Entrypoint:          job.Spec.Entrypoint,
		SubmissionID:        job.Status.JobId,
		RuntimeEnv:          env,
		Metadata:            job.Spec.Metadata,
		EntrypointNumCPUs:   job.Spec.EntrypointNumCpus,
		EntrypointNumGPUs:   job.Spec.EntrypointNumGpus,
		EntrypointResources: res,
	}, nil
}

// SubmitScript is the shell script of the K8sJobMode submitter: submit job under its status.jobId unless
// the dashboard at address (host:port) already holds that id, then follow the job's logs. A retried
// submitter pod therefore never submits twice.
func SubmitScript(job *rayv1.RayJob, address string) (string, error) {
	if !strings.HasPrefix(address, "http://") && !strings.HasPrefix(address, "https://") {
		address = "http://" + address
	}
	id := job.Status.JobId
	opts, err := submitOptions(job)
	if err != nil {
		return "", err
	}
	submit := append([]string{"ray", "job", "submit", "--address", address, "--no-wait"}, opts...)
	submit = append(submit, "--", strings.TrimSpace(job.Spec.Entrypoint))
	parts := []string{
		"if", "!", "ray", "job", "status", "--address", address, id, ">/dev/null", "2>&1", ";",
		"then",
	}
	parts = append(parts, submit...)
	parts = append(parts, ";", "fi", ";", "ray", "job", "logs", "--address", address, "--follow", id)
	return strings.Join(parts, " "), nil
}

// submitOptions are the `ray job submit` options that carry job's settings, each quoted for the shell.
func submitOptions(job *rayv1.RayJob) ([]string, error) {
	s := &job.Spec
	var opts []string
	if env, err := validation.RuntimeEnv(s.RuntimeEnvYAML); err != nil {
		return nil, err
	} else if len(env) > 0 {
		b, err := json.Marshal(env)
		if err != nil {
			return nil, fmt.Errorf("encode runtimeEnvYAML as JSON: %w", err)
		}
		opts = append(opts, "--runtime-env-json", strconv.Quote(string(b)))
	}
	if len(s.Metadata) > 0 && s.RayClusterSpec != nil {
		if err := metadataSupported(s.RayClusterSpec.RayVersion); err != nil {
			return nil, err
		}
		b, err := json.Marshal(s.Metadata)
		if err != nil {
			return nil, fmt.Errorf("encode metadata as JSON: %w", err)
		}
		opts = append(opts, "--metadata-json", strconv.Quote(string(b)))
	}
	if job.Status.JobId != "" {
		opts = append(opts, "--submission-id", job.Status.JobId)
	}
	if s.EntrypointNumCpus > 0 {
		opts = append(opts, "--entrypoint-num-cpus", fmt.Sprintf("%f", s.EntrypointNumCpus))
	}
	if s.EntrypointNumGpus > 0 {
		opts = append(opts, "--entrypoint-num-gpus", fmt.Sprintf("%f", s.EntrypointNumGpus))
	}
	if s.EntrypointResources != "" {
		opts = append(opts, "--entrypoint-resources", strconv.Quote(s.EntrypointResources))
	}
	return opts, nil
}

// metadataSupported refuses metadata for a Ray older than 2.6.0; an unset rayVersion is taken as recent.
func metadataSupported(rayVersion string) error {
	if rayVersion == "" {
		return nil
	}
	v, err := version.ParseGeneric(rayVersion)
	if err != nil {
		return fmt.Errorf("failed to parse Ray version: %s: %w", rayVersion, err)
	}
	if v.LessThan(minRayVersionForMetadata) {
		return errors.New("the Ray version must be at least 2.6.0 to use the metadata field")
	}
	return nil
}

// HeadIncarnation names one run of rc's Ray head: its pod's UID and its Ray container's restart count. Ray
// without GCS fault tolerance keeps its jobs only while that run lasts: a replaced head pod (a new UID) or a
// Ray container restarted in place (a higher count) starts with no job.
func HeadIncarnation(rc *rayv1.RayCluster, head *corev1.Pod) string {
	var restarts int32
	if cs := rc.Spec.HeadGroupSpec.Template.Spec.Containers; len(cs) > constants.RayContainerIndex {
		for _, st := range head.Status.ContainerStatuses {
			if st.Name == cs[constants.RayContainerIndex].Name {
				restarts = st.RestartCount
			}
		}
	}
	return fmt.Sprintf("%s/%d", head.UID, restarts)
}

// SubmitterJob is the K8sJobMode batch/v1 Job that submits job to rc, whose dashboard is at address, while
// rc's head is in its incarnation head (HeadIncarnation). It is named after the RayJob, carries rc's
// ray.io/cluster label (the Job only, not its pods) so kray's cache holds it, and, when rc uses token auth,
// the cluster's credentials.
func SubmitterJob(job *rayv1.RayJob, rc *rayv1.RayCluster, address, head string, opts builder.Options) (*batchv1.Job, error) {
	script, err := SubmitScript(job, address)
	if err != nil {
		return nil, err
	}
	var tmpl corev1.PodTemplateSpec
	if job.Spec.SubmitterPodTemplate != nil {
		tmpl = *job.Spec.SubmitterPodTemplate.DeepCopy()
	} else {
		tmpl = defaultSubmitterTemplate(rc)
	}
	if len(tmpl.Spec.Containers) == 0 {
		return nil, errors.New("the submitter pod template has no container")
	}
	c := &tmpl.Spec.Containers[0]
	if len(c.Command) == 0 {
		shell := "-ce"
		if opts.LoginShell {
			shell = "-cel"
		}
		c.Command = []string{"/bin/bash", shell, "--"}
		c.Args = []string{script}
	}
	c.Env = append(c.Env,
		corev1.EnvVar{Name: "PYTHONUNBUFFERED", Value: "1"},
		corev1.EnvVar{Name: EnvRayDashboardAddress, Value: address},
		corev1.EnvVar{Name: EnvRayJobSubmissionID, Value: job.Status.JobId},
	)
	builder.ClientAuth(rc, &tmpl)
	// The submitter pod carries its RayJob's origin labels, which the head's NetworkPolicy lets in.
	if tmpl.Labels == nil {
		tmpl.Labels = map[string]string{}
	}
	for k, v := range originLabels(job) {
		tmpl.Labels[k] = v
	}
	tmpl.Labels[constants.LabelCreatedBy] = constants.CreatedByValue
	// Under a batch scheduler the submitter goes to it too, in its cluster's group as KubeRay puts it there
	// (batchscheduler.Scheduling.Submitter).
	batchscheduler.Decide(rc, opts.Scheduling.Scheduler).Submitter().ApplyPod(&tmpl, rc, batchscheduler.GroupSubmitter)
	if tmpl.Spec.RestartPolicy == "" {
		tmpl.Spec.RestartPolicy = corev1.RestartPolicyNever
	}
	backoff := int32(DefaultSubmitterBackoffLimit)
	if c := job.Spec.SubmitterConfig; c != nil && c.BackoffLimit != nil {
		backoff = *c.BackoffLimit
	}
	labels := originLabels(job)
	labels[constants.LabelCreatedBy] = constants.CreatedByValue
	labels[constants.LabelCluster] = rc.Name
	return &batchv1.Job{
		TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            job.Name,
			Namespace:       job.Namespace,
			Labels:          labels,
			Annotations:     map[string]string{AnnotationSubmittedOnHead: head},
			OwnerReferences: []metav1.OwnerReference{OwnerReference(job)},
		},
		Spec: batchv1.JobSpec{BackoffLimit: &backoff, Template: tmpl},
	}, nil
}

// SubmissionID is the Ray submission id a submitter Job submits (its first container's last
// RAY_JOB_SUBMISSION_ID, the one the container sees), "" when it carries none.
func SubmissionID(sub *batchv1.Job) string {
	id := ""
	if cs := sub.Spec.Template.Spec.Containers; len(cs) > 0 {
		for _, e := range cs[0].Env {
			if e.Name == EnvRayJobSubmissionID {
				id = e.Value
			}
		}
	}
	return id
}

// defaultSubmitterTemplate runs the submitter in the head's image with KubeRay's default resources.
func defaultSubmitterTemplate(rc *rayv1.RayCluster) corev1.PodTemplateSpec {
	image := ""
	if cs := rc.Spec.HeadGroupSpec.Template.Spec.Containers; len(cs) > 0 {
		image = cs[constants.RayContainerIndex].Image
	}
	return corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever,
		Containers: []corev1.Container{{
			Name:  SubmitterContainerName,
			Image: image,
			Resources: corev1.ResourceRequirements{
				Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")},
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("200Mi")},
			},
		}},
	}}
}
