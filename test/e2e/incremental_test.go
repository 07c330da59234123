package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/internal/controller/rayservice"
	"github.com/kray-project/kray/pkg/constants"
)

// fakeGatewayClass is the class of KubeRay's incremental upgrade sample, served in the suite by
// playGatewayController.
const fakeGatewayClass = "istio"

// needGatewayAPI skips a test that needs the Gateway API's CRDs, which hack/e2e.sh installs.
func needGatewayAPI(t *testing.T) {
	t.Helper()
	if os.Getenv("KRAY_E2E_GATEWAY") == "" {
		t.Skip("needs the Gateway API's CRDs (hack/e2e.sh installs them)")
	}
}

// playGatewayController does in ns what a Gateway controller of fakeGatewayClass does with no data plane:
// its GatewayClass accepted, every Gateway of that class Accepted and Programmed, every HTTPRoute whose
// parent is such a Gateway Accepted with its references resolved (each backend Service exists). It stops
// with the test.
func playGatewayController(t *testing.T, ns string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	class := &gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: fakeGatewayClass},
		Spec: gwv1.GatewayClassSpec{ControllerName: "kray.io/e2e-gateway-controller"}}
	if err := k8s.Create(ctx, class); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create GatewayClass: %v", err)
	}
	accepted := func(gen int64, types ...string) []metav1.Condition {
		var out []metav1.Condition
		for _, typ := range types {
			out = append(out, metav1.Condition{Type: typ, Status: metav1.ConditionTrue, Reason: typ, ObservedGeneration: gen, LastTransitionTime: metav1.Now()})
		}
		return out
	}
	go func() {
		for ctx.Err() == nil {
			gws := &gwv1.GatewayList{}
			if k8s.List(ctx, gws, client.InNamespace(ns)) == nil {
				for i := range gws.Items {
					g := &gws.Items[i]
					if string(g.Spec.GatewayClassName) == fakeGatewayClass && !meta.IsStatusConditionTrue(g.Status.Conditions, "Programmed") {
						g.Status.Conditions = accepted(g.Generation, "Accepted", "Programmed")
						_ = k8s.Status().Update(ctx, g)
					}
				}
			}
			routes := &gwv1.HTTPRouteList{}
			if k8s.List(ctx, routes, client.InNamespace(ns)) == nil {
				for i := range routes.Items {
					r := &routes.Items[i]
					if len(r.Status.Parents) == 1 && r.Status.Parents[0].Conditions[0].ObservedGeneration == r.Generation {
						continue
					}
					r.Status.Parents = nil
					for _, p := range r.Spec.ParentRefs {
						r.Status.Parents = append(r.Status.Parents, gwv1.RouteParentStatus{ParentRef: p,
							ControllerName: class.Spec.ControllerName, Conditions: accepted(r.Generation, "Accepted", "ResolvedRefs")})
					}
					_ = k8s.Status().Update(ctx, r)
				}
			}
			time.Sleep(200 * time.Millisecond)
		}
	}()
}

// split is one status of a RayService during an incremental upgrade.
type split struct {
	ActiveCapacity, PendingCapacity int32
	ActiveTraffic, PendingTraffic   int32
	Pending                         string
}

// splitWatch records, from a watch started before the test acts, every status a RayService was written
// with and every weight pair its HTTPRoute had.
type splitWatch struct {
	mu      sync.Mutex
	splits  []split
	weights [][]int32
}

