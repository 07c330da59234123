package rayjob

import (
	"context"
	"errors"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/internal/controller/shared"
	"github.com/kray-project/kray/internal/writetest"
)

// Every kind of action Next can ask for has a row.
func TestEveryActionHasARow(t *testing.T) {
	for _, k := range []ActionKind{CreateCluster, DeleteCluster, CreateSubmitter, DeleteSubmitter, SubmitJob, SuspendWorkers, DeleteRayJob, SyncHeadService} {
		if _, ok := actionRows[k]; !ok {
			t.Errorf("no row for %s", k)
		}
	}
}

// A write that succeeds earns its Normal event; one whose effect is already there earns nothing and is no
// error; one that fails earns its Warning and an error naming its subject.
func TestActionOutcomes(t *testing.T) {
	job := newJob(inState(rayv1.JobDeploymentStatusInitializing))
	cluster := Cluster(job, job.Status.RayClusterName)
	boom := apierrors.NewInternalError(errors.New("etcd timeout"))
	exists := apierrors.NewAlreadyExists(schema.GroupResource{Group: "ray.io", Resource: "rayclusters"}, cluster.Name)
	for _, tt := range []struct {
		name      string
		fault     error
		wantEvent string
		wantErr   string
	}{
		{"created", nil, shared.EventCreatedRayCluster, ""},
		{"already there", exists, "", ""},
		{"failed", boom, shared.EventFailedToCreateRayCluster, "create RayCluster ns/train-abcde: "},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			if tt.fault != nil {
				e.writer.Fail(writetest.Create, "RayCluster", "", tt.fault)
			}
			out := e.reconciler().act(context.Background(), job, Decision{Actions: []Action{{Kind: CreateCluster, Cluster: cluster.DeepCopy()}}})
			var reasons []string
			for _, ev := range out.events {
				reasons = append(reasons, ev.Reason)
			}
			if got := strings.Join(reasons, ","); got != tt.wantEvent {
				t.Errorf("events %q, want %q", got, tt.wantEvent)
			}
			if (out.err == nil) != (tt.wantErr == "") || (out.err != nil && !strings.Contains(out.err.Error(), tt.wantErr)) {
				t.Errorf("error %v, want one containing %q", out.err, tt.wantErr)
			}
		})
	}
}
