package validation

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/batchscheduler"
	"github.com/kray-project/kray/pkg/constants"
)

// MaxRayJobNameLength leaves room for the "-xxxxx" suffix of the RayCluster a RayJob creates.
const MaxRayJobNameLength = MaxClusterNameLength - 6

// ErrDeletionPolicyGate refuses a deletionStrategy while the RayJobDeletionPolicy feature gate is off, in
// KubeRay's words.
var ErrDeletionPolicyGate = errors.New("RayJobDeletionPolicy feature gate must be enabled to use DeletionStrategy")

// RayJobOptions are the operator settings that change what a RayJob spec may hold.
type RayJobOptions struct {
	// DeletionPolicy is the RayJobDeletionPolicy feature gate.
	DeletionPolicy bool
	// Cluster are the settings the cluster spec is checked with.
	Cluster ClusterOptions
}

// RayJobMetadata checks the RayJob's name; its error is reported with the InvalidRayJobMetadata reason.
func RayJobMetadata(job *rayv1.RayJob) error {
	if err := nameRules("RayJob", job.Name, MaxRayJobNameLength); err != nil {
		return fmt.Errorf("The RayJob metadata is invalid: %w", err)
	}
	return nil
}

// RayJobSpec checks the spec in KubeRay's order and wording, then what kray does not serve; its error is
// reported with the InvalidRayJobSpec reason.
func RayJobSpec(job *rayv1.RayJob, opts RayJobOptions) error {
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
	if err := deletionStrategy(job, opts); err != nil {
		return err
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
	if opts.Cluster.BatchScheduler == batchscheduler.KAI && (s.SubmissionMode == rayv1.K8sJobMode || s.SubmissionMode == "") {
		return errors.New("KAI-Scheduler does not support RayJob with K8sJobMode: the submitter pod is created after RayCluster is ready, preventing proper gang scheduling")
	}
	if s.SubmissionMode == rayv1.InteractiveMode && s.BackoffLimit != nil && *s.BackoffLimit > 0 {
		return errors.New("The RayJob spec is invalid: BackoffLimit is incompatible with InteractiveMode")
	}
	if s.SubmissionMode == rayv1.SidecarMode {
		if s.SubmitterPodTemplate != nil {
			return errors.New("Currently, SidecarMode doesn't support SubmitterPodTemplate")
		}
		if s.SubmitterConfig != nil {
			return errors.New("Currently, SidecarMode doesn't support SubmitterConfig")
		}
		if p := s.RayClusterSpec.HeadGroupSpec.Template.Spec.RestartPolicy; p != "" && p != corev1.RestartPolicyNever {
			return errors.New("restartPolicy for head Pod should be Never or unset when using SidecarMode")
		}
	}
	if s.RayClusterSpec != nil {
		if err := clusterUpgradeStrategy(s.RayClusterSpec, "RayJob"); err != nil {
			return err
		}
		rc := &rayv1.RayCluster{ObjectMeta: job.ObjectMeta, Spec: *s.RayClusterSpec}
		if err := SpecWith(rc, opts.Cluster); err != nil {
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
	if d := s.PreRunningDeadlineSeconds; d != nil && *d <= 0 {
		return errors.New("The RayJob spec is invalid: preRunningDeadlineSeconds must be a positive integer")
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

// RuntimeEnv parses runtimeEnvYAML into the map the Ray job API takes; empty is no runtime environment. Its
// error does not quote the text (KubeRay's does): it goes into a status and an event, and env_vars may hold
// secrets.
func RuntimeEnv(runtimeEnvYAML string) (map[string]any, error) {
	var env map[string]any
	if err := yaml.Unmarshal([]byte(runtimeEnvYAML), &env); err != nil {
		return nil, fmt.Errorf("failed to unmarshal RuntimeEnvYAML: %w", err)
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

// deletionStrategy checks spec.deletionStrategy as KubeRay does: the gate, one of its two styles, and each
// style's rules.
func deletionStrategy(job *rayv1.RayJob, opts RayJobOptions) error {
	ds := job.Spec.DeletionStrategy
	if ds == nil {
		return nil
	}
	if !opts.DeletionPolicy {
		return ErrDeletionPolicyGate
	}
	legacy := ds.OnSuccess != nil || ds.OnFailure != nil
	rules := len(ds.DeletionRules) > 0
	switch {
	case rules && job.Spec.ShutdownAfterJobFinishes:
		return errors.New("The RayJob spec is invalid: spec.shutdownAfterJobFinishes and spec.deletionStrategy.deletionRules are mutually exclusive")
	case rules && legacy:
		return errors.New("The RayJob spec is invalid: Cannot use both legacy onSuccess/onFailure fields and deletionRules simultaneously")
	case legacy:
		return legacyDeletionPolicies(job)
	case rules:
		return deletionRules(job)
	}
	return errors.New("The RayJob spec is invalid: DeletionStrategy requires either BOTH onSuccess and onFailure, OR the deletionRules field (cannot be empty)")
}

// autoscaling reports whether the job's cluster spec turns the autoscaler on.
func autoscaling(job *rayv1.RayJob) bool {
	return job.Spec.RayClusterSpec != nil && job.Spec.RayClusterSpec.EnableInTreeAutoscaling != nil && *job.Spec.RayClusterSpec.EnableInTreeAutoscaling
}

// touchesCluster reports whether policy deletes some of the RayJob's cluster.
func touchesCluster(policy rayv1.DeletionPolicyType) bool {
	return policy == rayv1.DeleteCluster || policy == rayv1.DeleteWorkers
}

// legacyDeletionPolicies checks the deprecated onSuccess/onFailure pair.
func legacyDeletionPolicies(job *rayv1.RayJob) error {
	ds := job.Spec.DeletionStrategy
	if ds.OnSuccess == nil || ds.OnFailure == nil {
		return errors.New("both DeletionStrategy.OnSuccess and DeletionStrategy.OnFailure must be set when using the legacy deletion policy fields of DeletionStrategy")
	}
	if ds.OnSuccess.Policy == nil {
		return errors.New("the DeletionPolicyType field of DeletionStrategy.OnSuccess cannot be unset when DeletionStrategy is enabled")
	}
	if ds.OnFailure.Policy == nil {
		return errors.New("the DeletionPolicyType field of DeletionStrategy.OnFailure cannot be unset when DeletionStrategy is enabled")
	}
	onSuccess, onFailure := *ds.OnSuccess.Policy, *ds.OnFailure.Policy
	if len(job.Spec.ClusterSelector) != 0 {
		if touchesCluster(onSuccess) {
			return fmt.Errorf("the ClusterSelector mode doesn't support DeletionStrategy=%s on success", onSuccess)
		}
		if touchesCluster(onFailure) {
			return fmt.Errorf("the ClusterSelector mode doesn't support DeletionStrategy=%s on failure", onFailure)
		}
	}
	if (onSuccess == rayv1.DeleteWorkers || onFailure == rayv1.DeleteWorkers) && autoscaling(job) {
		return errors.New("DeletionStrategy=DeleteWorkers currently does not support RayCluster with autoscaling enabled")
	}
	if job.Spec.ShutdownAfterJobFinishes && (onSuccess == rayv1.DeleteNone || onFailure == rayv1.DeleteNone) {
		return errors.New("The RayJob spec is invalid: shutdownAfterJobFinshes is set to 'true' while deletion policy is 'DeleteNone'")
	}
	return nil
}

// deletionOrder is the order in which one job status's rules must fire: their TTLs may not decrease along it.
var deletionOrder = []rayv1.DeletionPolicyType{rayv1.DeleteWorkers, rayv1.DeleteCluster, rayv1.DeleteSelf}

// deletionRules checks every rule and reports all problems at once. Rules are grouped by the status they
// wait for: a Ray job status ("JobStatus") or, in KubeRay v1.7, a deployment status ("JobDeploymentStatus").
func deletionRules(job *rayv1.RayJob) error {
	type key struct{ kind, status string }
	var errs []error
	ttls := map[key]map[rayv1.DeletionPolicyType]int32{}
	var statuses []key
	for i, rule := range job.Spec.DeletionStrategy.DeletionRules {
		c := rule.Condition
		switch {
		case c.JobStatus != nil && c.JobDeploymentStatus != nil:
			errs = append(errs, fmt.Errorf("deletionRules[%d]: cannot set both JobStatus and JobDeploymentStatus at the same time", i))
			continue
		case c.JobStatus == nil && c.JobDeploymentStatus == nil:
			errs = append(errs, fmt.Errorf("deletionRules[%d]: exactly one of JobStatus and JobDeploymentStatus must be set", i))
			continue
		case rule.Condition.TTLSeconds < 0:
			errs = append(errs, fmt.Errorf("deletionRules[%d]: TTLSeconds must be non-negative", i))
			continue
		case len(job.Spec.ClusterSelector) != 0 && touchesCluster(rule.Policy):
			errs = append(errs, fmt.Errorf("deletionRules[%d]: DeletionPolicyType '%s' not supported when ClusterSelector is set", i, rule.Policy))
			continue
		case autoscaling(job) && rule.Policy == rayv1.DeleteWorkers:
			errs = append(errs, fmt.Errorf("deletionRules[%d]: DeletionPolicyType 'DeleteWorkers' not supported with autoscaling enabled", i))
			continue
		}
		k := key{"JobDeploymentStatus", ""}
		if c.JobStatus != nil {
			k = key{"JobStatus", string(*c.JobStatus)}
		} else {
			k.status = string(*c.JobDeploymentStatus)
		}
		byPolicy, ok := ttls[k]
		if !ok {
			byPolicy = map[rayv1.DeletionPolicyType]int32{}
			ttls[k] = byPolicy
			statuses = append(statuses, k)
		}
		if _, dup := byPolicy[rule.Policy]; dup {
			errs = append(errs, fmt.Errorf("deletionRules[%d]: duplicate rule for DeletionPolicyType '%s' and %s '%s'", i, rule.Policy, k.kind, k.status))
			continue
		}
		byPolicy[rule.Policy] = rule.Condition.TTLSeconds
	}
	for _, status := range statuses {
		var prev rayv1.DeletionPolicyType
		for _, policy := range deletionOrder {
			ttl, ok := ttls[status][policy]
			if !ok {
				continue
			}
			if prev != "" && ttl < ttls[status][prev] {
				errs = append(errs, fmt.Errorf("for %s '%s': %s TTL (%d) must be >= %s TTL (%d)", status.kind, status.status, policy, ttl, prev, ttls[status][prev]))
			}
			prev = policy
		}
	}
	return errors.Join(errs...)
}

// clusterUpgradeStrategy refuses an upgradeStrategy type in the cluster spec of a RayJob or RayService, in
// KubeRay's words: the cluster it creates is upgraded by its creator, never by itself.
func clusterUpgradeStrategy(spec *rayv1.RayClusterSpec, creator string) error {
	if u := spec.UpgradeStrategy; u != nil && u.Type != nil {
		return fmt.Errorf("upgradeStrategy cannot be set when RayCluster is created by %s", creator)
	}
	return nil
}
