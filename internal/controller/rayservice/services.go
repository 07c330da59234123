package rayservice

import (
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/internal/controller/shared"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/dashboard"
)

// reconcileServices points the RayService's Services at the cluster that serves. The first cluster gets
// them once its applications run; a pending cluster only once its applications run and switchDue says so,
// and keeps them once both select it. Once both Services select the pending cluster, it becomes the active
// one, and its switch deadline goes.
func reconcileServices(o Observed, d *Decision, pendingReady bool) {
	svc, st := o.Service, &d.Status
	pending := o.Clusters[st.PendingServiceStatus.RayClusterName]
	active := o.Clusters[st.ActiveServiceStatus.RayClusterName]
	if active != nil && active.Annotations[constants.AnnotationSwitchDeadline] != "" {
		d.Actions = append(d.Actions, Action{Kind: MarkSwitch, Name: active.Name, Cluster: active})
	}
	target := active
	if pending != nil && pendingReady && (active == nil || switched(o, pending) || switchDue(o, d, pending)) {
		target = pending
	} else if pending != nil && active != nil && pending.Annotations[constants.AnnotationSwitchDeadline] != "" && !waiting(o, pending, pendingReady) {
		// The wait the deadline bounds is over (the applications stopped running, or no endpoint is left):
		// the next one starts afresh.
		d.Actions = append(d.Actions, Action{Kind: MarkSwitch, Name: pending.Name, Cluster: pending})
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

// switched reports whether both live Services already select the pending cluster: the switch was made.
func switched(o Observed, pending *rayv1.RayCluster) bool {
	return selects(o.HeadService, pending.Name) && (o.ServeService == nil || selects(o.ServeService, pending.Name))
}

// waiting reports whether the pending cluster is in the wait a switch deadline bounds: its applications run
// and it has a ready serve endpoint.
func waiting(o Observed, pending *rayv1.RayCluster, pendingReady bool) bool {
	return pendingReady && serveEndpoints(o.Pods, pending.Name) > 0
}

// switchDue reports whether the pending cluster, whose applications run, takes the traffic now: once every
// pod of it that Serve runs a proxy on is a ready serve endpoint, or once its switch deadline passed; never
// while it has no ready serve endpoint. The first time it waits, the deadline (now + SwitchWait) is stored on
// it; until then d is requeued for the deadline.
func switchDue(o Observed, d *Decision, pending *rayv1.RayCluster) bool {
	w := switchWaitOf(o, pending)
	switch {
	case w.ready == 0:
		return false
	case w.short == 0:
		return true
	case !w.marked:
		w.until = o.Now.Add(SwitchWait).UTC().Truncate(time.Second)
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
	// until is its stored switch deadline, when marked.
	until  time.Time
	marked bool
}

// switchWaitOf reads the pending cluster's switch wait from the pods, Serve's proxies and its annotation.
// When Serve reports no proxy at all (a Ray that does not, or proxies disabled), every pod of the cluster
// that the serve Service selects counts as one Serve runs a proxy on.
func switchWaitOf(o Observed, pending *rayv1.RayCluster) switchWait {
	w := switchWait{ready: int(serveEndpoints(o.Pods, pending.Name))}
	var proxies map[string]dashboard.ServeProxy
	if read := o.Serve[pending.Name]; read.Details != nil {
		proxies = read.Details.Proxies
	}
	var pods []*corev1.Pod
	for i := range o.Pods {
		if p := &o.Pods[i]; p.Labels[constants.LabelCluster] == pending.Name && p.Labels[constants.LabelServe] == "true" && p.DeletionTimestamp == nil {
			pods = append(pods, p)
		}
	}
	for _, p := range pods {
		if len(proxies) > 0 && !proxiedOn(proxies, pods, p) {
			continue
		}
		w.proxied++
		if !podServes(p) {
			w.short++
		}
	}
	until, err := time.Parse(time.RFC3339, pending.Annotations[constants.AnnotationSwitchDeadline])
	w.until, w.marked = until, err == nil
	return w
}

// proxiedOn reports whether Serve runs a proxy that takes traffic in (not draining) on p, one of pods: by
// the node's instance ID (the pod name), else by its IP when the proxy's instance ID names none of pods.
func proxiedOn(proxies map[string]dashboard.ServeProxy, pods []*corev1.Pod, p *corev1.Pod) bool {
	for _, proxy := range proxies {
		if proxy.Leaving() {
			continue
		}
		if proxy.NodeInstanceID == p.Name {
			return true
		}
		named := slices.ContainsFunc(pods, func(q *corev1.Pod) bool { return q.Name == proxy.NodeInstanceID })
		if !named && proxy.NodeIP != "" && proxy.NodeIP == p.Status.PodIP {
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
