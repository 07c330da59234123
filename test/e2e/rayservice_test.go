package e2e

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
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

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/internal/controller/rayservice"
	"github.com/kray-project/kray/pkg/constants"
)

// serviceTimeout bounds a RayService's way to serving: a cluster, its pods, a Serve deploy and two polls.
const serviceTimeout = 2 * time.Minute

// kubeRayServiceSample is the RayService of KubeRay's sample file, placed in ns.
func kubeRayServiceSample(t *testing.T, file, ns string) *rayv1.RayService {
	t.Helper()
	return kubeRaySample(t, file, ns, &rayv1.RayService{})
}

func createService(t *testing.T, svc *rayv1.RayService) *rayv1.RayService {
	t.Helper()
	if err := k8s.Create(context.Background(), svc); err != nil {
		t.Fatalf("create RayService %s: %v", svc.Name, err)
	}
	return svc
}

func getService(g Gomega, svc *rayv1.RayService) *rayv1.RayService {
	cur := &rayv1.RayService{}
	g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(svc), cur)).To(Succeed())
	return cur
}

// updateService applies mutate to the stored RayService, retrying on conflict.
func updateService(t *testing.T, svc *rayv1.RayService, mutate func(*rayv1.RayService)) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		cur := getService(g, svc)
		mutate(cur)
		g.Expect(k8s.Update(context.Background(), cur)).To(Succeed())
	}, 10*time.Second, poll).Should(Succeed())
}

// serviceCondition is the RayService's condition of type t, nil when absent.
func serviceCondition(svc *rayv1.RayService, t rayv1.RayServiceConditionType) *metav1.Condition {
	return meta.FindStatusCondition(svc.Status.Conditions, string(t))
}

// waitServing waits until svc is Ready with no upgrade in progress, its active cluster named and every
// application RUNNING, and returns it.
func waitServing(t *testing.T, svc *rayv1.RayService) *rayv1.RayService {
	t.Helper()
	var cur *rayv1.RayService
	NewWithT(t).Eventually(func(g Gomega) {
		cur = getService(g, svc)
		ready := serviceCondition(cur, rayv1.RayServiceReady)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Status).To(Equal(metav1.ConditionTrue), "%s: %s", ready.Reason, ready.Message)
		g.Expect(cur.Status.PendingServiceStatus.RayClusterName).To(BeEmpty(), "upgrade in progress")
		g.Expect(cur.Status.ActiveServiceStatus.Applications).NotTo(BeEmpty())
		for name, app := range cur.Status.ActiveServiceStatus.Applications {
			g.Expect(app.Status).To(Equal("RUNNING"), "application %s", name)
		}
	}, serviceTimeout, poll).Should(Succeed())
	return cur
}

// serviceObj reads the Service name in ns.
func serviceObj(g Gomega, ns, name string) *corev1.Service {
	s := &corev1.Service{}
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, s)).To(Succeed())
	return s
}

// expectServesFrom checks that both Services of svc select cluster.
func expectServesFrom(g Gomega, svc *rayv1.RayService, serveName, cluster string) {
	head := serviceObj(g, svc.Namespace, svc.Name+"-head-svc")
	g.Expect(head.Spec.Selector).To(HaveKeyWithValue(constants.LabelCluster, cluster))
	g.Expect(head.Spec.Selector).To(HaveKeyWithValue(constants.LabelNodeType, constants.NodeTypeHead))
	serve := serviceObj(g, svc.Namespace, serveName)
	g.Expect(serve.Spec.Selector).To(Equal(map[string]string{constants.LabelCluster: cluster, constants.LabelServe: "true"}))
}

// KubeRay's RayService samples that need no real Ray runtime serve on kray against the fake Serve API:
// Ready, each on exactly one RayCluster with one Serve config put, and both Services on it.
func TestKubeRayRayServiceSamplesServe(t *testing.T) {
	t.Parallel()
	needFakeDashboard(t)
	for _, tc := range []struct {
		file, serveService string
		port               int32
	}{
		{"ray-service.sample.yaml", "rayservice-sample-serve-svc", 8000},
		{"ray-service.different-port.yaml", "rayservice-sample-serve-svc", 9000},
		{"ray-service.custom-serve-service.yaml", "custom-ray-serve-service-name", 8000},
		{"ray-service.no-ray-serve-replica.yaml", "rayservice-no-ray-serve-replica-serve-svc", 8000},
	} {
		t.Run(tc.file, func(t *testing.T) {
			g := NewWithT(t)
			ns := namespace(t)
			clusters := watchCreations(t, ns, &rayv1.RayClusterList{})
			svc := createService(t, kubeRayServiceSample(t, tc.file, ns))
			cur := waitServing(t, svc)
			active := cur.Status.ActiveServiceStatus.RayClusterName
			g.Expect(clusters.created()).To(ConsistOf(active), "one cluster")
			g.Expect(dash.serve.puts(ns, active)).To(HaveLen(1), "one Serve config put")
			expectServesFrom(g, svc, tc.serveService, active)
			serve := serviceObj(g, ns, tc.serveService)
			g.Expect(serve.Spec.Ports).To(HaveLen(1))
			g.Expect(serve.Spec.Ports[0].Name).To(Equal("serve"))
			g.Expect(serve.Spec.Ports[0].Port).To(Equal(tc.port))
			g.Expect(cur.Status.NumServeEndpoints).To(BeNumerically(">", 0))
			g.Expect(cur.Status.ServiceStatus).To(Equal(rayv1.Running))
			g.Expect(cur.Status.ObservedGeneration).To(Equal(cur.Generation))
		})
	}
}