func watchSplits(t *testing.T, svc *rayv1.RayService) *splitWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	s := &splitWatch{}
	services, err := watcher.Watch(ctx, &rayv1.RayServiceList{}, client.InNamespace(svc.Namespace))
	if err != nil {
		t.Fatal(err)
	}
	routes, err := watcher.Watch(ctx, &gwv1.HTTPRouteList{}, client.InNamespace(svc.Namespace))
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for e := range services.ResultChan() {
			cur, ok := e.Object.(*rayv1.RayService)
			if !ok || e.Type == watch.Deleted || cur.Name != svc.Name {
				continue
			}
			a, p := cur.Status.ActiveServiceStatus, cur.Status.PendingServiceStatus
			sp := split{ptr.Deref(a.TargetCapacity, 100), ptr.Deref(p.TargetCapacity, 0), ptr.Deref(a.TrafficRoutedPercent, 100), ptr.Deref(p.TrafficRoutedPercent, 0), p.RayClusterName}
			s.mu.Lock()
			s.splits = append(s.splits, sp)
			s.mu.Unlock()
		}
	}()
	go func() {
		for e := range routes.ResultChan() {
			r, ok := e.Object.(*gwv1.HTTPRoute)
			if !ok || e.Type == watch.Deleted || len(r.Spec.Rules) == 0 {
				continue
			}
			var w []int32
			for _, b := range r.Spec.Rules[0].BackendRefs {
				w = append(w, ptr.Deref(b.Weight, 1))
			}
			s.mu.Lock()
			if n := len(s.weights); n == 0 || fmt.Sprint(s.weights[n-1]) != fmt.Sprint(w) {
				s.weights = append(s.weights, w)
			}
			s.mu.Unlock()
		}
	}()
	return s
}

func (s *splitWatch) seen() ([]split, [][]int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]split(nil), s.splits...), append([][]int32(nil), s.weights...)
}

// httpRoute reads the RayService's HTTPRoute.
func httpRoute(g Gomega, svc *rayv1.RayService) *gwv1.HTTPRoute {
	r := &gwv1.HTTPRoute{}
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: svc.Namespace, Name: rayservice.HTTPRouteName(svc)}, r)).To(Succeed())
	return r
}

// incrementalSample is KubeRay v1.7's incremental upgrade sample in ns, its clusters deleted as soon as they
// no longer serve, with its interval and (when not 0) surge and step set as given.
func incrementalSample(t *testing.T, ns string, interval, surge, step int32) *rayv1.RayService {
	t.Helper()
	svc := kubeRayServiceSample(t, "ray-service.incremental-upgrade.yaml", ns)
	svc.Spec.RayClusterDeletionDelaySeconds = ptr.To[int32](0)
	o := svc.Spec.UpgradeStrategy.ClusterUpgradeOptions
	o.IntervalSeconds = ptr.To(interval)
	if surge > 0 {
		o.MaxSurgePercent, o.StepSizePercent = ptr.To(surge), ptr.To(step)
	}
	return svc
}

