package rayservice

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/internal/controller/shared"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/dashboard"
	"github.com/kray-project/kray/pkg/validation"
)

// change is how a cluster's spec relates to the RayService's rayClusterConfig.
type change int

const (
	// unchanged: the same spec, replica fields aside; nothing is written to the cluster.
	unchanged change = iota
	// inPlace: worker groups were appended (or the cluster's hash comes from another scheme); the
	// cluster's spec is rebuilt where it runs.
	inPlace
	// replaced: any other change; it takes a new cluster.
	replaced
)

// specChange is how rc's spec (by the annotations it was built with) relates to svc's rayClusterConfig.
func specChange(rc *rayv1.RayCluster, svc *rayv1.RayService) change {
	want := &svc.Spec.RayClusterSpec
	if rc.Annotations[constants.AnnotationKubeRayVersion] != HashScheme {
		return inPlace
	}
	built := rc.Annotations[constants.AnnotationClusterHash]
	if built == ClusterHash(want) {
		return unchanged
	}
	n, err := strconv.Atoi(rc.Annotations[constants.AnnotationNumWorkerGroups])
	if err == nil && n >= 0 && n < len(want.WorkerGroupSpecs) {
		first := want.DeepCopy()
		first.WorkerGroupSpecs = first.WorkerGroupSpecs[:n]
		if ClusterHash(first) == built {
			return inPlace
		}
	}
	return replaced
}

// newClusterOnChange reports whether a changed cluster spec takes a new cluster: upgradeStrategy NewCluster,
// or none with zero-downtime upgrades on. None never does, nor NewClusterWithIncrementalUpgrade, which kray
// does not serve (as KubeRay v1.5.0 with its gate off).
func newClusterOnChange(svc *rayv1.RayService, zeroDowntime bool) bool {
	if s := svc.Spec.UpgradeStrategy; s != nil && s.Type != nil {
		return *s.Type == rayv1.NewCluster
	}
	return zeroDowntime
}