// The head's ray.io/serve label follows its Serve proxy's health check; edits reach the cluster as KubeRay's
// do: a serve-only edit is one more Serve config put on the same cluster, a replicas-only edit changes no
// cluster and puts nothing, and a head restart that empties Serve gets the config put once more.
func TestRayServiceEditsAndHeadRestart(t *testing.T) {
	t.Parallel()
	needFakeDashboard(t)
	g := NewWithT(t)
	ns := namespace(t)
	clusters := watchCreations(t, ns, &rayv1.RayClusterList{})
	svc := createService(t, kubeRayServiceSample(t, "ray-service.sample.yaml", ns))
	active := waitServing(t, svc).Status.ActiveServiceStatus.RayClusterName
	head := active + "-head-0"
	g.Eventually(func(g Gomega) {
		p := &corev1.Pod{}
		g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: head}, p)).To(Succeed())
		g.Expect(p.Labels).To(HaveKeyWithValue(constants.LabelServe, "true"))
	}, serviceTimeout, poll).Should(Succeed(), "the healthy head serves")
	dash.serve.setSick(ns, head, true)
	g.Eventually(func(g Gomega) {
		p := &corev1.Pod{}
		g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: head}, p)).To(Succeed())
		g.Expect(p.Labels).To(HaveKeyWithValue(constants.LabelServe, "false"))
	}, serviceTimeout, poll).Should(Succeed(), "a head whose proxy fails its check leaves the serve Service")
	dash.serve.setSick(ns, head, false)

	updateService(t, svc, func(s *rayv1.RayService) {
		s.Spec.ServeConfigV2 = strings.Replace(s.Spec.ServeConfigV2, "price: 3", "price: 4", 1)
	})
	g.Eventually(func() []string { return dash.serve.puts(ns, active) }, serviceTimeout, poll).Should(HaveLen(2), "the serve-only edit is put")
	g.Expect(dash.serve.puts(ns, active)[1]).To(ContainSubstring(`"price":4`))
	waitServing(t, svc)

	updateService(t, svc, func(s *rayv1.RayService) {
		s.Spec.RayClusterSpec.WorkerGroupSpecs[0].Replicas = ptr.To[int32](3)
	})
	g.Consistently(func(g Gomega) {
		cur := getService(g, svc)
		g.Expect(cur.Status.PendingServiceStatus.RayClusterName).To(BeEmpty())
		g.Expect(cur.Status.ActiveServiceStatus.RayClusterName).To(Equal(active))
	}, 5*time.Second, poll).Should(Succeed(), "a replicas-only edit prepares no cluster")
	g.Expect(dash.serve.puts(ns, active)).To(HaveLen(2), "nor puts a config")

	dash.serve.setDown(ns, active, true)
	g.Eventually(func(g Gomega) int32 {
		list, err := clientset.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		var n int32
		for _, e := range list.Items {
			if e.InvolvedObject.Name == svc.Name && e.Reason == rayservice.EventFailedToGetServeApplications {
				n++
			}
		}
		return n
	}, serviceTimeout, poll).Should(BeNumerically(">=", 1), "an unreadable Serve API is reported")
	g.Expect(serviceCondition(getService(g, svc), rayv1.RayServiceReady).Status).To(Equal(metav1.ConditionTrue), "the pods still serve")
	dash.serve.setDown(ns, active, false)

	dash.serve.restartHead(ns, active)
	g.Eventually(func() []string { return dash.serve.puts(ns, active) }, serviceTimeout, poll).Should(HaveLen(3), "an emptied Serve gets the config again")
	waitServing(t, svc)
	g.Consistently(func() []string { return dash.serve.puts(ns, active) }, 5*time.Second, poll).Should(HaveLen(3), "once")
	g.Expect(clusters.created()).To(ConsistOf(active))
}

// With excludeHeadPodFromServeSvc the head's proxy is never probed and its label stays "false": the serve
// Service sends traffic to the workers only.
func TestRayServiceExcludesTheHead(t *testing.T) {
	t.Parallel()
	needFakeDashboard(t)
	g := NewWithT(t)
	ns := namespace(t)
	sample := kubeRayServiceSample(t, "ray-service.sample.yaml", ns)
	sample.Spec.ExcludeHeadPodFromServeSvc = true
	svc := createService(t, sample)
	cur := waitServing(t, svc)
	active := cur.Status.ActiveServiceStatus.RayClusterName
	p := &corev1.Pod{}
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: active + "-head-0"}, p)).To(Succeed())
	g.Expect(p.Labels).To(HaveKeyWithValue(constants.LabelServe, "false"))
	g.Expect(dash.serve.probed(ns, p.Name)).To(BeZero())
	workers := int32(len(workerPodsOf(g, ns, active)))
	g.Expect(workers).To(BeNumerically(">", 0))
	g.Expect(cur.Status.NumServeEndpoints).To(Equal(workers))
}

