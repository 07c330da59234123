package rayjob

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/batchscheduler"
	"github.com/kray-project/kray/pkg/builder"
	"github.com/kray-project/kray/pkg/constants"
)

func TestSubmitScript(t *testing.T) {
	tests := []struct {
		name string
		edit func(*rayv1.RayJob)
		want string
	}{
		{"minimal", func(*rayv1.RayJob) {},
			`if ! ray job status --address http://h:8265 train-abcde >/dev/null 2>&1 ; then ray job submit --address http://h:8265 --no-wait --submission-id train-abcde -- python train.py ; fi ; ray job logs --address http://h:8265 --follow train-abcde`},
		{"every option", func(j *rayv1.RayJob) {
			j.Spec.Entrypoint = "  python -c 'print(1)'  "
			j.Spec.RuntimeEnvYAML = "pip: [\"requests==2.26.0\"]\n"
			j.Spec.Metadata = map[string]string{"owner": "a b"}
			j.Spec.EntrypointNumCpus = 1
			j.Spec.EntrypointNumGpus = 0.5
			j.Spec.EntrypointResources = `{"Custom": 1}`
		},
			`if ! ray job status --address http://h:8265 train-abcde >/dev/null 2>&1 ; then ray job submit --address http://h:8265 --no-wait ` +
				`--runtime-env-json "{\"pip\":[\"requests==2.26.0\"]}" --metadata-json "{\"owner\":\"a b\"}" --submission-id train-abcde ` +
				`--entrypoint-num-cpus 1.000000 --entrypoint-num-gpus 0.500000 --entrypoint-resources "{\"Custom\": 1}" -- python -c 'print(1)' ; fi ; ` +
				`ray job logs --address http://h:8265 --follow train-abcde`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			job := newJob(inState(rayv1.JobDeploymentStatusInitializing), tt.edit)
			got, err := SubmitScript(job, "h:8265")
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("script (-want +got):\n%s", diff)
			}
		})
	}
	old := newJob(inState(rayv1.JobDeploymentStatusInitializing), func(j *rayv1.RayJob) {
		j.Spec.Metadata = map[string]string{"a": "b"}
		j.Spec.RayClusterSpec.RayVersion = "2.5.1"
	})
	if _, err := SubmitScript(old, "h:8265"); err == nil || err.Error() != "the Ray version must be at least 2.6.0 to use the metadata field" {
		t.Errorf("metadata on Ray 2.5.1: err = %v", err)
	}
}

