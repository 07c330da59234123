package validation

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/constants"
)

// MaxRayJobNameLength leaves room for the "-xxxxx" suffix of the RayCluster a RayJob creates.
const MaxRayJobNameLength = MaxClusterNameLength - 6

// ErrSidecarMode and ErrDeletionStrategy refuse the RayJob features that kray does not serve yet.
var (
	ErrSidecarMode = errors.New("SidecarMode is not supported by kray: its head pod runs under a StatefulSet, " +
		"which keeps restartPolicy Always, so a finished submitter container would submit again; use K8sJobMode or HTTPMode")
	ErrDeletionStrategy = errors.New("deletionStrategy is not supported by kray yet (KubeRay serves it behind its alpha " +
		"RayJobDeletionPolicy feature gate, off by default); use shutdownAfterJobFinishes and ttlSecondsAfterFinished")
)

// RayJobMetadata checks the RayJob's name; its error is reported with the InvalidRayJobMetadata reason.
func RayJobMetadata(job *rayv1.RayJob) error {
	if len(job.Name) > MaxRayJobNameLength {
		return fmt.Errorf("The RayJob metadata is invalid: RayJob name should be no more than %d characters", MaxRayJobNameLength)
	}
	if errs := utilvalidation.IsDNS1035Label(job.Name); len(errs) > 0 {
		return fmt.Errorf("The RayJob metadata is invalid: RayJob name should be a valid DNS1035 label: %v", errs)
	}
	return nil
}

// RayJobSpec checks the spec in KubeRay's order and wording, then what kray does not serve; its error is
// reported with the InvalidRayJobSpec reason.
func RayJobSpec(job *rayv1.RayJob) error {
	s := &job.Spec
	if s.Suspend && !s.ShutdownAfterJobFinishes {
		return errors.New("The RayJob spec is invalid: a RayJob with shutdownAfterJobFinishes set to false is not allowed to be suspended")
	}
	if s.TTLSecondsAfterFinished < 0 {
		return errors.New("The RayJob spec is invalid: TTLSecondsAfterFinished must be a non-negative integer")
	}
	if !s.ShutdownAfterJobFinishes && s.TTLSecondsAfterFinished > 0 {
		return errors.New("The RayJob spec is invalid: a RayJob with shutdownAfterJobFinishes set to false cannot have TTLSecondsAfterFinished")
	}
	if s.DeletionStrategy != nil {
		return ErrDeletionStrategy
	}
	selector := len(s.ClusterSelector) != 0
	if s.Suspend && selector {
		return errors.New("The RayJob spec is invalid: the ClusterSelector mode doesn't support the suspend operation")
	}
	if s.RayClusterSpec == nil && !selector {
		return errors.New("The RayJob spec is invalid: one of RayClusterSpec or ClusterSelector must be set")
	}
	if selector {
		if s.ClusterSelector[constants.LabelCluster] == "" {
			return errors.New("cluster name in ClusterSelector should not be empty")
		}
		if s.SubmissionMode == rayv1.SidecarMode {
			return errors.New("ClusterSelector is not supported in SidecarMode")
		}
	}
	if s.SubmissionMode == rayv1.InteractiveMode && s.BackoffLimit != nil && *s.BackoffLimit > 0 {
		return errors.New("The RayJob spec is invalid: BackoffLimit is incompatible with InteractiveMode")
	}
	if s.SubmissionMode == rayv1.SidecarMode {
		return ErrSidecarMode
	}
	if s.RayClusterSpec != nil {
		rc := &rayv1.RayCluster{ObjectMeta: job.ObjectMeta, Spec: *s.RayClusterSpec}
		if err := Spec(rc); err != nil {
			return fmt.Errorf("The RayJob spec is invalid: %w", err)
		}
	}
	if _, err := RuntimeEnv(s.RuntimeEnvYAML); err != nil {
		return err
	}
	if _, err := EntrypointResources(s.EntrypointResources); err != nil {
		return err
	}
	if s.ActiveDeadlineSeconds != nil && *s.ActiveDeadlineSeconds <= 0 {
		return errors.New("The RayJob spec is invalid: activeDeadlineSeconds must be a positive integer")
	}
	if s.BackoffLimit != nil && *s.BackoffLimit < 0 {
		return errors.New("The RayJob spec is invalid: backoffLimit must be a positive integer")
	}
	if s.SubmitterConfig != nil && s.SubmitterConfig.BackoffLimit != nil && *s.SubmitterConfig.BackoffLimit < 0 {
		return errors.New("The RayJob spec is invalid: submitterConfig.backoffLimit must be a non-negative integer")
	}
	if t := s.SubmitterPodTemplate; t != nil && len(t.Spec.Containers) == 0 {
		return errors.New("The RayJob spec is invalid: submitterPodTemplate should have at least one container")
	}
	if t := s.SubmitterPodTemplate; t != nil && t.Spec.RestartPolicy == corev1.RestartPolicyAlways {
		return errors.New("The RayJob spec is invalid: submitterPodTemplate.spec.restartPolicy must be Never or OnFailure, as a Job's pods")
	}
	return nil
}

// RayJobStatus checks the status against the spec; its error is reported with the InvalidRayJobStatus reason.
func RayJobStatus(job *rayv1.RayJob) error {
	if job.Status.JobDeploymentStatus == rayv1.JobDeploymentStatusWaiting && job.Spec.SubmissionMode != rayv1.InteractiveMode {
		return errors.New("The RayJob status is invalid: JobDeploymentStatus cannot be `Waiting` when SubmissionMode is not InteractiveMode")
	}
	return nil
}

// RuntimeEnv parses runtimeEnvYAML into the map the Ray job API takes; empty is no runtime environment.
func RuntimeEnv(runtimeEnvYAML string) (map[string]any, error) {
	var env map[string]any
	if err := yaml.Unmarshal([]byte(runtimeEnvYAML), &env); err != nil {
		return nil, fmt.Errorf("failed to unmarshal RuntimeEnvYAML: %v: %w", runtimeEnvYAML, err)
	}
	return env, nil
}

// EntrypointResources parses entrypointResources, a JSON object of resource quantities; empty is none.
func EntrypointResources(s string) (map[string]float32, error) {
	if s == "" {
		return nil, nil
	}
	var res map[string]float32
	if err := yaml.Unmarshal([]byte(s), &res); err != nil {
		return nil, fmt.Errorf("The RayJob spec is invalid: entrypointResources must be a JSON object of resource quantities: %w", err)
	}
	return res, nil
}