// KubeRay v1.7's ray-service.incremental-upgrade.yaml (stepSizePercent 10, maxSurgePercent 10; its
// intervalSeconds of 30 cut to 1) upgrades incrementally through its Gateway: the HTTPRoute moves the
// traffic 10 points at a time to the new cluster, never more than its Serve target capacity, which rises 10
// points at a time while the two capacities never add up to more than 110; the operator SIGKILLed at three
// points resumes each time from the stored state without a second new cluster, and never puts the new
// serveConfigV2 on the old cluster; at the end the new cluster has all the traffic, the head Service, and the
// old cluster is gone.
func TestRayServiceIncrementalUpgrade(t *testing.T) {
	needFakeDashboard(t)
	needGatewayAPI(t)
	g := NewWithT(t)
	ns := namespace(t)
	playGatewayController(t, ns)
	clusters := watchCreations(t, ns, &rayv1.RayClusterList{})
	svc := createService(t, incrementalSample(t, ns, 1, 0, 0))
	old := waitServing(t, svc).Status.ActiveServiceStatus.RayClusterName
	g.Eventually(func(g Gomega) {
		refs := httpRoute(g, svc).Spec.Rules[0].BackendRefs
		g.Expect(refs).To(HaveLen(1))
		g.Expect(string(refs[0].Name)).To(Equal(old + "-serve-svc"))
		g.Expect(*refs[0].Weight).To(BeEquivalentTo(100))
	}, serviceTimeout, poll).Should(Succeed())
	g.Expect(dash.serve.capacities(ns, old)).To(ContainElement(100.0), "the first cluster is put at target capacity 100")

	splits := watchSplits(t, svc)
	oldConfig := svc.Spec.ServeConfigV2
	newConfig := strings.Replace(oldConfig, "price: 4", "price: 5", 1)
	g.Expect(newConfig).NotTo(Equal(oldConfig))
	updateService(t, svc, func(s *rayv1.RayService) {
		s.Spec.RayClusterSpec.WorkerGroupSpecs[0].Template.Spec.Containers[0].Image = "rayproject/ray:2.52.0"
		s.Spec.ServeConfigV2 = newConfig
	})
	t.Cleanup(func() { hack(t, "operator.sh", "start") })
	// The operator SIGKILLed at several steps of the upgrade: each new one knows what each cluster runs only
	// from what the last one recorded.
	for _, at := range []int32{20, 50, 80} {
		g.Eventually(func(g Gomega) {
			st := getService(g, svc).Status
			g.Expect(ptr.Deref(st.PendingServiceStatus.TrafficRoutedPercent, 0)).To(BeNumerically(">=", at))
		}, serviceTimeout, poll).Should(Succeed())
		hack(t, "operator.sh", "kill")
		hack(t, "operator.sh", "start")
	}

	var cur *rayv1.RayService
	g.Eventually(func(g Gomega) {
		cur = getService(g, svc)
		g.Expect(cur.Status.ActiveServiceStatus.RayClusterName).NotTo(Equal(old))
		g.Expect(cur.Status.PendingServiceStatus.RayClusterName).To(BeEmpty())
	}, 3*serviceTimeout, poll).Should(Succeed())
	next := cur.Status.ActiveServiceStatus.RayClusterName
	g.Expect(clusters.created()).To(ConsistOf(old, next), "exactly one new cluster, across the SIGKILL")

	seen, weights := splits.seen()
	var traffic []int32
	for _, s := range seen {
		g.Expect(s.ActiveCapacity+s.PendingCapacity).To(BeNumerically("<=", 110), "target capacities %+v add up to more than 100 + maxSurgePercent", s)
		if s.Pending != "" {
			g.Expect(s.PendingTraffic).To(BeNumerically("<=", s.PendingCapacity), "traffic above the new cluster's capacity: %+v", s)
			if n := len(traffic); n == 0 || traffic[n-1] != s.PendingTraffic {
				traffic = append(traffic, s.PendingTraffic)
			}
		}
	}
	for i := 1; i < len(traffic); i++ {
		g.Expect(traffic[i]-traffic[i-1]).To(BeElementOf(int32(10)), "the new cluster's traffic moved %v", traffic)
	}
	g.Expect(traffic).To(ContainElement(int32(90)), "the new cluster's traffic before its promotion (at 100 it is the active one)")
	g.Expect(ptr.Deref(cur.Status.ActiveServiceStatus.TrafficRoutedPercent, 0)).To(BeEquivalentTo(100))
	g.Expect(ptr.Deref(cur.Status.ActiveServiceStatus.TargetCapacity, 0)).To(BeEquivalentTo(100))
	for _, w := range weights {
		if len(w) == 2 {
			g.Expect(w[0]+w[1]).To(BeEquivalentTo(100), "route weights %v", weights)
		}
	}
	g.Expect(distinct(dash.serve.capacities(ns, next))).To(Equal(steps(0, 100, 10)), "the new cluster's target capacities put")
	g.Expect(distinct(dash.serve.capacities(ns, old))).To(Equal(steps(100, 0, 10)), "the old cluster's target capacities put")
	for _, put := range dash.serve.puts(ns, old) {
		g.Expect(put).NotTo(ContainSubstring(`"price":5`), "the old cluster was put the new config: %s", put)
	}
	for _, put := range dash.serve.puts(ns, next) {
		g.Expect(put).To(ContainSubstring(`"price":5`), "the new cluster was put another config: %s", put)
	}

	g.Eventually(func(g Gomega) {
		refs := httpRoute(g, svc).Spec.Rules[0].BackendRefs
		g.Expect(refs).To(HaveLen(1))
		g.Expect(string(refs[0].Name)).To(Equal(next + "-serve-svc"))
		expectServesFrom(g, svc, svc.Name+"-serve-svc", next)
		err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: old}, &rayv1.RayCluster{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the old cluster: %v", err)
	}, serviceTimeout, poll).Should(Succeed())
	g.Expect(serviceCondition(cur, rayv1.UpgradeInProgress).Status).To(Equal(metav1.ConditionFalse))
}

