package validation

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/constants"
)

func rayJob(mutate ...func(*rayv1.RayJob)) *rayv1.RayJob {
	job := &rayv1.RayJob{
		ObjectMeta: metav1.ObjectMeta{Name: "job", Namespace: "ns"},
		Spec:       rayv1.RayJobSpec{Entrypoint: "python x.py", SubmissionMode: rayv1.K8sJobMode, RayClusterSpec: &cluster().Spec},
	}
	for _, m := range mutate {
		m(job)
	}
	return job
}

func TestRayJobMetadata(t *testing.T) {
	if err := RayJobMetadata(rayJob(func(j *rayv1.RayJob) { j.Name = strings.Repeat("a", 47) })); err != nil {
		t.Errorf("47 characters: %v", err)
	}
	err := RayJobMetadata(rayJob(func(j *rayv1.RayJob) { j.Name = strings.Repeat("a", 48) }))
	if err == nil || err.Error() != "The RayJob metadata is invalid: RayJob name should be no more than 47 characters" {
		t.Errorf("48 characters: %v", err)
	}
	if err := RayJobMetadata(rayJob(func(j *rayv1.RayJob) { j.Name = "1job" })); err == nil ||
		!strings.HasPrefix(err.Error(), "The RayJob metadata is invalid: RayJob name should be a valid DNS1035 label") {
		t.Errorf("1job: %v", err)
	}
}