// workerPodsOf lists the worker pods of the cluster named cluster in ns.
func workerPodsOf(g Gomega, ns, cluster string) []corev1.Pod {
	list := &corev1.PodList{}
	g.Expect(k8s.List(context.Background(), list, client.InNamespace(ns),
		client.MatchingLabels{constants.LabelCluster: cluster, constants.LabelNodeType: constants.NodeTypeWorker})).To(Succeed())
	return list.Items
}

// endpointWatch follows the ready endpoints of a Service's EndpointSlices, and remembers whether they ever
// went to zero after they first were above it.
type endpointWatch struct {
	mu      sync.Mutex
	ready   map[string]int // per EndpointSlice
	seen    bool
	dropped []string
}

// watchEndpoints starts an endpointWatch on the Service name in ns.
func watchEndpoints(t *testing.T, ns, name string) *endpointWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := watcher.Watch(ctx, &discoveryv1.EndpointSliceList{}, client.InNamespace(ns), client.MatchingLabels{discoveryv1.LabelServiceName: name})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	e := &endpointWatch{ready: map[string]int{}}
	t.Cleanup(func() { cancel(); w.Stop() })
	go func() {
		for ev := range w.ResultChan() {
			slice, ok := ev.Object.(*discoveryv1.EndpointSlice)
			if !ok {
				continue
			}
			n := 0
			for _, ep := range slice.Endpoints {
				if ptr.Deref(ep.Conditions.Ready, false) {
					n++
				}
			}
			e.mu.Lock()
			if ev.Type == watch.Deleted {
				n = 0
			}
			e.ready[slice.Name] = n
			total := 0
			for _, v := range e.ready {
				total += v
			}
			if total > 0 {
				e.seen = true
			} else if e.seen {
				e.dropped = append(e.dropped, time.Now().Format(time.RFC3339Nano)+" "+string(ev.Type)+" "+slice.Name)
			}
			e.mu.Unlock()
		}
	}()
	return e
}

// sawReady reports whether the Service had a ready endpoint at some point.
func (e *endpointWatch) sawReady() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.seen
}

// drops returns when the Service went from ready endpoints to none.
func (e *endpointWatch) drops() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.dropped...)
}

// An upgrade end to end: a changed cluster spec prepares exactly one new cluster, the Services switch to it
// once it serves, the serve Service never goes without ready endpoints, Ready stays True, and the old
// cluster is deleted after rayClusterDeletionDelaySeconds.
func TestRayServiceUpgrade(t *testing.T) {
	t.Parallel()
	needFakeDashboard(t)
	g := NewWithT(t)
	ns := namespace(t)
	clusters := watchCreations(t, ns, &rayv1.RayClusterList{})
	sample := kubeRayServiceSample(t, "ray-service.sample.yaml", ns)
	sample.Spec.RayClusterDeletionDelaySeconds = ptr.To[int32](3)
	svc := createService(t, sample)
	old := waitServing(t, svc).Status.ActiveServiceStatus.RayClusterName
	endpoints := watchEndpoints(t, ns, svc.Name+"-serve-svc")
	g.Eventually(endpoints.sawReady, serviceTimeout, poll).Should(BeTrue())

	updateService(t, svc, func(s *rayv1.RayService) {
		s.Spec.RayClusterSpec.HeadGroupSpec.Template.Spec.Containers[0].Image = "rayproject/ray:2.47.0"
		s.Spec.RayClusterSpec.WorkerGroupSpecs[0].Template.Spec.Containers[0].Image = "rayproject/ray:2.47.0"
	})
	var pending string
	g.Eventually(func(g Gomega) {
		cur := getService(g, svc)
		pending = cur.Status.PendingServiceStatus.RayClusterName
		g.Expect(pending).NotTo(BeEmpty())
		g.Expect(serviceCondition(cur, rayv1.UpgradeInProgress).Status).To(Equal(metav1.ConditionTrue))
		g.Expect(serviceCondition(cur, rayv1.RayServiceReady).Status).To(Equal(metav1.ConditionTrue), "the old cluster serves meanwhile")
	}, serviceTimeout, poll).Should(Succeed())
	cur := waitServing(t, svc)
	g.Expect(cur.Status.ActiveServiceStatus.RayClusterName).To(Equal(pending))
	expectServesFrom(g, svc, svc.Name+"-serve-svc", pending)
	g.Eventually(func(g Gomega) {
		err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: old}, &rayv1.RayCluster{})
		g.Expect(err).To(HaveOccurred())
	}, serviceTimeout, poll).Should(Succeed(), "the old cluster is deleted after the delay")
	g.Expect(clusters.created()).To(ConsistOf(old, pending), "exactly one new cluster")
	g.Expect(endpoints.drops()).To(BeEmpty(), "moments the serve Service had no ready endpoint")
}