// steps is from, from+-step, ..., to.
func steps(from, to, step float64) []float64 {
	out := []float64{from}
	for c := from; c != to; {
		if to > from {
			c += step
		} else {
			c -= step
		}
		out = append(out, c)
	}
	return out
}

// distinct is s without repeats of the previous value (a config put again at the same capacity after a
// restart).
func distinct(s []float64) []float64 {
	var out []float64
	for _, v := range s {
		if len(out) == 0 || out[len(out)-1] != v {
			out = append(out, v)
		}
	}
	return out
}

// A spec that goes back mid-upgrade rolls back (RollbackInProgress, KubeRay's reason and words): the traffic
// and the capacities return to the old cluster, which never stopped serving, and the new one is deleted.
// Invalid options are refused with KubeRay's words, and nothing is made; a Gateway of the RayService's name
// that it does not own is never taken over.
func TestRayServiceIncrementalRollbackAndBadInput(t *testing.T) {
	t.Parallel()
	needFakeDashboard(t)
	needGatewayAPI(t)
	g := NewWithT(t)
	ns := namespace(t)
	playGatewayController(t, ns)

	bad := incrementalSample(t, ns, 1, 20, 30)
	bad.Name = "bad"
	bad = createService(t, bad)
	g.Eventually(func(g Gomega) {
		ready := serviceCondition(getService(g, bad), rayv1.RayServiceReady)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Reason).To(Equal(string(rayv1.RayServiceValidationFailed)))
		g.Expect(ready.Message).To(ContainSubstring("stepSizePercent must be less than or equal to maxSurgePercent"))
	}, serviceTimeout, poll).Should(Succeed())

	svc := incrementalSample(t, ns, 1, 50, 50)
	foreign := &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Name: svc.Name + "-gateway", Namespace: ns},
		Spec: gwv1.GatewaySpec{GatewayClassName: "someone-elses", Listeners: []gwv1.Listener{{Name: "https", Protocol: gwv1.HTTPSProtocolType, Port: 443}}}}
	g.Expect(k8s.Create(context.Background(), foreign)).To(Succeed())
	svc = createService(t, svc)
	old := waitServing(t, svc).Status.ActiveServiceStatus.RayClusterName
	g.Eventually(func(g Gomega) []string {
		return eventMessages(g, svc, rayservice.EventFailedToCreateGateway)
	}, serviceTimeout, poll).Should(ContainElement(ContainSubstring("is not controlled by RayService")))
	g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(foreign), foreign)).To(Succeed())
	g.Expect(string(foreign.Spec.GatewayClassName)).To(Equal("someone-elses"), "the foreign Gateway was changed")
	g.Expect(k8s.Delete(context.Background(), foreign)).To(Succeed())
	g.Eventually(func(g Gomega) { g.Expect(httpRoute(g, svc).Spec.Rules[0].BackendRefs).To(HaveLen(1)) }, serviceTimeout, poll).Should(Succeed())

	updateService(t, svc, func(s *rayv1.RayService) { s.Spec.RayClusterSpec.RayVersion = "2.52.0" })
	var pending string
	g.Eventually(func(g Gomega) {
		st := getService(g, svc).Status
		pending = st.PendingServiceStatus.RayClusterName
		g.Expect(ptr.Deref(st.PendingServiceStatus.TrafficRoutedPercent, 0)).To(BeEquivalentTo(50))
	}, serviceTimeout, poll).Should(Succeed())
	updateService(t, svc, func(s *rayv1.RayService) { s.Spec.RayClusterSpec.RayVersion = "2.51.0" })
	g.Eventually(func(g Gomega) {
		c := serviceCondition(getService(g, svc), rayv1.RollbackInProgress)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Reason).To(Equal(string(rayv1.DesiredClusterSpecChanged)))
		g.Expect(c.Message).To(Equal("Goal state reverted to original cluster, rolling back."))
	}, serviceTimeout, poll).Should(Succeed())
	g.Eventually(func(g Gomega) {
		cur := getService(g, svc)
		g.Expect(cur.Status.PendingServiceStatus.RayClusterName).To(BeEmpty())
		g.Expect(cur.Status.ActiveServiceStatus.RayClusterName).To(Equal(old))
		g.Expect(serviceCondition(cur, rayv1.RollbackInProgress)).To(BeNil())
		refs := httpRoute(g, svc).Spec.Rules[0].BackendRefs
		g.Expect(refs).To(HaveLen(1))
		g.Expect(string(refs[0].Name)).To(Equal(old + "-serve-svc"))
		err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: pending}, &rayv1.RayCluster{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the rolled-back cluster: %v", err)
	}, serviceTimeout, poll).Should(Succeed())
	caps := dash.serve.capacities(ns, old)
	g.Expect(caps[len(caps)-1]).To(Equal(100.0), "the old cluster's target capacities %v", caps)
}

