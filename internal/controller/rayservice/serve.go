package rayservice

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/internal/controller/shared"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/dashboard"
)

// reconcileServe reads the Serve applications of the target cluster into its status, asks for serveConfigV2
// (at the cluster's target capacity, during and after an incremental upgrade) to be applied when that
// cluster has not accepted it (or shows no application: a head restarted without GCS fault tolerance), and
// reports whether the target cluster serves: at least one application, all RUNNING, with nothing left to
// apply.
func reconcileServe(o Observed, d *Decision) bool {
	svc, st := o.Service, &d.Status
	name := ServeTarget(withStatus(svc, st), o.Clusters, o.ZeroDowntime, o.Validation.IncrementalUpgrade)
	for _, s := range []*rayv1.RayServiceStatus{&st.ActiveServiceStatus, &st.PendingServiceStatus} {
		if s.RayClusterName != name {
			s.Applications = nil // not read in this reconcile (the active cluster's, during an upgrade)
		}
	}
	target := statusOf(st, name)
	if target == nil {
		return false
	}
	want := Served{Config: svc.Spec.ServeConfigV2}
	if incremental(svc, o.Validation.IncrementalUpgrade) {
		want.Capacity = target.TargetCapacity
	}
	return serveCluster(o, d, name, target, want, false)
}

// serveCluster reads the Serve applications of the cluster name into its status s, asks for want to be put
// when its Serve has not accepted it (or shows no application), and reports whether it serves: at least one
// application, all RUNNING, with nothing left to put. With trustServe, a cluster whose acceptance is not
// recorded and whose Serve runs want's target capacity is taken to have accepted want: the cluster an
// incremental upgrade moves away from keeps the config it runs. A want with no Config (the config the
// cluster keeps is not known in full) is never put.
func serveCluster(o Observed, d *Decision, name string, s *rayv1.RayServiceStatus, want Served, trustServe bool) bool {
	if !podServes(headPod(o.Pods, name)) {
		return false
	}
	read, ok := o.Serve[name]
	if !ok {
		return false
	}
	if read.Err != nil {
		d.Events = append(d.Events, shared.Warning(EventFailedToGetServeApplications,
			fmt.Sprintf("Failed to read the Serve applications of RayCluster %s/%s: %v", o.Service.Namespace, name, read.Err)))
		return false
	}
	s.Applications = appStatuses(read.Details)
	applied, known := o.Applied[name]
	accepted := known && sameServed(applied, want)
	if !known && trustServe {
		accepted = servesCapacity(read.Details, want.Capacity)
	}
	if !accepted || len(read.Details.Applications) == 0 {
		if want.Config == "" {
			// The config this cluster keeps is not known in full: putting any other would change what it serves.
			d.Events = append(d.Events, shared.Warning(EventFailedToUpdateTargetCapacity, fmt.Sprintf(
				"RayCluster %s/%s keeps the serveConfigV2 it runs, which kray does not know in full (applied by an earlier kray, or over %d bytes): its target_capacity is left as it is",
				o.Service.Namespace, name, maxRecordedConfig)))
			return false
		}
		d.Actions = append(d.Actions, Action{Kind: ApplyServe, Name: name, Config: want.Config, Capacity: want.Capacity})
		return false
	}
	for _, app := range read.Details.Applications {
		if app.Status != rayv1.ApplicationStatusEnum.RUNNING {
			return false
		}
	}
	return true
}

// sameServed reports whether a and b put the same config at the same target capacity; the configs are
// compared by hash only when one of them is known by its hash alone.
func sameServed(a, b Served) bool {
	if !ptr.Equal(a.Capacity, b.Capacity) {
		return false
	}
	if a.Config != "" && b.Config != "" {
		return a.Config == b.Config
	}
	return a.hash() == b.hash()
}

// servesCapacity reports whether Serve runs at capacity percent (nil and Serve's none both being 100%).
func servesCapacity(details *dashboard.ServeDetails, capacity *int32) bool {
	got, want := 100.0, 100.0
	if details.TargetCapacity != nil {
		got = *details.TargetCapacity
	}
	if capacity != nil {
		want = float64(*capacity)
	}
	return got == want
}

// appStatuses is Serve's answer as the status's application statuses; the unnamed application is "default".
func appStatuses(details *dashboard.ServeDetails) map[string]rayv1.AppStatus {
	if len(details.Applications) == 0 {
		return nil
	}
	out := make(map[string]rayv1.AppStatus, len(details.Applications))
	for name, app := range details.Applications {
		if name == "" {
			name = "default"
		}
		s := rayv1.AppStatus{Status: app.Status, Message: app.Message}
		if len(app.Deployments) > 0 {
			s.Deployments = make(map[string]rayv1.ServeDeploymentStatus, len(app.Deployments))
			for dn, dep := range app.Deployments {
				s.Deployments[dn] = rayv1.ServeDeploymentStatus{Status: dep.Status, Message: dep.Message}
			}
		}
		out[name] = s
	}
	return out
}

// ProbedHeads are the head pods whose Serve proxy a reconcile probes: the ready heads of the active and
// pending clusters, unless the RayService keeps its head out of the serve Service.
func ProbedHeads(svc *rayv1.RayService, pods []corev1.Pod) []*corev1.Pod {
	if svc.Spec.ExcludeHeadPodFromServeSvc {
		return nil
	}
	var out []*corev1.Pod
	for _, name := range []string{svc.Status.ActiveServiceStatus.RayClusterName, svc.Status.PendingServiceStatus.RayClusterName} {
		if head := headPod(pods, name); head != nil && podServes(head) {
			out = append(out, head)
		}
	}
	return out
}

// labelHeads sets the ray.io/serve label of the active and pending heads: "true" while the head's Serve
// proxy answers its health check, else "false" (always "false" with excludeHeadPodFromServeSvc), saying why.
func labelHeads(o Observed, d *Decision) {
	svc, st := o.Service, &d.Status
	for _, name := range []string{st.ActiveServiceStatus.RayClusterName, st.PendingServiceStatus.RayClusterName} {
		head := headPod(o.Pods, name)
		if head == nil || head.DeletionTimestamp != nil {
			continue
		}
		want, why := "true", ""
		switch {
		case svc.Spec.ExcludeHeadPodFromServeSvc:
			want, why = "false", "the RayService sets excludeHeadPodFromServeSvc"
		case !podServes(head):
			want, why = "false", "the head pod is not ready"
		case !o.ProxyHealthy[head.Name]:
			want, why = "false", "its Serve proxy is not healthy"
			if err := o.ProxyErr[head.Name]; err != nil {
				why = err.Error()
			}
		}
		if head.Labels[constants.LabelServe] != want {
			d.Actions = append(d.Actions, Action{Kind: LabelHead, Name: name, Pod: head, Value: want, Why: why})
		}
	}
}