// A pending cluster whose applications never run never takes the traffic: the active cluster keeps serving
// and Ready stays True. A second edit replaces it with a new cluster, which takes over; the failed one goes.
func TestRayServiceUpgradeThatNeverServesIsReplaced(t *testing.T) {
	t.Parallel()
	needFakeDashboard(t)
	g := NewWithT(t)
	ns := namespace(t)
	clusters := watchCreations(t, ns, &rayv1.RayClusterList{})
	sample := kubeRayServiceSample(t, "ray-service.sample.yaml", ns)
	sample.Spec.RayClusterDeletionDelaySeconds = ptr.To[int32](1)
	svc := createService(t, sample)
	first := waitServing(t, svc).Status.ActiveServiceStatus.RayClusterName
	broken := "broken_" + ns + ".app"
	dash.serve.failImport(broken, "ModuleNotFoundError: No module named 'broken'")
	updateService(t, svc, func(s *rayv1.RayService) {
		s.Spec.RayClusterSpec.RayVersion = "2.47.0"
		s.Spec.ServeConfigV2 = strings.Replace(s.Spec.ServeConfigV2, "conditional_dag.serve_dag", broken, 1)
	})
	var failed string
	g.Eventually(func(g Gomega) {
		cur := getService(g, svc)
		failed = cur.Status.PendingServiceStatus.RayClusterName
		g.Expect(failed).NotTo(BeEmpty())
		g.Expect(cur.Status.PendingServiceStatus.Applications).To(HaveKeyWithValue("math_app", HaveField("Status", "DEPLOY_FAILED")))
	}, serviceTimeout, poll).Should(Succeed())
	g.Consistently(func(g Gomega) {
		cur := getService(g, svc)
		g.Expect(cur.Status.ActiveServiceStatus.RayClusterName).To(Equal(first))
		g.Expect(serviceCondition(cur, rayv1.RayServiceReady).Status).To(Equal(metav1.ConditionTrue))
		g.Expect(serviceCondition(cur, rayv1.UpgradeInProgress).Status).To(Equal(metav1.ConditionTrue))
		expectServesFrom(g, svc, svc.Name+"-serve-svc", first)
	}, 6*time.Second, poll).Should(Succeed())

	updateService(t, svc, func(s *rayv1.RayService) {
		s.Spec.RayClusterSpec.RayVersion = "2.48.0"
		s.Spec.ServeConfigV2 = strings.Replace(s.Spec.ServeConfigV2, broken, "conditional_dag.serve_dag", 1)
	})
	cur := waitServing(t, svc)
	second := cur.Status.ActiveServiceStatus.RayClusterName
	g.Expect(second).NotTo(BeElementOf(first, failed))
	g.Eventually(func(g Gomega) {
		list := &rayv1.RayClusterList{}
		g.Expect(k8s.List(context.Background(), list, client.InNamespace(ns))).To(Succeed())
		var names []string
		for _, rc := range list.Items {
			if rc.DeletionTimestamp == nil {
				names = append(names, rc.Name)
			}
		}
		g.Expect(names).To(ConsistOf(second))
	}, serviceTimeout, poll).Should(Succeed(), "the first and the failed cluster are deleted")
	g.Expect(clusters.created()).To(ConsistOf(first, failed, second))
}

// An operator SIGKILLed right after an upgrade began, and again once the pending cluster exists, makes
// exactly one new cluster for the change.
func TestRayServiceOperatorKilledMidUpgrade(t *testing.T) {
	needFakeDashboard(t)
	if !localCluster() {
		t.Skip("needs the operator run by hack/operator.sh")
	}
	g := NewWithT(t)
	ns := namespace(t)
	clusters := watchCreations(t, ns, &rayv1.RayClusterList{})
	svc := createService(t, kubeRayServiceSample(t, "ray-service.sample.yaml", ns))
	old := waitServing(t, svc).Status.ActiveServiceStatus.RayClusterName
	t.Cleanup(func() { hack(t, "operator.sh", "start") })
	updateService(t, svc, func(s *rayv1.RayService) { s.Spec.RayClusterSpec.RayVersion = "2.47.0" })
	hack(t, "operator.sh", "kill")
	hack(t, "operator.sh", "start")
	g.Eventually(func() []string { return clusters.created() }, serviceTimeout, poll).Should(HaveLen(2))
	hack(t, "operator.sh", "kill")
	hack(t, "operator.sh", "start")
	cur := waitServing(t, svc)
	g.Expect(cur.Status.ActiveServiceStatus.RayClusterName).NotTo(Equal(old))
	g.Expect(clusters.created()).To(ConsistOf(old, cur.Status.ActiveServiceStatus.RayClusterName), "exactly one new cluster")
}