func TestSubmitterJob(t *testing.T) {
	job := newJob(inState(rayv1.JobDeploymentStatusInitializing))
	rc := Cluster(job, "train-abcde")
	sub, err := SubmitterJob(job, rc, "train-abcde-head-svc.ns.svc.cluster.local:8265", "head-uid/0", builder.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if sub.Name != "train" || *sub.Spec.BackoffLimit != DefaultSubmitterBackoffLimit || sub.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("name %s backoff %d restart %s", sub.Name, *sub.Spec.BackoffLimit, sub.Spec.Template.Spec.RestartPolicy)
	}
	c := sub.Spec.Template.Spec.Containers[0]
	head := rc.Spec.HeadGroupSpec.Template.Spec.Containers[0]
	if c.Name != SubmitterContainerName || c.Image != head.Image || !cmp.Equal(c.Command, []string{"/bin/bash", "-ce", "--"}) || len(c.Args) != 1 {
		t.Errorf("container %s image %s command %v args %d", c.Name, c.Image, c.Command, len(c.Args))
	}
	if c.Resources.Requests.Cpu().String() != "500m" || c.Resources.Limits.Memory().String() != "1Gi" {
		t.Errorf("resources %v", c.Resources)
	}
	wantEnv := []corev1.EnvVar{{Name: "PYTHONUNBUFFERED", Value: "1"},
		{Name: EnvRayDashboardAddress, Value: "train-abcde-head-svc.ns.svc.cluster.local:8265"},
		{Name: EnvRayJobSubmissionID, Value: "train-abcde"}}
	if diff := cmp.Diff(wantEnv, c.Env); diff != "" {
		t.Errorf("env (-want +got):\n%s", diff)
	}
	if ref := sub.OwnerReferences[0]; ref.Kind != "RayJob" || ref.UID != jobUID || !ptr.Deref(ref.Controller, false) {
		t.Errorf("owner %+v", ref)
	}
	if got := sub.Annotations[AnnotationSubmittedOnHead]; got != "head-uid/0" {
		t.Errorf("%s = %q, want the head's incarnation", AnnotationSubmittedOnHead, got)
	}

	if sub.Spec.Template.Spec.SchedulerName != "" {
		t.Errorf("schedulerName %q without a batch scheduler", sub.Spec.Template.Spec.SchedulerName)
	}
	// KubeRay v1.7's: the labels a cluster's head NetworkPolicy lets in on the dashboard port.
	wantPodLabels := map[string]string{constants.LabelOriginatedFromCRName: "train", constants.LabelOriginatedFromCRD: "RayJob",
		constants.LabelCreatedBy: constants.CreatedByValue}
	if diff := cmp.Diff(wantPodLabels, sub.Spec.Template.Labels); diff != "" {
		t.Errorf("submitter pod labels (-want +got):\n%s", diff)
	}

	t.Run("under scheduler-plugins: its scheduler, not a gang member", func(t *testing.T) {
		ganged := newJob(inState(rayv1.JobDeploymentStatusInitializing), func(j *rayv1.RayJob) {
			j.Labels = map[string]string{batchscheduler.LabelGangScheduling: "true"}
		})
		opts := builder.Options{Scheduling: batchscheduler.Scheduling{Scheduler: batchscheduler.SchedulerPlugins, Gang: true}}
		sub, err := SubmitterJob(ganged, Cluster(ganged, "train-abcde"), "h:8265", "head-uid/0", opts)
		if err != nil {
			t.Fatal(err)
		}
		if got := sub.Spec.Template.Spec.SchedulerName; got != batchscheduler.SchedulerPluginsName {
			t.Errorf("schedulerName %q, want %s", got, batchscheduler.SchedulerPluginsName)
		}
		if _, ok := sub.Spec.Template.Labels[batchscheduler.LabelPodGroup]; ok {
			t.Errorf("the submitter is a member of the gang: %v", sub.Spec.Template.Labels)
		}
	})

	t.Run("user's template and backoff, token auth", func(t *testing.T) {
		job := newJob(inState(rayv1.JobDeploymentStatusInitializing), func(j *rayv1.RayJob) {
			j.Spec.SubmitterConfig = &rayv1.SubmitterConfig{BackoffLimit: ptr.To[int32](0)}
			j.Spec.SubmitterPodTemplate = &corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyOnFailure,
				Containers: []corev1.Container{{Name: "mine", Image: "me", Command: []string{"ray", "job", "submit"}}}}}
			j.Spec.RayClusterSpec.AuthOptions = &rayv1.AuthOptions{Mode: rayv1.AuthModeToken}
		})
		rc := Cluster(job, "train-abcde")
		sub, err := SubmitterJob(job, rc, "h:8265", "head-uid/0", builder.Options{})
		if err != nil {
			t.Fatal(err)
		}
		c := sub.Spec.Template.Spec.Containers[0]
		if *sub.Spec.BackoffLimit != 0 || sub.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyOnFailure ||
			!cmp.Equal(c.Command, []string{"ray", "job", "submit"}) || c.Args != nil {
			t.Errorf("backoff %d restart %s command %v args %v: the user's settings must stay", *sub.Spec.BackoffLimit,
				sub.Spec.Template.Spec.RestartPolicy, c.Command, c.Args)
		}
		var token *corev1.EnvVar
		for i := range c.Env {
			if c.Env[i].Name == "RAY_AUTH_TOKEN" {
				token = &c.Env[i]
			}
		}
		if token == nil || token.ValueFrom == nil || token.ValueFrom.SecretKeyRef.Name != "train-abcde" {
			t.Errorf("RAY_AUTH_TOKEN = %+v, want it from the cluster's auth Secret", token)
		}
	})
}

func TestClusterFromSpec(t *testing.T) {
	job := newJob(func(j *rayv1.RayJob) { j.Annotations = map[string]string{"a": "b"} })
	rc := Cluster(job, "train-x")
	if diff := cmp.Diff(*job.Spec.RayClusterSpec, rc.Spec); diff != "" {
		t.Errorf("spec (-job +cluster):\n%s", diff)
	}
	rc.Spec.HeadGroupSpec.Template.Spec.Containers[0].Image = "changed"
	if job.Spec.RayClusterSpec.HeadGroupSpec.Template.Spec.Containers[0].Image == "changed" {
		t.Error("the cluster shares the job's spec instead of a copy")
	}
	if rc.Annotations["a"] != "b" {
		t.Errorf("annotations %v", rc.Annotations)
	}
}