// upgradeFootprint records, from watches started before an upgrade, the most pods that existed at once in a
// namespace and the fewest and most ready endpoints behind a RayService's traffic entry point, counted over
// the EndpointSlices of the Services counts selects.
type upgradeFootprint struct {
	mu                     sync.Mutex
	pods                   map[string]bool
	ready                  map[string]int // per EndpointSlice
	service                map[string]string
	counts                 func(service string) bool
	mostPods               int
	fewestReady, mostReady int
}

func watchFootprint(t *testing.T, ns string, counts func(service string) bool) *upgradeFootprint {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	f := &upgradeFootprint{pods: map[string]bool{}, ready: map[string]int{}, service: map[string]string{}, counts: counts, fewestReady: -1}
	pods, err := watcher.Watch(ctx, &corev1.PodList{}, client.InNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	slices, err := watcher.Watch(ctx, &discoveryv1.EndpointSliceList{}, client.InNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for e := range pods.ResultChan() {
			p, ok := e.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			f.mu.Lock()
			if e.Type == watch.Deleted {
				delete(f.pods, p.Name)
			} else {
				f.pods[p.Name] = true
			}
			f.mostPods = max(f.mostPods, len(f.pods))
			f.mu.Unlock()
		}
	}()
	go func() {
		for e := range slices.ResultChan() {
			s, ok := e.Object.(*discoveryv1.EndpointSlice)
			if !ok {
				continue
			}
			n := 0
			for _, ep := range s.Endpoints {
				if ptr.Deref(ep.Conditions.Ready, false) {
					n++
				}
			}
			if e.Type == watch.Deleted {
				n = 0
			}
			f.mu.Lock()
			f.ready[s.Name], f.service[s.Name] = n, s.Labels[discoveryv1.LabelServiceName]
			total := 0
			for name, v := range f.ready {
				if f.counts(f.service[name]) {
					total += v
				}
			}
			if f.fewestReady < 0 || total < f.fewestReady {
				f.fewestReady = total
			}
			f.mostReady = max(f.mostReady, total)
			f.mu.Unlock()
		}
	}()
	return f
}

// start forgets what was seen before the upgrade, keeping the pods and endpoints there are now.
func (f *upgradeFootprint) start() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mostPods, f.fewestReady, f.mostReady = len(f.pods), -1, 0
	total := 0
	for name, v := range f.ready {
		if f.counts(f.service[name]) {
			total += v
		}
	}
	f.fewestReady, f.mostReady = total, total
}

func (f *upgradeFootprint) bounds() (mostPods, fewestReady, mostReady int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mostPods, f.fewestReady, f.mostReady
}