// A new cluster whose applications run but whose pods serve no traffic (no worker, the head kept out of
// the serve Service) never takes it: switching would leave the serve Service without a ready endpoint.
func TestRayServiceHoldsASwitchToAClusterWithoutEndpoints(t *testing.T) {
	t.Parallel()
	needFakeDashboard(t)
	g := NewWithT(t)
	ns := namespace(t)
	sample := kubeRayServiceSample(t, "ray-service.sample.yaml", ns)
	sample.Spec.ExcludeHeadPodFromServeSvc = true
	svc := createService(t, sample)
	first := waitServing(t, svc).Status.ActiveServiceStatus.RayClusterName
	endpoints := watchEndpoints(t, ns, svc.Name+"-serve-svc")
	g.Eventually(endpoints.sawReady, serviceTimeout, poll).Should(BeTrue())
	updateService(t, svc, func(s *rayv1.RayService) {
		s.Spec.RayClusterSpec.RayVersion = "2.47.0"
		s.Spec.RayClusterSpec.WorkerGroupSpecs[0].Replicas = ptr.To[int32](0)
		s.Spec.RayClusterSpec.WorkerGroupSpecs[0].MinReplicas = ptr.To[int32](0)
	})
	g.Eventually(func(g Gomega) {
		cur := getService(g, svc)
		g.Expect(cur.Status.PendingServiceStatus.Applications).NotTo(BeEmpty())
		for name, app := range cur.Status.PendingServiceStatus.Applications {
			g.Expect(app.Status).To(Equal("RUNNING"), "application %s", name)
		}
		g.Expect(serviceCondition(cur, rayv1.UpgradeInProgress).Message).To(ContainSubstring("ready serve endpoint"))
	}, serviceTimeout, poll).Should(Succeed(), "the new cluster runs the applications")
	g.Consistently(func(g Gomega) {
		cur := getService(g, svc)
		g.Expect(cur.Status.ActiveServiceStatus.RayClusterName).To(Equal(first))
		g.Expect(serviceCondition(cur, rayv1.RayServiceReady).Status).To(Equal(metav1.ConditionTrue))
		expectServesFrom(g, svc, svc.Name+"-serve-svc", first)
	}, 5*time.Second, poll).Should(Succeed())
	g.Expect(endpoints.drops()).To(BeEmpty())
}

// serveProxyGate is the readiness gate through which playServeProxyProbes stands in for the kubelet's
// readiness probe of a worker's Serve proxy (KubeRay's worker probe asks the proxy's /-/healthz), which kwok
// does not run: a worker is Ready only where Serve runs a proxy.
const serveProxyGate = "e2e.kray.io/serve-proxy"

// serveProbes plays the readiness probes of Serve proxies (playServeProxyProbes); a test may hold the
// workers of every cluster but one unready.
type serveProbes struct {
	// except is the cluster whose workers' probes are answered while others are held; "" holds none.
	except atomic.Pointer[string]
}

// holdAllBut makes every worker of a cluster other than cluster fail its probe, as if its proxy hung.
func (p *serveProbes) holdAllBut(cluster string) { p.except.Store(&cluster) }

// release answers every probe again.
func (p *serveProbes) release() { p.except.Store(nil) }

// held reports whether the probes of cluster's workers are held.
func (p *serveProbes) held(cluster string) bool {
	except := p.except.Load()
	return except != nil && *except != cluster
}

// playServeProxyProbes sets, until the test ends, the serveProxyGate condition of every worker pod in ns
// that has that gate: True while the fake Serve runs a proxy on it and its probe is not held, else False.
func playServeProxyProbes(t *testing.T, ns string) *serveProbes {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	probes := &serveProbes{}
	go func() {
		for ctx.Err() == nil {
			pods := &corev1.PodList{}
			if k8s.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{constants.LabelNodeType: constants.NodeTypeWorker}) == nil {
				proxied := map[string]map[string]bool{}
				for i := range pods.Items {
					p := &pods.Items[i]
					if !slices.ContainsFunc(p.Spec.ReadinessGates, func(g corev1.PodReadinessGate) bool { return g.ConditionType == serveProxyGate }) {
						continue
					}
					cluster := p.Labels[constants.LabelCluster]
					if proxied[cluster] == nil {
						proxied[cluster] = dash.serve.proxiedPods(ns, cluster)
					}
					want := corev1.ConditionFalse
					if proxied[cluster][p.Name] && !probes.held(cluster) {
						want = corev1.ConditionTrue
					}
					if i := slices.IndexFunc(p.Status.Conditions, func(c corev1.PodCondition) bool { return c.Type == serveProxyGate }); i >= 0 {
						if p.Status.Conditions[i].Status == want {
							continue
						}
						p.Status.Conditions[i].Status = want
					} else {
						p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: serveProxyGate, Status: want, LastTransitionTime: metav1.Now()})
					}
					_ = k8s.Status().Update(ctx, p) // a conflict is tried again at the next look
				}
			}
			time.Sleep(200 * time.Millisecond)
		}
	}()
	return probes
}