func TestHeadService(t *testing.T) {
	job := newJob(inState(rayv1.JobDeploymentStatusInitializing))
	rc := Cluster(job, "train-abcde")
	svc := HeadService(job, rc, builder.Options{})
	cluster := builder.HeadService(rc, builder.Options{})
	if svc.Name != "train-head-svc" || svc.Namespace != "ns" {
		t.Errorf("name %s/%s", svc.Namespace, svc.Name)
	}
	if diff := cmp.Diff(cluster.Spec, svc.Spec); diff != "" {
		t.Errorf("spec differs from the cluster's head Service (-cluster +job):\n%s", diff)
	}
	if svc.Spec.Selector[constants.LabelCluster] != "train-abcde" || svc.Spec.Selector[constants.LabelNodeType] != constants.NodeTypeHead {
		t.Errorf("selector %v, want the current cluster's head", svc.Spec.Selector)
	}
	want := map[string]string{constants.LabelOriginatedFromCRName: "train", constants.LabelOriginatedFromCRD: "RayJob",
		constants.LabelNodeType: constants.NodeTypeHead, constants.LabelIdentifier: "train-head", constants.LabelCluster: "train-abcde"}
	if diff := cmp.Diff(want, svc.Labels); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
	if ref := svc.OwnerReferences[0]; ref.Kind != "RayJob" || ref.UID != jobUID {
		t.Errorf("owner %+v", ref)
	}
}

func TestHeadIncarnation(t *testing.T) {
	job := newJob()
	rc := Cluster(job, "train-abcde")
	ray := rc.Spec.HeadGroupSpec.Template.Spec.Containers[constants.RayContainerIndex].Name
	head := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u1"}, Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{
		{Name: "autoscaler", RestartCount: 7}, {Name: ray, RestartCount: 0}}}}
	first := HeadIncarnation(rc, head)
	if first != "u1/0" {
		t.Errorf("incarnation %q, want u1/0: only the Ray container's restarts count", first)
	}
	restarted := head.DeepCopy()
	restarted.Status.ContainerStatuses[1].RestartCount = 1
	replaced := head.DeepCopy()
	replaced.UID = "u2"
	for name, p := range map[string]*corev1.Pod{"Ray container restarted in place": restarted, "pod replaced": replaced} {
		if HeadIncarnation(rc, p) == first {
			t.Errorf("%s: the incarnation did not change", name)
		}
	}
}

// In SidecarMode the head pod gets KubeRay's ray-job-submitter container, which only follows the job that
// kray submits; it never runs `ray job submit`.
func TestSidecarModeClusterFollowsWithoutSubmitting(t *testing.T) {
	job := newJob(mode(rayv1.SidecarMode), inState(rayv1.JobDeploymentStatusInitializing), func(j *rayv1.RayJob) {
		j.Spec.RayClusterSpec.AuthOptions = &rayv1.AuthOptions{Mode: rayv1.AuthModeToken}
	})
	rc := Cluster(job, "train-abcde")
	cs := rc.Spec.HeadGroupSpec.Template.Spec.Containers
	if len(cs) != 2 || cs[1].Name != SubmitterContainerName {
		t.Fatalf("head containers %d, the last %q; want the Ray container and %s", len(cs), cs[len(cs)-1].Name, SubmitterContainerName)
	}
	sc := cs[1]
	want := `until ray job status --address http://127.0.0.1:8265 train-abcde >/dev/null 2>&1 ; do echo "Waiting for Ray job train-abcde at http://127.0.0.1:8265 ..." ; sleep 2 ; done ; ` +
		`ray job logs --address http://127.0.0.1:8265 --follow train-abcde || true ; exec sleep infinity`
	if diff := cmp.Diff([]string{want}, sc.Args); diff != "" {
		t.Errorf("sidecar script (-want +got):\n%s", diff)
	}
	if strings.Contains(sc.Args[0], "submit") || sc.Image != cs[0].Image {
		t.Errorf("sidecar %q in %s: it must not submit, and runs in the head's image %s", sc.Args[0], sc.Image, cs[0].Image)
	}
	env := map[string]bool{}
	for _, e := range sc.Env {
		env[e.Name] = true
	}
	if !env[EnvRayJobSubmissionID] || !env["RAY_AUTH_TOKEN"] {
		t.Errorf("sidecar env %v, want the submission id and the cluster's token", sc.Env)
	}
	if k8s := Cluster(newJob(inState(rayv1.JobDeploymentStatusInitializing)), "train-abcde"); len(k8s.Spec.HeadGroupSpec.Template.Spec.Containers) != 1 {
		t.Errorf("K8sJobMode: the head got a sidecar")
	}
}