// ServeTarget is the cluster whose Serve applications a reconcile reads and applies: the pending cluster
// once it exists, else the active one unless its spec changed so that a new cluster is due (which then
// gets them); "" when there is none.
func ServeTarget(svc *rayv1.RayService, clusters map[string]*rayv1.RayCluster, zeroDowntime bool) string {
	if name := svc.Status.PendingServiceStatus.RayClusterName; name != "" {
		if clusters[name] != nil {
			return name
		}
		return ""
	}
	name := svc.Status.ActiveServiceStatus.RayClusterName
	active := clusters[name]
	if active == nil || (specChange(active, svc) == replaced && newClusterOnChange(svc, zeroDowntime)) {
		return ""
	}
	return name
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

// Next decides, from what the reconciler observed, the RayService's next status and the writes that lead to
// it. It is pure; the reconciler makes the writes, then writes the status once.
func Next(o Observed) Decision {
	svc := o.Service
	d := Decision{Status: *svc.Status.DeepCopy()}
	if reason, err := validate(svc); err != nil {
		d.Invalid = true
		kind := "spec"
		if reason == EventInvalidRayServiceMetadata {
			kind = "metadata"
		}
		d.Events = append(d.Events, shared.Warning(reason, fmt.Sprintf("The RayService %s is invalid %s/%s: %v", kind, svc.Namespace, svc.Name, err)))
		return d
	}
	st := &d.Status
	st.ObservedGeneration = svc.Generation
	d.wantRequeue(PollInterval)
	if c := meta.FindStatusCondition(st.Conditions, string(rayv1.RayServiceReady)); c != nil && c.Reason == string(rayv1.RayServiceInitializingTimeout) {
		cleanUp(o, &d) // failed for good: every cluster goes
		return d
	}
	if st.PendingServiceStatus.RayClusterName == "" && o.Clusters[st.ActiveServiceStatus.RayClusterName] == nil {
		// No cluster to serve from: name the next one; it is created once the name is stored, so that a
		// restarted or second operator never makes another.
		st.ActiveServiceStatus = rayv1.RayServiceStatus{}
		nameNext(o, &d)
		setConditions(o, &d, 0)
		return d
	}
	reconcileClusters(o, &d)
	ready := reconcileServe(o, &d)
	labelHeads(o, &d)
	reconcileServices(o, &d, ready)
	endpoints := serveEndpoints(o.Pods, servingCluster(o, st))
	if timedOut(o, &d, endpoints) {
		cleanUp(o, &d)
		return d
	}
	cleanUp(o, &d)
	setConditions(o, &d, endpoints)
	return d
}

// validate runs the metadata and spec checks, returning the event reason of the first failure.
func validate(svc *rayv1.RayService) (string, error) {
	if err := validation.RayServiceMetadata(svc); err != nil {
		return EventInvalidRayServiceMetadata, err
	}
	if err := validation.RayServiceSpec(svc, validation.RayServiceOptions{}); err != nil {
		return EventInvalidRayServiceSpec, err
	}
	return "", nil
}

// nameNext names the next cluster of the RayService as its pending one, from the reconcile's random
// suffix; a name one of its clusters already has is left for the next reconcile's suffix.
func nameNext(o Observed, d *Decision) {
	name := o.Service.Name + "-" + o.Suffix
	if o.Clusters[name] != nil || name == d.Status.ActiveServiceStatus.RayClusterName || name == d.Status.PendingServiceStatus.RayClusterName {
		d.wantRequeue(0)
		return
	}
	d.Status.PendingServiceStatus = rayv1.RayServiceStatus{RayClusterName: name}
}

// reconcileClusters creates the pending cluster, rebuilds a cluster in place when only worker groups were
// appended, and names a new pending cluster for any other change (replacing a pending one that no longer
// matches).
func reconcileClusters(o Observed, d *Decision) {
	svc, st := o.Service, &d.Status
	if name := st.PendingServiceStatus.RayClusterName; name != "" {
		pending := o.Clusters[name]
		switch {
		case pending == nil:
			d.Actions = append(d.Actions, Action{Kind: CreateCluster, Name: name, Cluster: Cluster(svc, name)})
		case specChange(pending, svc) == inPlace:
			d.Actions = append(d.Actions, Action{Kind: UpdateCluster, Name: name, Cluster: rebuilt(svc, pending)})
		case specChange(pending, svc) == replaced:
			// The spec changed again before the switch: the pending cluster no longer matches, a new one
			// replaces it (created once its name is stored) and the old pending one goes like any old cluster.
			nameNext(o, d)
		}
		return
	}
	active := o.Clusters[st.ActiveServiceStatus.RayClusterName]
	switch specChange(active, svc) {
	case inPlace:
		d.Actions = append(d.Actions, Action{Kind: UpdateCluster, Name: active.Name, Cluster: rebuilt(svc, active)})
	case replaced:
		if newClusterOnChange(svc, o.ZeroDowntime) {
			nameNext(o, d)
		}
	}
}

// rebuilt is live with the spec, labels and annotations svc builds now, for an in-place update.
func rebuilt(svc *rayv1.RayService, live *rayv1.RayCluster) *rayv1.RayCluster {
	want := Cluster(svc, live.Name)
	out := live.DeepCopy()
	out.Spec = want.Spec
	out.Labels = want.Labels
	out.Annotations = want.Annotations
	if deadline, ok := live.Annotations[constants.AnnotationDeletionDeadline]; ok {
		out.Annotations[constants.AnnotationDeletionDeadline] = deadline
	}
	return out
}

// reconcileServe reads the Serve applications of the target cluster into its status, asks for serveConfigV2
// to be applied when that cluster has not accepted it (or shows no application: a head restarted without
// GCS fault tolerance), and reports whether the target cluster serves: at least one application, all
// RUNNING, with nothing left to apply.
func reconcileServe(o Observed, d *Decision) bool {
	svc, st := o.Service, &d.Status
	name := ServeTarget(withStatus(svc, st), o.Clusters, o.ZeroDowntime)
	for _, s := range []*rayv1.RayServiceStatus{&st.ActiveServiceStatus, &st.PendingServiceStatus} {
		if s.RayClusterName != name {
			s.Applications = nil // not read in this reconcile (the active cluster's, during an upgrade)
		}
	}
	target := statusOf(st, name)
	if target == nil || !podServes(headPod(o.Pods, name)) {
		return false
	}
	read, ok := o.Serve[name]
	if !ok {
		return false
	}
	if read.Err != nil {
		d.Events = append(d.Events, shared.Warning(EventFailedToGetServeApplications,
			fmt.Sprintf("Failed to read the Serve applications of RayCluster %s/%s: %v", svc.Namespace, name, read.Err)))
		return false
	}
	target.Applications = appStatuses(read.Details)
	if o.Applied[name] != svc.Spec.ServeConfigV2 || len(read.Details.Applications) == 0 {
		d.Actions = append(d.Actions, Action{Kind: ApplyServe, Name: name, Config: svc.Spec.ServeConfigV2})
		return false
	}
	for _, app := range read.Details.Applications {
		if app.Status != rayv1.ApplicationStatusEnum.RUNNING {
			return false
		}
	}
	return true
}

// withStatus is svc carrying st, for helpers that read the status being decided.
func withStatus(svc *rayv1.RayService, st *rayv1.RayServiceStatuses) *rayv1.RayService {
	out := *svc
	out.Status = *st
	return &out
}

// statusOf is the active or pending cluster status of st that names name, nil for none.
func statusOf(st *rayv1.RayServiceStatuses, name string) *rayv1.RayServiceStatus {
	switch {
	case name == "":
		return nil
	case st.PendingServiceStatus.RayClusterName == name:
		return &st.PendingServiceStatus
	case st.ActiveServiceStatus.RayClusterName == name:
		return &st.ActiveServiceStatus
	}
	return nil
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

// labelHeads sets the ray.io/serve label of the active and pending heads: "true" while the head's Serve
// proxy answers its health check, else "false" (always "false" with excludeHeadPodFromServeSvc).
func labelHeads(o Observed, d *Decision) {
	svc, st := o.Service, &d.Status
	for _, name := range []string{st.ActiveServiceStatus.RayClusterName, st.PendingServiceStatus.RayClusterName} {
		head := headPod(o.Pods, name)
		if head == nil || head.DeletionTimestamp != nil {
			continue
		}
		want := "false"
		if !svc.Spec.ExcludeHeadPodFromServeSvc && o.ProxyHealthy[head.Name] {
			want = "true"
		}
		if head.Labels[constants.LabelServe] != want {
			d.Actions = append(d.Actions, Action{Kind: LabelHead, Name: name, Pod: head, Value: want})
		}
	}
}

// reconcileServices points the RayService's Services at the cluster that serves. The first cluster gets
// them once its applications run; a pending cluster only once its applications run and at least one of its
// pods is a ready serve endpoint, so that the serve Service never goes from ready endpoints to none. Once
// both Services select the pending cluster, it becomes the active one.
func reconcileServices(o Observed, d *Decision, pendingReady bool) {
	svc, st := o.Service, &d.Status
	pending := o.Clusters[st.PendingServiceStatus.RayClusterName]
	active := o.Clusters[st.ActiveServiceStatus.RayClusterName]
	target := active
	if pending != nil && pendingReady && (active == nil || serveEndpoints(o.Pods, pending.Name) > 0) {
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

// deletionDelay is spec.rayClusterDeletionDelaySeconds, or DefaultDeletionDelay.
func deletionDelay(svc *rayv1.RayService) time.Duration {
	if s := svc.Spec.RayClusterDeletionDelaySeconds; s != nil && *s >= 0 {
		return time.Duration(*s) * time.Second
	}
	return DefaultDeletionDelay
}

// cleanUp gives every cluster of the RayService that is neither active nor pending a deletion deadline
// (stored on the cluster) and deletes it once the deadline passed; a cluster that serves again loses its
// deadline.
func cleanUp(o Observed, d *Decision) {
	st := &d.Status
	for _, name := range slices.Sorted(maps.Keys(o.Clusters)) {
		rc := o.Clusters[name]
		mark, marked := rc.Annotations[constants.AnnotationDeletionDeadline]
		if name == st.ActiveServiceStatus.RayClusterName || name == st.PendingServiceStatus.RayClusterName {
			if marked {
				d.Actions = append(d.Actions, Action{Kind: MarkCluster, Name: name, Cluster: rc})
			}
			continue
		}
		if rc.DeletionTimestamp != nil {
			continue
		}
		deadline, err := time.Parse(time.RFC3339, mark)
		if !marked || err != nil {
			deadline = o.Now.Add(deletionDelay(o.Service)).UTC().Truncate(time.Second)
			d.Actions = append(d.Actions, Action{Kind: MarkCluster, Name: name, Cluster: rc, Deadline: deadline})
		}
		if left := deadline.Sub(o.Now); left > 0 {
			d.wantRequeue(left)
			continue
		}
		d.Actions = append(d.Actions, Action{Kind: DeleteCluster, Name: name, Cluster: rc})
	}
}

// timedOut fails the RayService for good when it has been Initializing, with no serve endpoint, for longer
// than its ray.io/initializing-timeout: its clusters are let go (and deleted after the deletion delay),
// Ready is False with reason InitializingTimeout.
func timedOut(o Observed, d *Decision, endpoints int32) bool {
	svc, st := o.Service, &d.Status
	timeout, err := validation.InitializingTimeout(svc.Annotations)
	if err != nil || timeout <= 0 || endpoints > 0 {
		return false
	}
	since := svc.CreationTimestamp.Time
	if c := meta.FindStatusCondition(st.Conditions, string(rayv1.RayServiceReady)); c != nil {
		if c.Reason != string(rayv1.RayServiceInitializing) {
			return false
		}
		since = c.LastTransitionTime.Time
	}
	if left := since.Add(timeout).Sub(o.Now); left > 0 {
		d.wantRequeue(left)
		return false
	}
	st.ActiveServiceStatus, st.PendingServiceStatus = rayv1.RayServiceStatus{}, rayv1.RayServiceStatus{}
	msg := fmt.Sprintf("The RayService did not serve within its %s of %s; its clusters are released", constants.AnnotationInitializingTimeout, timeout)
	setCondition(st, svc, rayv1.RayServiceReady, metav1.ConditionFalse, rayv1.RayServiceInitializingTimeout, msg, o.Now)
	st.NumServeEndpoints, st.ServiceStatus = 0, rayv1.NotRunning
	d.Events = append(d.Events, shared.Warning(EventRayServiceInitializingTimeout, fmt.Sprintf("RayService %s/%s: %s", svc.Namespace, svc.Name, msg)))
	return true
}

// setConditions sets Ready (from the serve endpoints), UpgradeInProgress (from the clusters), the
// deprecated serviceStatus, numServeEndpoints, and the clusters' status copies.
func setConditions(o Observed, d *Decision, endpoints int32) {
	svc, st := o.Service, &d.Status
	for _, s := range []*rayv1.RayServiceStatus{&st.ActiveServiceStatus, &st.PendingServiceStatus} {
		if rc := o.Clusters[s.RayClusterName]; rc != nil {
			s.RayClusterStatus = *rc.Status.DeepCopy()
		} else {
			s.RayClusterStatus = rayv1.RayClusterStatus{}
		}
	}
	st.NumServeEndpoints = endpoints
	ready := meta.FindStatusCondition(st.Conditions, string(rayv1.RayServiceReady))
	switch {
	case endpoints > 0:
		setCondition(st, svc, rayv1.RayServiceReady, metav1.ConditionTrue, rayv1.NonZeroServeEndpoints, fmt.Sprintf("%d ready serve endpoints", endpoints), o.Now)
	case ready == nil || ready.Reason == string(rayv1.RayServiceInitializing):
		setCondition(st, svc, rayv1.RayServiceReady, metav1.ConditionFalse, rayv1.RayServiceInitializing, "Waiting for the first cluster to serve", o.Now)
	default:
		setCondition(st, svc, rayv1.RayServiceReady, metav1.ConditionFalse, rayv1.ZeroServeEndpoints, "The serve Service has no ready endpoint", o.Now)
	}
	st.ServiceStatus = rayv1.NotRunning
	if endpoints > 0 {
		st.ServiceStatus = rayv1.Running
	}
	active, pending := st.ActiveServiceStatus.RayClusterName, st.PendingServiceStatus.RayClusterName
	upgrade := meta.FindStatusCondition(st.Conditions, string(rayv1.UpgradeInProgress))
	switch {
	case active != "" && pending != "":
		setCondition(st, svc, rayv1.UpgradeInProgress, metav1.ConditionTrue, rayv1.BothActivePendingClustersExist, upgradeMessage(o, st), o.Now)
	case active != "":
		setCondition(st, svc, rayv1.UpgradeInProgress, metav1.ConditionFalse, rayv1.NoPendingCluster, "", o.Now)
	case upgrade == nil || upgrade.Reason == string(rayv1.RayServiceInitializing):
		setCondition(st, svc, rayv1.UpgradeInProgress, metav1.ConditionFalse, rayv1.RayServiceInitializing, "", o.Now)
	default:
		setCondition(st, svc, rayv1.UpgradeInProgress, metav1.ConditionUnknown, rayv1.NoActiveCluster, "", o.Now)
	}
}

// upgradeMessage says what the pending cluster still waits for before it takes the traffic.
func upgradeMessage(o Observed, st *rayv1.RayServiceStatuses) string {
	name := st.PendingServiceStatus.RayClusterName
	switch {
	case o.Clusters[name] == nil:
		return fmt.Sprintf("Creating RayCluster %s", name)
	case !podServes(headPod(o.Pods, name)):
		return fmt.Sprintf("Waiting for the head of RayCluster %s to be ready", name)
	case serveEndpoints(o.Pods, name) == 0:
		return fmt.Sprintf("Waiting for the Serve applications of RayCluster %s to run and for a ready serve endpoint on it", name)
	}
	return fmt.Sprintf("Waiting for the Serve applications of RayCluster %s to run", name)
}

// setCondition sets a condition of the RayService's status at svc's generation.
func setCondition(st *rayv1.RayServiceStatuses, svc *rayv1.RayService, t rayv1.RayServiceConditionType, status metav1.ConditionStatus, reason rayv1.RayServiceConditionReason, msg string, now time.Time) {
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: string(t), Status: status, Reason: string(reason), Message: msg,
		ObservedGeneration: svc.Generation, LastTransitionTime: metav1.NewTime(now.UTC().Truncate(time.Second)),
	})
}
