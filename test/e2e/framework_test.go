// Package e2e proves kray's behaviour on a live cluster with the real Kruise controllers and webhooks: the
// local cluster (kwok nodes) or kind. It uses the cluster in $KUBECONFIG and creates nothing but
// namespaces and RayClusters; the operator is started by the runner (hack/e2e.sh) or already deployed.
//
// A test that keeps to its own namespace, and to its own keys in the fake Ray servers, calls t.Parallel. One
// that restarts a process (the operator, Kruise, the API server), starts a second operator, changes a node,
// a fake's global state or cluster-wide objects, needs a node's free CPU (an in-place resize), or asserts on
// a window of a few seconds runs alone.
package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	kruisev1beta1 "github.com/openkruise/kruise-api/apps/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	schedv1alpha1 "github.com/kray-project/kray/api/schedulerplugins/v1alpha1"
	rayv1 "github.com/kray-project/kray/api/v1"
	volcanov1beta1 "github.com/kray-project/kray/api/volcano/v1beta1"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/names"
)

const (
	readyTimeout = 90 * time.Second
	poll         = 100 * time.Millisecond
)

var (
	scheme    = runtime.NewScheme()
	k8s       client.Client
	watcher   client.WithWatch
	clientset *kubernetes.Clientset
	restCfg   *rest.Config
	ledger    *podLedger
	repoRoot  string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(rayv1.AddToScheme(scheme))
	utilruntime.Must(kruisev1alpha1.AddToScheme(scheme))
	utilruntime.Must(kruisev1beta1.AddToScheme(scheme))
	utilruntime.Must(schedv1alpha1.AddToScheme(scheme))
	utilruntime.Must(volcanov1beta1.AddToScheme(scheme))
	utilruntime.Must(gwv1.Install(scheme))
	path := os.Getenv("KUBECONFIG")
	if path == "" {
		fmt.Fprintln(os.Stderr, "KUBECONFIG is not set: run `make e2e` (local cluster) or `make kind-e2e`")
		return 1
	}
	var err error
	if restCfg, err = clientcmd.BuildConfigFromFlags("", path); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// Room for the tests that run in parallel, each polling every 100 ms.
	restCfg.QPS, restCfg.Burst = 400, 800
	if k8s, err = client.New(restCfg, client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if watcher, err = client.NewWithWatch(restCfg, client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	clientset = kubernetes.NewForConfigOrDie(restCfg)
	wd, _ := os.Getwd()
	repoRoot = filepath.Join(wd, "..", "..")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if ledger, err = startLedger(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "start pod ledger:", err)
		return 1
	}
	if err := startFakeGCS(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "start fake Ray GCS:", err)
		return 1
	}
	if err := startFakeDashboard(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "start fake Ray dashboard:", err)
		return 1
	}
	if os.Getenv("KRAY_E2E_KIND") == "1" {
		if err := checkNetworkPoliciesEnforced(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "kind suite:", err)
			return 1
		}
	}
	code := m.Run()
	if os.Getenv("KRAY_E2E_KIND") == "1" {
		reportKindProbes(ctx)
	}
	return code
}

// localCluster reports whether the suite runs on hack/cluster.sh's cluster with the operator run by
// hack/operator.sh, so that tests may stop and start processes. On kind the operator is a Deployment.
func localCluster() bool { return os.Getenv("KRAY_E2E_OPERATOR") != "external" }

// hack runs a repository script (hack/cluster.sh or hack/operator.sh) and fails the test if it fails.
func hack(t *testing.T, script string, args ...string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(repoRoot, "hack", script), args...)
	cmd.Env = os.Environ()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("hack/%s %s: %v\n%s", script, strings.Join(args, " "), err, out)
	}
}

var nsSeq atomic.Int32

// namespace creates a namespace for one test and deletes it when the test passes.
func namespace(t *testing.T) string {
	t.Helper()
	base := strings.ToLower(strings.NewReplacer("/", "-", "_", "-", ".", "-").Replace(t.Name()))
	name := fmt.Sprintf("e2e-%d-%s", nsSeq.Add(1), base)
	if len(name) > 50 {
		name = name[:50]
	}
	name = strings.TrimRight(name, "-") + fmt.Sprintf("-%d", time.Now().Unix()%100000)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := k8s.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !t.Failed() {
			_ = k8s.Delete(context.Background(), ns)
		}
	})
	return name
}

// loadSample reads a RayCluster from config/samples and places it in ns.
func loadSample(t *testing.T, file, ns string) *rayv1.RayCluster {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, "config", "samples", file))
	if err != nil {
		t.Fatal(err)
	}
	rc := &rayv1.RayCluster{}
	if err := yaml.UnmarshalStrict(data, rc); err != nil {
		t.Fatal(err)
	}
	rc.Namespace = ns
	return rc
}