func TestRayJobSpec(t *testing.T) {
	selector := func(name string) func(*rayv1.RayJob) {
		return func(j *rayv1.RayJob) {
			j.Spec.RayClusterSpec = nil
			j.Spec.ClusterSelector = map[string]string{constants.LabelCluster: name}
		}
	}
	tests := []struct {
		name string
		edit func(*rayv1.RayJob)
		want string // "" is valid
	}{
		{"valid", func(*rayv1.RayJob) {}, ""},
		{"suspend without shutdown", func(j *rayv1.RayJob) { j.Spec.Suspend = true },
			"The RayJob spec is invalid: a RayJob with shutdownAfterJobFinishes set to false is not allowed to be suspended"},
		{"suspend with shutdown", func(j *rayv1.RayJob) { j.Spec.Suspend = true; j.Spec.ShutdownAfterJobFinishes = true }, ""},
		{"a cluster upgradeStrategy", func(j *rayv1.RayJob) {
			j.Spec.RayClusterSpec.UpgradeStrategy = &rayv1.RayClusterUpgradeStrategy{Type: ptr.To(rayv1.RayClusterRecreate)}
		}, "upgradeStrategy cannot be set when RayCluster is created by RayJob"},
		{"negative TTL", func(j *rayv1.RayJob) { j.Spec.TTLSecondsAfterFinished = -1 },
			"The RayJob spec is invalid: TTLSecondsAfterFinished must be a non-negative integer"},
		{"TTL without shutdown", func(j *rayv1.RayJob) { j.Spec.TTLSecondsAfterFinished = 5 },
			"The RayJob spec is invalid: a RayJob with shutdownAfterJobFinishes set to false cannot have TTLSecondsAfterFinished"},
		{"deletion strategy, neither style", func(j *rayv1.RayJob) { j.Spec.DeletionStrategy = &rayv1.DeletionStrategy{} },
			"The RayJob spec is invalid: DeletionStrategy requires either BOTH onSuccess and onFailure, OR the deletionRules field (cannot be empty)"},
		{"legacy, one policy", func(j *rayv1.RayJob) {
			j.Spec.DeletionStrategy = &rayv1.DeletionStrategy{OnSuccess: policy(rayv1.DeleteCluster)}
		}, "both DeletionStrategy.OnSuccess and DeletionStrategy.OnFailure must be set when using the legacy deletion policy fields of DeletionStrategy"},
		{"legacy, unset policy", func(j *rayv1.RayJob) {
			j.Spec.DeletionStrategy = &rayv1.DeletionStrategy{OnSuccess: &rayv1.DeletionPolicy{}, OnFailure: policy(rayv1.DeleteNone)}
		}, "the DeletionPolicyType field of DeletionStrategy.OnSuccess cannot be unset when DeletionStrategy is enabled"},
		{"legacy with shutdown and DeleteNone", func(j *rayv1.RayJob) {
			j.Spec.ShutdownAfterJobFinishes = true
			j.Spec.DeletionStrategy = &rayv1.DeletionStrategy{OnSuccess: policy(rayv1.DeleteCluster), OnFailure: policy(rayv1.DeleteNone)}
		}, "The RayJob spec is invalid: shutdownAfterJobFinshes is set to 'true' while deletion policy is 'DeleteNone'"},
		{"legacy on a selected cluster", func(j *rayv1.RayJob) {
			selector("c")(j)
			j.Spec.DeletionStrategy = &rayv1.DeletionStrategy{OnSuccess: policy(rayv1.DeleteSelf), OnFailure: policy(rayv1.DeleteWorkers)}
		}, "the ClusterSelector mode doesn't support DeletionStrategy=DeleteWorkers on failure"},
		{"legacy", func(j *rayv1.RayJob) {
			j.Spec.DeletionStrategy = &rayv1.DeletionStrategy{OnSuccess: policy(rayv1.DeleteCluster), OnFailure: policy(rayv1.DeleteNone)}
		}, ""},
		{"rules with shutdown", func(j *rayv1.RayJob) {
			j.Spec.ShutdownAfterJobFinishes = true
			j.Spec.DeletionStrategy = &rayv1.DeletionStrategy{DeletionRules: []rayv1.DeletionRule{rule(rayv1.DeleteCluster, rayv1.JobStatusSucceeded, 0)}}
		}, "The RayJob spec is invalid: spec.shutdownAfterJobFinishes and spec.deletionStrategy.deletionRules are mutually exclusive"},
		{"rules and legacy", func(j *rayv1.RayJob) {
			j.Spec.DeletionStrategy = &rayv1.DeletionStrategy{OnSuccess: policy(rayv1.DeleteCluster),
				DeletionRules: []rayv1.DeletionRule{rule(rayv1.DeleteCluster, rayv1.JobStatusSucceeded, 0)}}
		}, "The RayJob spec is invalid: Cannot use both legacy onSuccess/onFailure fields and deletionRules simultaneously"},
		{"rules: every problem at once", func(j *rayv1.RayJob) {
			j.Spec.RayClusterSpec.EnableInTreeAutoscaling = ptr.To(true)
			j.Spec.DeletionStrategy = &rayv1.DeletionStrategy{DeletionRules: []rayv1.DeletionRule{
				rule(rayv1.DeleteCluster, rayv1.JobStatusSucceeded, 60),
				rule(rayv1.DeleteSelf, rayv1.JobStatusSucceeded, 30),
				rule(rayv1.DeleteCluster, rayv1.JobStatusSucceeded, 90),
				rule(rayv1.DeleteWorkers, rayv1.JobStatusFailed, 0),
				rule(rayv1.DeleteNone, rayv1.JobStatusFailed, -1),
			}}
		}, "deletionRules[2]: duplicate rule for DeletionPolicyType 'DeleteCluster' and JobStatus 'SUCCEEDED'\n" +
			"deletionRules[3]: DeletionPolicyType 'DeleteWorkers' not supported with autoscaling enabled\n" +
			"deletionRules[4]: TTLSeconds must be non-negative\n" +
			"for JobStatus 'SUCCEEDED': DeleteSelf TTL (30) must be >= DeleteCluster TTL (60)"},
		{"rules on the deployment status (KubeRay v1.7), every problem at once", func(j *rayv1.RayJob) {
			failed := rayv1.JobDeploymentStatusFailed
			both := rule(rayv1.DeleteCluster, rayv1.JobStatusFailed, 0)
			both.Condition.JobDeploymentStatus = &failed
			neither := rule(rayv1.DeleteCluster, rayv1.JobStatusFailed, 0)
			neither.Condition.JobStatus = nil
			onFailed := func(p rayv1.DeletionPolicyType, ttl int32) rayv1.DeletionRule {
				return rayv1.DeletionRule{Policy: p, Condition: rayv1.DeletionCondition{JobDeploymentStatus: &failed, TTLSeconds: ttl}}
			}
			j.Spec.DeletionStrategy = &rayv1.DeletionStrategy{DeletionRules: []rayv1.DeletionRule{
				both, neither, onFailed(rayv1.DeleteCluster, 60), onFailed(rayv1.DeleteCluster, 70), onFailed(rayv1.DeleteWorkers, 90),
				rule(rayv1.DeleteCluster, rayv1.JobStatusFailed, 10),
			}}
		}, "deletionRules[0]: cannot set both JobStatus and JobDeploymentStatus at the same time\n" +
			"deletionRules[1]: exactly one of JobStatus and JobDeploymentStatus must be set\n" +
			"deletionRules[3]: duplicate rule for DeletionPolicyType 'DeleteCluster' and JobDeploymentStatus 'Failed'\n" +
			"for JobDeploymentStatus 'Failed': DeleteCluster TTL (60) must be >= DeleteWorkers TTL (90)"},
		{"KubeRay's rules sample", func(j *rayv1.RayJob) {
			var rules []rayv1.DeletionRule
			for _, s := range []rayv1.JobStatus{rayv1.JobStatusFailed, rayv1.JobStatusSucceeded} {
				rules = append(rules, rule(rayv1.DeleteWorkers, s, 30), rule(rayv1.DeleteCluster, s, 60), rule(rayv1.DeleteSelf, s, 90))
			}
			j.Spec.DeletionStrategy = &rayv1.DeletionStrategy{DeletionRules: rules}
		}, ""},
		{"suspend with selector", func(j *rayv1.RayJob) {
			selector("c")(j)
			j.Spec.Suspend = true
			j.Spec.ShutdownAfterJobFinishes = true
		}, "The RayJob spec is invalid: the ClusterSelector mode doesn't support the suspend operation"},
		{"neither spec nor selector", func(j *rayv1.RayJob) { j.Spec.RayClusterSpec = nil },
			"The RayJob spec is invalid: one of RayClusterSpec or ClusterSelector must be set"},
		{"selector without a cluster name", func(j *rayv1.RayJob) {
			j.Spec.RayClusterSpec = nil
			j.Spec.ClusterSelector = map[string]string{"team": "a"}
		}, "cluster name in ClusterSelector should not be empty"},
		{"selector", selector("c"), ""},
		{"interactive with retries", func(j *rayv1.RayJob) {
			j.Spec.SubmissionMode = rayv1.InteractiveMode
			j.Spec.BackoffLimit = ptr.To[int32](1)
		}, "The RayJob spec is invalid: BackoffLimit is incompatible with InteractiveMode"},
		{"sidecar", func(j *rayv1.RayJob) { j.Spec.SubmissionMode = rayv1.SidecarMode }, ""},
		{"sidecar with a head restartPolicy Never", func(j *rayv1.RayJob) {
			j.Spec.SubmissionMode = rayv1.SidecarMode
			j.Spec.RayClusterSpec.HeadGroupSpec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever
		}, ""},
		{"sidecar with a submitter template", func(j *rayv1.RayJob) {
			j.Spec.SubmissionMode = rayv1.SidecarMode
			j.Spec.SubmitterPodTemplate = &corev1.PodTemplateSpec{}
		}, "Currently, SidecarMode doesn't support SubmitterPodTemplate"},
		{"sidecar with submitterConfig", func(j *rayv1.RayJob) {
			j.Spec.SubmissionMode = rayv1.SidecarMode
			j.Spec.SubmitterConfig = &rayv1.SubmitterConfig{}
		}, "Currently, SidecarMode doesn't support SubmitterConfig"},
		{"sidecar with a head restartPolicy Always", func(j *rayv1.RayJob) {
			j.Spec.SubmissionMode = rayv1.SidecarMode
			j.Spec.RayClusterSpec.HeadGroupSpec.Template.Spec.RestartPolicy = corev1.RestartPolicyAlways
		}, "restartPolicy for head Pod should be Never or unset when using SidecarMode"},
		{"sidecar on a selected cluster", func(j *rayv1.RayJob) {
			j.Spec.SubmissionMode = rayv1.SidecarMode
			j.Spec.RayClusterSpec = nil
			j.Spec.ClusterSelector = map[string]string{constants.LabelCluster: "c"}
		}, "ClusterSelector is not supported in SidecarMode"},
		{"invalid cluster spec", func(j *rayv1.RayJob) { j.Spec.RayClusterSpec.HeadGroupSpec.Template.Spec.Containers = nil },
			"The RayJob spec is invalid: headGroupSpec should have at least one container"},
		{"runtime env not YAML", func(j *rayv1.RayJob) { j.Spec.RuntimeEnvYAML = "pip: [" },
			"failed to unmarshal RuntimeEnvYAML: error converting YAML to JSON: yaml: line 1: did not find expected node content"},
		// The text goes into a status and an event, and env_vars may hold secrets: it is not quoted.
		{"runtime env with a secret not YAML", func(j *rayv1.RayJob) { j.Spec.RuntimeEnvYAML = "env_vars:\n  TOKEN: s3cret\npip: [" },
			"failed to unmarshal RuntimeEnvYAML: error converting YAML to JSON: yaml: line 3: did not find expected node content"},
		{"entrypoint resources not an object", func(j *rayv1.RayJob) { j.Spec.EntrypointResources = "[1]" },
			"The RayJob spec is invalid: entrypointResources must be a JSON object of resource quantities: error unmarshaling JSON: while decoding JSON: json: cannot unmarshal array into Go value of type map[string]float32"},
		{"zero deadline", func(j *rayv1.RayJob) { j.Spec.ActiveDeadlineSeconds = ptr.To[int32](0) },
			"The RayJob spec is invalid: activeDeadlineSeconds must be a positive integer"},
		{"zero pre-running deadline", func(j *rayv1.RayJob) { j.Spec.PreRunningDeadlineSeconds = ptr.To[int32](0) },
			"The RayJob spec is invalid: preRunningDeadlineSeconds must be a positive integer"},
		{"negative backoff", func(j *rayv1.RayJob) { j.Spec.BackoffLimit = ptr.To[int32](-1) },
			"The RayJob spec is invalid: backoffLimit must be a positive integer"},
		{"submitter template without a container", func(j *rayv1.RayJob) { j.Spec.SubmitterPodTemplate = &corev1.PodTemplateSpec{} },
			"The RayJob spec is invalid: submitterPodTemplate should have at least one container"},
		{"submitter template restartPolicy Always", func(j *rayv1.RayJob) {
			j.Spec.SubmitterPodTemplate = &corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyAlways,
				Containers: []corev1.Container{{Name: "s"}}}}
		}, "The RayJob spec is invalid: submitterPodTemplate.spec.restartPolicy must be Never or OnFailure, as a Job's pods"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := RayJobSpec(rayJob(tt.edit), RayJobOptions{DeletionPolicy: true})
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("want valid, got %v", err)
			case tt.want != "" && (err == nil || err.Error() != tt.want):
				t.Errorf("got %v\nwant %s", err, tt.want)
			}
		})
	}
}

