package rayservice

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/internal/controller/shared"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/spec"
)

// reconcileServices points the RayService's Services at the cluster that serves. The first cluster gets
// them once its applications run; a pending cluster only once its applications run and it has the ready
// serve endpoints switchEndpoints asks, so that the switch never leaves the serve Service fewer endpoints
// than it had (nor than the pending cluster has pods to serve from). Once both Services select the pending
// cluster, it becomes the active one.
func reconcileServices(o Observed, d *Decision, pendingReady bool) {
	svc, st := o.Service, &d.Status
	pending := o.Clusters[st.PendingServiceStatus.RayClusterName]
	active := o.Clusters[st.ActiveServiceStatus.RayClusterName]
	target := active
	if pending != nil && pendingReady && (active == nil || serveEndpoints(o.Pods, pending.Name) >= switchEndpoints(o, st, pending)) {
		target = pending
	}
	if target == nil {
		return
	}
	head := HeadService(svc, target, o.Options)
	serve, err := ServeService(svc, target)
	if err != nil {
		d.Events = append(d.Events, shared.Warning(shared.EventFailedToCreateService, fmt.Sprintf("Failed to build the serve Service of RayService %s/%s: %v", svc.Namespace, svc.Name, err)))
	}
	if !selects(o.HeadService, target.Name) {
		d.Actions = append(d.Actions, Action{Kind: SyncService, Name: target.Name, Service: head})
	}
	if serve != nil && !selects(o.ServeService, target.Name) {
		d.Actions = append(d.Actions, Action{Kind: SyncService, Name: target.Name, Service: serve})
	}
	if target == pending && selects(o.HeadService, pending.Name) && (serve == nil || selects(o.ServeService, pending.Name)) {
		st.ActiveServiceStatus = st.PendingServiceStatus
		st.PendingServiceStatus = rayv1.RayServiceStatus{}
	}
}

// switchEndpoints is how many ready serve endpoints the pending cluster needs to take the Services from the
// active one: as many as the serve Service has now, but no more than the pending cluster serves from once
// all its pods are ready (its head when labelled to serve, and every worker), and at least one.
func switchEndpoints(o Observed, st *rayv1.RayServiceStatuses, pending *rayv1.RayCluster) int32 {
	var full int64
	if h := headPod(o.Pods, pending.Name); h != nil && h.Labels[constants.LabelServe] == "true" {
		full++
	}
	for i := range pending.Spec.WorkerGroupSpecs {
		full += int64(spec.GroupReplicas(pending, &pending.Spec.WorkerGroupSpecs[i]))
	}
	now := int64(serveEndpoints(o.Pods, servingCluster(o, st)))
	return int32(max(1, min(now, full)))
}

// selects reports whether the live Service s sends traffic to the cluster named cluster.
func selects(s *corev1.Service, cluster string) bool {
	return s != nil && s.Spec.Selector[constants.LabelCluster] == cluster
}

// servingCluster is the cluster whose pods the serve Service selects: the live Service's, else the active
// cluster.
func servingCluster(o Observed, st *rayv1.RayServiceStatuses) string {
	if s := o.ServeService; s != nil {
		if name := s.Spec.Selector[constants.LabelCluster]; name != "" {
			return name
		}
	}
	return st.ActiveServiceStatus.RayClusterName
}

// serveEndpoints counts the pods of cluster the serve Service sends traffic to: labelled ray.io/serve=true,
// Ready, with an IP, not being deleted.
func serveEndpoints(pods []corev1.Pod, cluster string) int32 {
	var n int32
	for i := range pods {
		p := &pods[i]
		if cluster != "" && p.Labels[constants.LabelCluster] == cluster && p.Labels[constants.LabelServe] == "true" && podServes(p) {
			n++
		}
	}
	return n
}

// podServes reports whether p can take traffic: Ready, with an IP, not being deleted.
func podServes(p *corev1.Pod) bool {
	if p == nil || p.DeletionTimestamp != nil || p.Status.PodIP == "" {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// headPod is the head pod of the cluster named cluster among pods, nil when absent.
func headPod(pods []corev1.Pod, cluster string) *corev1.Pod {
	for i := range pods {
		p := &pods[i]
		if cluster != "" && p.Labels[constants.LabelCluster] == cluster && p.Labels[constants.LabelNodeType] == constants.NodeTypeHead {
			return p
		}
	}
	return nil
}