// The three ways a RayService takes a worker image change, measured on the same RayService (KubeRay's
// ray-service.sample.yaml with 3 workers, the autoscaler on): the most pods at once and the fewest and most
// ready endpoints behind the traffic entry point (the serve Service; for the incremental upgrade the route's
// backends) from the edit until the upgrade is over. The figures are logged for docs/upgrades.md; the test
// holds each strategy to what it promises.
func TestRayServiceUpgradeStrategiesMeasured(t *testing.T) {
	t.Parallel()
	needFakeDashboard(t)
	needFakeGCS(t)
	needGatewayAPI(t)
	for _, strategy := range []string{"NewCluster", "NewClusterWithIncrementalUpgrade", "in place"} {
		t.Run(strings.ReplaceAll(strategy, " ", "-"), func(t *testing.T) {
			g := NewWithT(t)
			ns := namespace(t)
			svc := kubeRayServiceSample(t, "ray-service.sample.yaml", ns)
			svc.Spec.RayClusterDeletionDelaySeconds = ptr.To[int32](0)
			svc.Spec.RayClusterSpec.EnableInTreeAutoscaling = ptr.To(true)
			w := &svc.Spec.RayClusterSpec.WorkerGroupSpecs[0]
			w.Replicas, w.MinReplicas, w.MaxReplicas = ptr.To[int32](3), ptr.To[int32](3), ptr.To[int32](5)
			counts := func(s string) bool { return s == svc.Name+"-serve-svc" }
			switch strategy {
			case "NewCluster":
				svc.Spec.UpgradeStrategy = &rayv1.RayServiceUpgradeStrategy{Type: ptr.To(rayv1.RayServiceNewCluster)}
			case "NewClusterWithIncrementalUpgrade":
				playGatewayController(t, ns)
				svc.Spec.UpgradeStrategy = &rayv1.RayServiceUpgradeStrategy{Type: ptr.To(rayv1.RayServiceNewClusterWithIncrementalUpgrade),
					ClusterUpgradeOptions: &rayv1.ClusterUpgradeOptions{MaxSurgePercent: ptr.To[int32](50), StepSizePercent: ptr.To[int32](50),
						IntervalSeconds: ptr.To[int32](1), GatewayClassName: fakeGatewayClass}}
				counts = func(s string) bool { return s != svc.Name+"-serve-svc" && strings.HasSuffix(s, "-serve-svc") }
			case "in place":
				svc.Annotations = map[string]string{constants.AnnotationInPlaceWorkerUpgrade: "true"}
				svc.Spec.RayClusterSpec.WorkerDrain = &rayv1.WorkerDrainOptions{TimeoutSeconds: ptr.To[int32](60)}
				gcs.setDrainTime(ns, 300*time.Millisecond)
			}
			f := watchFootprint(t, ns, counts)
			svc = createService(t, svc)
			old := waitServing(t, svc).Status.ActiveServiceStatus.RayClusterName
			rc := &rayv1.RayCluster{}
			g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: old}, rc)).To(Succeed())
			waitReady(t, rc, 3)
			g.Eventually(func() int { _, _, most := f.bounds(); return most }, serviceTimeout, poll).Should(BeNumerically(">=", 3))
			f.start()
			updateService(t, svc, func(s *rayv1.RayService) {
				s.Spec.RayClusterSpec.WorkerGroupSpecs[0].Template.Spec.Containers[0].Image = newImage
			})
			g.Eventually(func(g Gomega) {
				cur := getService(g, svc)
				g.Expect(cur.Status.PendingServiceStatus.RayClusterName).To(BeEmpty())
				active := &rayv1.RayCluster{}
				g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: cur.Status.ActiveServiceStatus.RayClusterName}, active)).To(Succeed())
				if strategy == "in place" {
					expectRolled(g, active, w.GroupName, 3)
				} else {
					g.Expect(active.Name).NotTo(Equal(old))
					err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: old}, &rayv1.RayCluster{})
					g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the old cluster: %v", err)
				}
			}, 2*serviceTimeout, poll).Should(Succeed())
			mostPods, fewestReady, mostReady := f.bounds()
			t.Logf("%s: at most %d pods at once; %d to %d ready serve endpoints", strategy, mostPods, fewestReady, mostReady)
			g.Expect(fewestReady).To(BeNumerically(">=", 3), "ready serve endpoints fell below the workers' replicas")
			if strategy == "in place" {
				g.Expect(mostPods).To(Equal(1+3+1), "in place: the head, 3 workers and the one surge worker")
			} else {
				g.Expect(mostPods).To(Equal(2*(1+3)), "a second cluster: head and 3 workers")
			}
		})
	}
}