func policy(p rayv1.DeletionPolicyType) *rayv1.DeletionPolicy {
	return &rayv1.DeletionPolicy{Policy: &p}
}

func rule(p rayv1.DeletionPolicyType, status rayv1.JobStatus, ttl int32) rayv1.DeletionRule {
	return rayv1.DeletionRule{Policy: p, Condition: rayv1.DeletionCondition{JobStatus: &status, TTLSeconds: ttl}}
}

func TestDeletionStrategyNeedsTheGate(t *testing.T) {
	job := rayJob(func(j *rayv1.RayJob) {
		j.Spec.DeletionStrategy = &rayv1.DeletionStrategy{OnSuccess: policy(rayv1.DeleteCluster), OnFailure: policy(rayv1.DeleteNone)}
	})
	if err := RayJobSpec(job, RayJobOptions{}); err != ErrDeletionPolicyGate {
		t.Errorf("gate off: %v, want %v", err, ErrDeletionPolicyGate)
	}
	if err := RayJobSpec(job, RayJobOptions{DeletionPolicy: true}); err != nil {
		t.Errorf("gate on: %v", err)
	}
}

func TestRayJobStatus(t *testing.T) {
	job := rayJob(func(j *rayv1.RayJob) { j.Status.JobDeploymentStatus = rayv1.JobDeploymentStatusWaiting })
	if err := RayJobStatus(job); err == nil {
		t.Error("Waiting in K8sJobMode: no error")
	}
	job.Spec.SubmissionMode = rayv1.InteractiveMode
	if err := RayJobStatus(job); err != nil {
		t.Errorf("Waiting in InteractiveMode: %v", err)
	}
}