// A new cluster takes the traffic once every pod Serve runs a proxy on is a ready serve endpoint, however
// many the active cluster had: here Serve runs the sample's 8 replicas on all 3 workers of the active cluster
// (4 ready serve endpoints with the head), and the new config's single replica on one worker of the new
// cluster, whose other two workers never become ready (their Serve proxy does not answer). While the proxied
// worker's probe is held, the switch waits for it, and says so.
func TestRayServiceSwitchesWithFewerServeProxiesThanTheActiveCluster(t *testing.T) {
	t.Parallel()
	needFakeDashboard(t)
	g := NewWithT(t)
	ns := namespace(t)
	probes := playServeProxyProbes(t, ns)
	sample := kubeRayServiceSample(t, "ray-service.sample.yaml", ns)
	sample.Spec.RayClusterDeletionDelaySeconds = ptr.To[int32](0)
	w := &sample.Spec.RayClusterSpec.WorkerGroupSpecs[0]
	w.Replicas = ptr.To[int32](3)
	w.Template.Spec.ReadinessGates = append(w.Template.Spec.ReadinessGates, corev1.PodReadinessGate{ConditionType: serveProxyGate})
	svc := createService(t, sample)
	old := waitServing(t, svc).Status.ActiveServiceStatus.RayClusterName
	g.Eventually(func(g Gomega) {
		g.Expect(getService(g, svc).Status.NumServeEndpoints).To(BeEquivalentTo(4))
	}, serviceTimeout, poll).Should(Succeed(), "the head and 3 workers with replicas")

	probes.holdAllBut(old)
	updateService(t, svc, func(s *rayv1.RayService) {
		s.Spec.RayClusterSpec.WorkerGroupSpecs[0].Template.Spec.Containers[0].Image = newImage
		s.Spec.ServeConfigV2 = "applications:\n  - name: fruit_app\n    import_path: fruit.deployment_graph\n    route_prefix: /fruit\n" +
			"    deployments:\n      - name: FruitMarket\n        num_replicas: 1\n"
	})
	var pending string
	g.Eventually(func(g Gomega) {
		cur := getService(g, svc)
		pending = cur.Status.PendingServiceStatus.RayClusterName
		g.Expect(pending).NotTo(BeEmpty())
		g.Expect(serviceCondition(cur, rayv1.UpgradeInProgress).Message).To(ContainSubstring("on each of the 2 pods Serve runs a proxy on (1 not ready), until"))
	}, serviceTimeout, poll).Should(Succeed(), "the new cluster waits for the worker Serve runs its replica on")
	cur := getService(g, svc)
	g.Expect(cur.Status.ActiveServiceStatus.RayClusterName).To(Equal(old))
	expectServesFrom(g, svc, svc.Name+"-serve-svc", old)

	probes.release()
	g.Eventually(func(g Gomega) {
		cur := getService(g, svc)
		g.Expect(cur.Status.ActiveServiceStatus.RayClusterName).To(Equal(pending), "UpgradeInProgress: %s", serviceCondition(cur, rayv1.UpgradeInProgress).Message)
		g.Expect(cur.Status.PendingServiceStatus.RayClusterName).To(BeEmpty())
		g.Expect(cur.Status.NumServeEndpoints).To(BeEquivalentTo(2), "the head and the one worker with a replica")
	}, serviceTimeout, poll).Should(Succeed())
	expectServesFrom(g, svc, svc.Name+"-serve-svc", pending)
}

// Two operator instances without leader election serve the same RayServices at once: each RayService gets
// one cluster, and one more per upgrade, though both instances name clusters and create them.
func TestRayServiceTwoOperatorInstances(t *testing.T) {
	needFakeDashboard(t)
	if !localCluster() {
		t.Skip("needs operators run by hack/operator.sh")
	}
	g := NewWithT(t)
	twin := []string{"KRAY_OPERATOR_INSTANCE=twin", "KRAY_OPERATOR_PROBE_PORT=28094"}
	hackEnv(t, twin, "operator.sh", "start")
	t.Cleanup(func() { hackEnv(t, twin, "operator.sh", "stop") })
	ns := namespace(t)
	clusters := watchCreations(t, ns, &rayv1.RayClusterList{})
	var services []*rayv1.RayService
	for _, name := range []string{"twin-a", "twin-b", "twin-c"} {
		svc := kubeRayServiceSample(t, "ray-service.sample.yaml", ns)
		svc.Name = name
		services = append(services, createService(t, svc))
	}
	first := map[string]string{}
	for _, svc := range services {
		first[svc.Name] = waitServing(t, svc).Status.ActiveServiceStatus.RayClusterName
	}
	for _, svc := range services {
		updateService(t, svc, func(s *rayv1.RayService) { s.Spec.RayClusterSpec.RayVersion = "2.47.0" })
	}
	var want []string
	for _, svc := range services {
		g.Eventually(func(g Gomega) {
			g.Expect(getService(g, svc).Status.ActiveServiceStatus.RayClusterName).NotTo(Equal(first[svc.Name]))
		}, serviceTimeout, poll).Should(Succeed())
		cur := waitServing(t, svc)
		want = append(want, first[svc.Name], cur.Status.ActiveServiceStatus.RayClusterName)
	}
	g.Expect(clusters.created()).To(ConsistOf(want), "one cluster per RayService and one per upgrade")
}

