package rayservice

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/internal/controller/shared"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/dashboard"
)

// reconcileServices points the RayService's Services at the cluster that serves. The first cluster gets
// them once its applications run; a pending cluster only once its applications run and switchDue says so.
// Once both Services select the pending cluster, it becomes the active one, and its switch deadline goes.
func reconcileServices(o Observed, d *Decision, pendingReady bool) {
	svc, st := o.Service, &d.Status
	pending := o.Clusters[st.PendingServiceStatus.RayClusterName]
	active := o.Clusters[st.ActiveServiceStatus.RayClusterName]
	if active != nil && active.Annotations[constants.AnnotationSwitchDeadline] != "" {
		d.Actions = append(d.Actions, Action{Kind: MarkSwitch, Name: active.Name, Cluster: active})
	}
	target := active
	if pending != nil && pendingReady && (active == nil || switchDue(o, d, pending)) {
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

// switchDue reports whether the pending cluster, whose applications run, takes the traffic now: once every
// pod of it that Serve runs a proxy on is a ready serve endpoint, or once its switch deadline passed; never
// while it has no ready serve endpoint. The first time it runs short, the deadline (now + SwitchWait) is
// stored on it; until then d is requeued for the deadline.
func switchDue(o Observed, d *Decision, pending *rayv1.RayCluster) bool {
	w := switchWaitOf(o, pending)
	switch {
	case w.ready == 0:
		return false
	case w.short == 0:
		return true
	case !w.marked:
		d.Actions = append(d.Actions, Action{Kind: MarkSwitch, Name: pending.Name, Cluster: pending, Deadline: w.until})
	}
	if !o.Now.Before(w.until) {
		return true
	}
	d.wantRequeue(w.until.Sub(o.Now))
	return false
}

// switchWait is what a pending cluster's switch waits for.
type switchWait struct {
	// ready counts its ready serve endpoints; proxied the pods Serve runs a proxy on that the serve Service
	// selects, short those of them that are not ready serve endpoints yet.
	ready, proxied, short int
	// until is its switch deadline: the stored one when marked, else now + SwitchWait.
	until  time.Time
	marked bool
}

// switchWaitOf reads the pending cluster's switch wait from the pods, Serve's proxies and its annotation.
func switchWaitOf(o Observed, pending *rayv1.RayCluster) switchWait {
	w := switchWait{ready: int(serveEndpoints(o.Pods, pending.Name))}
	var proxies map[string]dashboard.ServeProxy
	if read := o.Serve[pending.Name]; read.Details != nil {
		proxies = read.Details.Proxies
	}
	for i := range o.Pods {
		p := &o.Pods[i]
		if p.Labels[constants.LabelCluster] != pending.Name || p.Labels[constants.LabelServe] != "true" || p.DeletionTimestamp != nil || !proxiedOn(proxies, p) {
			continue
		}
		w.proxied++
		if !podServes(p) {
			w.short++
		}
	}
	until, err := time.Parse(time.RFC3339, pending.Annotations[constants.AnnotationSwitchDeadline])
	w.until, w.marked = until, err == nil
	if !w.marked {
		w.until = o.Now.Add(SwitchWait).UTC().Truncate(time.Second)
	}
	return w
}

// proxiedOn reports whether Serve runs a proxy that takes traffic (not draining) on pod p: by the node's
// instance ID (the pod name), else by its IP when Serve reports no instance ID.
func proxiedOn(proxies map[string]dashboard.ServeProxy, p *corev1.Pod) bool {
	for _, proxy := range proxies {
		if proxy.Leaving() {
			continue
		}
		if proxy.NodeInstanceID == p.Name || proxy.NodeInstanceID == "" && proxy.NodeIP != "" && proxy.NodeIP == p.Status.PodIP {
			return true
		}
	}
	return false
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