func create(t *testing.T, rc *rayv1.RayCluster) *rayv1.RayCluster {
	t.Helper()
	if err := k8s.Create(context.Background(), rc); err != nil {
		t.Fatalf("create RayCluster %s: %v", rc.Name, err)
	}
	return rc
}

func get(g Gomega, rc *rayv1.RayCluster) *rayv1.RayCluster {
	out := &rayv1.RayCluster{}
	g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(rc), out)).To(Succeed())
	return out
}

// update applies mutate to the latest RayCluster and updates it, retrying on conflict.
func update(t *testing.T, rc *rayv1.RayCluster, mutate func(*rayv1.RayCluster)) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		cur := get(g, rc)
		mutate(cur)
		g.Expect(k8s.Update(context.Background(), cur)).To(Succeed())
	}, 10*time.Second, poll).Should(Succeed())
}

// waitReady waits until the RayCluster is ready with the expected number of Running and Ready pods.
func waitReady(t *testing.T, rc *rayv1.RayCluster, workers int) {
	t.Helper()
	waitReadyWithin(t, rc, workers, readyTimeout, poll)
}

// waitReadyWithin is waitReady with its timeout and polling interval.
func waitReadyWithin(t *testing.T, rc *rayv1.RayCluster, workers int, timeout, interval time.Duration) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		cur := get(g, rc)
		g.Expect(cur.Status.State).To(Equal(rayv1.Ready))
		g.Expect(cur.Status.ReadyWorkerReplicas).To(Equal(int32(workers)))
		pods := clusterPods(g, rc)
		g.Expect(pods).To(HaveLen(workers + 1))
		for _, p := range pods {
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning), "pod %s", p.Name)
			g.Expect(podReady(&p)).To(BeTrue(), "pod %s not ready", p.Name)
		}
	}, timeout, interval).Should(Succeed())
}

func clusterPods(g Gomega, rc *rayv1.RayCluster, extra ...string) []corev1.Pod {
	sel := client.MatchingLabels{constants.LabelCluster: rc.Name}
	for i := 0; i+1 < len(extra); i += 2 {
		sel[extra[i]] = extra[i+1]
	}
	list := &corev1.PodList{}
	g.Expect(k8s.List(context.Background(), list, client.InNamespace(rc.Namespace), sel)).To(Succeed())
	return list.Items
}

func workerPods(g Gomega, rc *rayv1.RayCluster, group string) []corev1.Pod {
	return clusterPods(g, rc, constants.LabelNodeType, constants.NodeTypeWorker, constants.LabelGroup, group)
}

func headPod(g Gomega, rc *rayv1.RayCluster) *corev1.Pod {
	p := &corev1.Pod{}
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: rc.Namespace, Name: names.HeadPod(rc.Name)}, p)).To(Succeed())
	return p
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func condition(rc *rayv1.RayCluster, t string) *metav1.Condition {
	return meta.FindStatusCondition(rc.Status.Conditions, t)
}

func podNames(pods []corev1.Pod) []string {
	out := make([]string, 0, len(pods))
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

func uids(pods []corev1.Pod) map[string]types.UID {
	out := map[string]types.UID{}
	for _, p := range pods {
		out[p.Name] = p.UID
	}
	return out
}

// podLedger counts every pod created and deleted per RayCluster, from a watch started before any test
// creates a RayCluster, so a pod that was created and deleted between two polls is still counted.
type podLedger struct {
	mu sync.Mutex
	// gap is set when the watch ended with an error and events may have been missed; counts then fail.
	gap     error
	created map[string]map[types.UID]string // cluster key -> uid -> name
	deleted map[string]map[types.UID]string
}

func clusterKey(ns, name string) string { return ns + "/" + name }

func startLedger(ctx context.Context) (*podLedger, error) {
	l := &podLedger{created: map[string]map[types.UID]string{}, deleted: map[string]map[types.UID]string{}}
	rv, err := l.resync(ctx)
	if err != nil {
		return nil, err
	}
	go func() {
		for ctx.Err() == nil {
			w, err := clientset.CoreV1().Pods("").Watch(ctx, metav1.ListOptions{LabelSelector: constants.LabelCluster, ResourceVersion: rv, AllowWatchBookmarks: true})
			if err != nil {
				// A watch refused outright (410 Gone for an expired resourceVersion) is recovered like one
				// that ends with that error.
				if status, ok := err.(apierrors.APIStatus); ok {
					st := status.Status()
					rv = l.recover(ctx, rv, &st)
				}
				time.Sleep(100 * time.Millisecond)
				continue
			}
			for ev := range w.ResultChan() {
				if ev.Type == watch.Error {
					rv = l.recover(ctx, rv, ev.Object)
					break
				}
				p, ok := ev.Object.(*corev1.Pod)
				if !ok {
					continue
				}
				rv = p.ResourceVersion
				l.record(ev.Type, p)
			}
			w.Stop()
		}
	}()
	return l, nil
}

// recover handles a watch error and returns the resourceVersion to watch from next. An error that keeps the
// resourceVersion valid (a timeout, a dropped connection, a throttled request) re-watches from it and misses
// nothing. After a kube-apiserver restart the new watch cache cannot resume from the old resourceVersion (410
// Gone); the ledger then resyncs from a LIST. Pods could not be written while the API server was down, so the
// resync misses nothing a test asserts on. A LIST that fails marks the ledger untrustworthy.
func (l *podLedger) recover(ctx context.Context, rv string, obj runtime.Object) string {
	st, ok := obj.(*metav1.Status)
	if !ok || st.Code != 410 {
		return rv
	}
	newRV, err := l.resync(ctx)
	if err == nil {
		return newRV
	}
	l.mu.Lock()
	l.gap = fmt.Errorf("pod watch expired at resourceVersion %s (%v) and the LIST that follows failed: %v", rv, obj, err)
	l.mu.Unlock()
	return rv
}

// resync lists the pods and records those it had not seen as created and those that vanished as deleted.
// It returns the list's resourceVersion, from which the watch resumes.
func (l *podLedger) resync(ctx context.Context) (string, error) {
	list, err := clientset.CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: constants.LabelCluster})
	if err != nil {
		return "", err
	}
	live := map[types.UID]bool{}
	for i := range list.Items {
		live[list.Items[i].UID] = true
		l.record(watch.Added, &list.Items[i])
	}
	l.mu.Lock()
	for key, pods := range l.created {
		for uid, name := range pods {
			if !live[uid] && l.deleted[key][uid] == "" {
				if l.deleted[key] == nil {
					l.deleted[key] = map[types.UID]string{}
				}
				l.deleted[key][uid] = name
			}
		}
	}
	l.mu.Unlock()
	return list.ResourceVersion, nil
}