// A RayService taken over from KubeRay has head and serve Services without the ray.io/cluster label
// (KubeRay's own labels only), which kray's cache never holds: its next upgrade still completes, moving
// both Services to the new cluster (labelling them on the way) and promoting it.
func TestRayServiceUpgradeOfAServiceKubeRayMade(t *testing.T) {
	t.Parallel()
	needFakeDashboard(t)
	g := NewWithT(t)
	ns := namespace(t)
	svc := createService(t, kubeRayServiceSample(t, "ray-service.sample.yaml", ns))
	old := waitServing(t, svc).Status.ActiveServiceStatus.RayClusterName
	for name, serveLabel := range map[string]string{svc.Name + "-head-svc": "", svc.Name + "-serve-svc": svc.Name + "-serve"} {
		g.Eventually(func(g Gomega) {
			s := serviceObj(g, ns, name)
			s.Labels = map[string]string{constants.LabelOriginatedFromCRName: svc.Name, constants.LabelOriginatedFromCRD: constants.OriginatedFromRayService}
			if serveLabel != "" {
				s.Labels[constants.LabelServe] = serveLabel
			}
			g.Expect(k8s.Update(context.Background(), s)).To(Succeed())
		}, 10*time.Second, poll).Should(Succeed(), "Service %s as KubeRay labels it", name)
	}
	updateService(t, svc, func(s *rayv1.RayService) {
		s.Spec.RayClusterSpec.HeadGroupSpec.Template.Spec.Containers[0].Image = "rayproject/ray:2.47.0"
	})
	var next string
	g.Eventually(func(g Gomega) {
		cur := getService(g, svc)
		next = cur.Status.ActiveServiceStatus.RayClusterName
		g.Expect(next).NotTo(Equal(old))
		g.Expect(cur.Status.PendingServiceStatus.RayClusterName).To(BeEmpty(), "upgrade in progress")
		g.Expect(serviceCondition(cur, rayv1.UpgradeInProgress).Status).To(Equal(metav1.ConditionFalse))
	}, serviceTimeout, poll).Should(Succeed(), "the upgrade completes")
	expectServesFrom(g, svc, svc.Name+"-serve-svc", next)
	for _, name := range []string{svc.Name + "-head-svc", svc.Name + "-serve-svc"} {
		g.Expect(serviceObj(g, ns, name).Labels).To(HaveKeyWithValue(constants.LabelCluster, next), "Service %s", name)
	}
}

// A RayService that KubeRay v1.7 made carries ray.io/rayservice-finalizer: deleted under kray, its clusters
// are deleted and then the RayService itself goes, instead of hanging on a finalizer nobody removes.
func TestRayServiceWithKubeRaysFinalizerIsDeleted(t *testing.T) {
	t.Parallel()
	needFakeDashboard(t)
	g := NewWithT(t)
	ns := namespace(t)
	sample := kubeRayServiceSample(t, "ray-service.sample.yaml", ns)
	sample.Finalizers = []string{constants.FinalizerRayService}
	svc := createService(t, sample)
	cluster := waitServing(t, svc).Status.ActiveServiceStatus.RayClusterName
	g.Expect(k8s.Delete(context.Background(), svc)).To(Succeed())
	g.Eventually(func(g Gomega) {
		err := k8s.Get(context.Background(), client.ObjectKeyFromObject(svc), &rayv1.RayService{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the RayService is still stored: %v", err)
	}, serviceTimeout, poll).Should(Succeed())
	err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: cluster}, &rayv1.RayCluster{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the RayService's cluster %s goes before it: %v", cluster, err)
}

// KubeRay v1.7's suspend of a serving RayService: Suspending, then its cluster and both Services deleted and
// Suspended, with nothing left carrying its name; a change of mind while it suspends is acted on only once
// it is suspended; resumed, it serves again from a new cluster.
func TestRayServiceSuspendAndResume(t *testing.T) {
	t.Parallel()
	needFakeDashboard(t)
	g := NewWithT(t)
	ns := namespace(t)
	svc := createService(t, kubeRayServiceSample(t, "ray-service.sample.yaml", ns))
	old := waitServing(t, svc).Status.ActiveServiceStatus.RayClusterName
	// A finalizer of the test's holds the cluster, so the suspend is seen in progress.
	const hold = "e2e.kray.io/hold"
	rc := &rayv1.RayCluster{}
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: old}, rc)).To(Succeed())
	rc.Finalizers = append(rc.Finalizers, hold)
	g.Expect(k8s.Update(context.Background(), rc)).To(Succeed())

	updateService(t, svc, func(s *rayv1.RayService) { s.Spec.Suspend = true })
	g.Eventually(func(g Gomega) {
		cur := getService(g, svc)
		c := serviceCondition(cur, rayv1.RayServiceSuspending)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(string(rayv1.SuspendInProgress)))
		g.Expect(cur.Status.ActiveServiceStatus.RayClusterName).To(BeEmpty())
		g.Expect(cur.Status.NumServeEndpoints).To(BeZero())
		g.Expect(eventMessages(g, cur, rayservice.EventDeletedService)).To(ConsistOf(
			"Deleted the Service "+ns+"/rayservice-sample-head-svc during suspend", "Deleted the Service "+ns+"/rayservice-sample-serve-svc during suspend"))
	}, serviceTimeout, poll).Should(Succeed())
	updateService(t, svc, func(s *rayv1.RayService) { s.Spec.Suspend = false })
	g.Consistently(func(g Gomega) {
		g.Expect(meta.IsStatusConditionTrue(getService(g, svc).Status.Conditions, string(rayv1.RayServiceSuspending))).To(BeTrue())
	}, 3*time.Second, poll).Should(Succeed(), "a suspend once begun completes")
	updateService(t, svc, func(s *rayv1.RayService) { s.Spec.Suspend = true })

	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: old}, rc)).To(Succeed())
	rc.Finalizers = slices.DeleteFunc(rc.Finalizers, func(f string) bool { return f == hold })
	g.Expect(k8s.Update(context.Background(), rc)).To(Succeed())
	g.Eventually(func(g Gomega) {
		cur := getService(g, svc)
		g.Expect(meta.IsStatusConditionTrue(cur.Status.Conditions, string(rayv1.RayServiceSuspended))).To(BeTrue())
		g.Expect(serviceCondition(cur, rayv1.RayServiceReady).Reason).To(Equal(string(rayv1.SuspendComplete)))
		left := map[string]client.ObjectList{"RayClusters": &rayv1.RayClusterList{}, "Services": &corev1.ServiceList{}}
		for what, list := range left {
			g.Expect(k8s.List(context.Background(), list, client.InNamespace(ns))).To(Succeed())
			g.Expect(meta.LenList(list)).To(BeZero(), "%s left", what)
		}
	}, serviceTimeout, poll).Should(Succeed())

	updateService(t, svc, func(s *rayv1.RayService) { s.Spec.Suspend = false })
	cur := waitServing(t, svc)
	g.Expect(cur.Status.ActiveServiceStatus.RayClusterName).NotTo(Equal(old))
	c := serviceCondition(cur, rayv1.RayServiceSuspended)
	g.Expect(c).NotTo(BeNil())
	g.Expect(c.Reason).To(Equal(string(rayv1.RayServiceResumed)))
	expectServesFrom(g, svc, "rayservice-sample-serve-svc", cur.Status.ActiveServiceStatus.RayClusterName)
}

