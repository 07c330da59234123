package rayjob

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/internal/kuberayref"
	"github.com/kray-project/kray/pkg/batchscheduler"
	"github.com/kray-project/kray/pkg/builder"
	"github.com/kray-project/kray/pkg/constants"
)

// KubeRay v1.7's RayJob samples for YuniKorn and Volcano: the cluster and the submitter pod get the metadata
// KubeRay's scheduler plugins give them (AddMetadataToChildResource of the RayJob, "submittergroup").
func TestKubeRaysSchedulerRayJobSamples(t *testing.T) {
	yunikornGroups := `[{"minResource":{"cpu":"1","memory":"2Gi"},"name":"headgroup","minMember":1},` +
		`{"minResource":{"cpu":"1","memory":"1Gi"},"name":"small-group","minMember":1},` +
		`{"minResource":{"cpu":"500m","memory":"200Mi"},"name":"submittergroup","minMember":1}]`
	for _, tt := range []struct {
		file, scheduler    string
		clusterAnnotation  string
		submitterResources string
		schedulerName      string
		labels             map[string]string
		annotations        map[string]string
	}{
		{
			file: "ray-job.yunikorn-scheduler.yaml", scheduler: batchscheduler.YuniKorn, clusterAnnotation: yunikornGroups,
			schedulerName: batchscheduler.YuniKornName,
			labels:        map[string]string{batchscheduler.LabelPodApplicationID: "rayjob-yunikorn-0", batchscheduler.LabelPodQueue: "root.test"},
			annotations:   map[string]string{batchscheduler.AnnotationTaskGroups: yunikornGroups, batchscheduler.AnnotationTaskGroupName: batchscheduler.GroupSubmitter},
		},
		{
			file: "ray-job.volcano-scheduler-queue.yaml", scheduler: batchscheduler.Volcano,
			submitterResources: `{"cpu":"500m","memory":"200Mi"}`,
			schedulerName:      batchscheduler.VolcanoName,
			labels:             map[string]string{batchscheduler.LabelVolcanoQueue: "kuberay-test-queue"},
			annotations: map[string]string{batchscheduler.AnnotationVolcanoGroupName: "ray-rayjob-sample-0-pg",
				batchscheduler.AnnotationVolcanoTaskSpec: batchscheduler.GroupSubmitter},
		},
	} {
		t.Run(tt.file, func(t *testing.T) {
			job := &rayv1.RayJob{}
			if err := kuberayref.Sample(tt.file, "RayJob", job); err != nil {
				t.Fatal(err)
			}
			job.Namespace = "ns"
			rc := Cluster(job, job.Name+"-abcde")
			WithSubmitter(job, rc, tt.scheduler)
			if got := rc.Annotations[batchscheduler.AnnotationTaskGroups]; got != tt.clusterAnnotation {
				t.Errorf("cluster task groups\n got %s\nwant %s", got, tt.clusterAnnotation)
			}
			if got := rc.Annotations[constants.AnnotationSubmitterResources]; got != tt.submitterResources {
				t.Errorf("cluster's submitter resources %q, want %q", got, tt.submitterResources)
			}
			sub, err := SubmitterJob(job, rc, "h:8265", "head-uid/0", builder.Options{Scheduling: batchscheduler.Scheduling{Scheduler: tt.scheduler}})
			if err != nil {
				t.Fatal(err)
			}
			tmpl := sub.Spec.Template
			if tmpl.Spec.SchedulerName != tt.schedulerName {
				t.Errorf("schedulerName %q, want %q", tmpl.Spec.SchedulerName, tt.schedulerName)
			}
			pick := func(from, keys map[string]string) map[string]string {
				out := map[string]string{}
				for k := range keys {
					if v, ok := from[k]; ok {
						out[k] = v
					}
				}
				return out
			}
			if diff := cmp.Diff(tt.labels, pick(tmpl.Labels, tt.labels)); diff != "" {
				t.Errorf("submitter labels (-KubeRay +kray):\n%s", diff)
			}
			if diff := cmp.Diff(tt.annotations, pick(tmpl.Annotations, tt.annotations)); diff != "" {
				t.Errorf("submitter annotations (-KubeRay +kray):\n%s", diff)
			}
		})
	}
}

// KubeRay puts no task groups on a SidecarMode RayJob's cluster: its pods make their own from the cluster.
func TestNoSubmitterTaskGroupOutsideK8sJobMode(t *testing.T) {
	job := &rayv1.RayJob{}
	if err := kuberayref.Sample("ray-job.yunikorn-scheduler.yaml", "RayJob", job); err != nil {
		t.Fatal(err)
	}
	job.Spec.SubmissionMode = rayv1.SidecarMode
	rc := Cluster(job, "c")
	WithSubmitter(job, rc, batchscheduler.YuniKorn)
	if v, ok := rc.Annotations[batchscheduler.AnnotationTaskGroups]; ok {
		t.Errorf("task groups %s on a SidecarMode cluster", v)
	}
}