func (l *podLedger) record(t watch.EventType, p *corev1.Pod) {
	key := clusterKey(p.Namespace, p.Labels[constants.LabelCluster])
	l.mu.Lock()
	defer l.mu.Unlock()
	add := func(m map[string]map[types.UID]string) {
		if m[key] == nil {
			m[key] = map[types.UID]string{}
		}
		m[key][p.UID] = p.Name
	}
	switch t {
	case watch.Added:
		add(l.created)
	case watch.Deleted:
		add(l.deleted)
	}
}

// settle waits until the ledger agrees with a LIST of rc's pods: it has seen the creation of every pod the
// API server lists and the deletion of every pod it saw created that is no longer listed. The watch delivers
// events in order, so a read of the ledger afterwards reflects at least that list; without it, a read right
// after a check made through the API could miss the last deletions.
func (l *podLedger) settle(t *testing.T, rc *rayv1.RayCluster) {
	t.Helper()
	key := clusterKey(rc.Namespace, rc.Name)
	NewWithT(t).Eventually(func(g Gomega) {
		list, err := clientset.CoreV1().Pods(rc.Namespace).List(context.Background(), metav1.ListOptions{LabelSelector: constants.LabelCluster + "=" + rc.Name})
		g.Expect(err).NotTo(HaveOccurred())
		listed := map[types.UID]string{}
		for i := range list.Items {
			listed[list.Items[i].UID] = list.Items[i].Name
		}
		seen := map[types.UID]string{}
		l.mu.Lock()
		for uid, name := range l.created[key] {
			if _, gone := l.deleted[key][uid]; !gone {
				seen[uid] = name
			}
		}
		l.mu.Unlock()
		g.Expect(seen).To(Equal(listed), "the pod ledger has not caught up with the API server")
	}, 30*time.Second, 50*time.Millisecond).Should(Succeed())
}

// counts returns how many pods of rc were ever created and deleted; it fails the test if the ledger may
// have missed events.
func (l *podLedger) counts(t *testing.T, rc *rayv1.RayCluster) (created, deleted int) {
	t.Helper()
	l.settle(t, rc)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.gap != nil {
		t.Fatalf("the pod ledger cannot be trusted: %v", l.gap)
	}
	key := clusterKey(rc.Namespace, rc.Name)
	return len(l.created[key]), len(l.deleted[key])
}

// createdNames returns the names of rc's pods that were created (one entry per pod UID).
func (l *podLedger) createdNames(t *testing.T, rc *rayv1.RayCluster) []string {
	t.Helper()
	return l.names(t, l.created, rc)
}

// deletedNames returns the names of rc's pods that were deleted.
func (l *podLedger) deletedNames(t *testing.T, rc *rayv1.RayCluster) []string {
	t.Helper()
	return l.names(t, l.deleted, rc)
}

func (l *podLedger) names(t *testing.T, m map[string]map[types.UID]string, rc *rayv1.RayCluster) []string {
	t.Helper()
	l.settle(t, rc)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.gap != nil {
		t.Fatalf("the pod ledger cannot be trusted: %v", l.gap)
	}
	var out []string
	for _, n := range m[clusterKey(rc.Namespace, rc.Name)] {
		out = append(out, n)
	}
	return out
}