// kray.io/in-place-worker-upgrade: a change of the worker image rolls through the serving cluster, with no
// second cluster: a new worker starts before an old one is drained and updated, so the group never has fewer
// available workers than its replicas nor more than one extra, the serve Service never loses its endpoints,
// and the head stays the same pod. A head change still takes a new cluster.
func TestRayServiceInPlaceWorkerUpgrade(t *testing.T) {
	t.Parallel()
	needFakeDashboard(t)
	needFakeGCS(t)
	g := NewWithT(t)
	ns := namespace(t)
	gcs.setDrainTime(ns, 300*time.Millisecond)
	clusters := watchCreations(t, ns, &rayv1.RayClusterList{})
	sample := kubeRayServiceSample(t, "ray-service.sample.yaml", ns)
	sample.Annotations = map[string]string{constants.AnnotationInPlaceWorkerUpgrade: "true"}
	sample.Spec.RayClusterDeletionDelaySeconds = ptr.To[int32](1)
	w := &sample.Spec.RayClusterSpec.WorkerGroupSpecs[0]
	w.Replicas, w.MinReplicas, w.MaxReplicas = ptr.To[int32](3), ptr.To[int32](3), ptr.To[int32](5)
	sample.Spec.RayClusterSpec.WorkerDrain = &rayv1.WorkerDrainOptions{TimeoutSeconds: ptr.To[int32](60)}
	svc := createService(t, sample)
	active := waitServing(t, svc).Status.ActiveServiceStatus.RayClusterName
	rc := &rayv1.RayCluster{}
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: active}, rc)).To(Succeed())
	waitReady(t, rc, 3)
	head := headPod(g, rc)
	uids := workerUIDs(g, rc, w.GroupName)
	endpoints := watchEndpoints(t, ns, svc.Name+"-serve-svc")
	g.Eventually(endpoints.sawReady, serviceTimeout, poll).Should(BeTrue())
	tl := watchTimeline(t, rc)

	updateService(t, svc, func(s *rayv1.RayService) {
		s.Spec.RayClusterSpec.WorkerGroupSpecs[0].Template.Spec.Containers[0].Image = newImage
	})
	g.Eventually(func(g Gomega) {
		expectRolled(g, rc, w.GroupName, 3)
		g.Expect(getService(g, svc).Status.PendingServiceStatus.RayClusterName).To(BeEmpty())
	}, 2*readyTimeout, poll).Should(Succeed())
	cur := waitServing(t, svc)
	g.Expect(cur.Status.ActiveServiceStatus.RayClusterName).To(Equal(active))
	g.Expect(clusters.created()).To(ConsistOf(active), "no second cluster")
	g.Expect(endpoints.drops()).To(BeEmpty(), "moments the serve Service had no ready endpoint")
	g.Expect(headPod(g, rc).UID).To(Equal(head.UID), "the head was replaced")
	b := tl.rollBounds(uids)
	g.Expect(b.mostWorkers).To(Equal(4), "workers at most: replicas + 1")
	g.Expect(b.fewestAvailable).To(Equal(3), "available workers never below replicas")
	g.Expect(b.otherDown).To(BeFalse(), "the head was taken out of its Services")
	drained := drainedNames(gcs.drainedPods(ns), ns)
	g.Expect(drained).To(HaveLen(3), "each old worker drained once")

	// A change of the head is not a worker change: it takes a new cluster, as the upgrade strategy says.
	updateService(t, svc, func(s *rayv1.RayService) {
		s.Spec.RayClusterSpec.HeadGroupSpec.Template.Spec.Containers[0].Image = newImage
	})
	g.Eventually(func(g Gomega) {
		g.Expect(getService(g, svc).Status.PendingServiceStatus.RayClusterName).NotTo(BeEmpty())
	}, serviceTimeout, poll).Should(Succeed())
	next := waitServing(t, svc).Status.ActiveServiceStatus.RayClusterName
	g.Expect(next).NotTo(Equal(active))
	g.Expect(clusters.created()).To(ConsistOf(active, next))
}
