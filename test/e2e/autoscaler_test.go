package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/internal/controller/raycluster"
)

// autoscaler speaks to the API server the way the Ray autoscaler does: plain HTTPS with the autoscaler
// ServiceAccount's bearer token, JSON Patch bodies with Python's json.dumps spacing, and the header
// spelled "Content-type", so the operator-created Role is what authorizes every request.
type autoscaler struct {
	http *http.Client
	host string
	rc   *rayv1.RayCluster
}

func newAutoscaler(t *testing.T, rc *rayv1.RayCluster) *autoscaler {
	t.Helper()
	g := NewWithT(t)
	var token string
	g.Eventually(func(g Gomega) {
		tr, err := clientset.CoreV1().ServiceAccounts(rc.Namespace).CreateToken(context.Background(), rc.Name,
			&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		token = tr.Status.Token
	}, readyTimeout, poll).Should(Succeed())
	cfg := rest.AnonymousClientConfig(restCfg)
	cfg.BearerToken = token
	hc, err := rest.HTTPClientFor(cfg)
	g.Expect(err).NotTo(HaveOccurred())
	return &autoscaler{http: hc, host: strings.TrimSuffix(cfg.Host, "/"), rc: rc}
}

// do sends one request and returns the status code and body.
func (a *autoscaler) do(t *testing.T, method, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, a.host+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if method == http.MethodPatch {
		req.Header["Content-type"] = []string{"application/json-patch+json"}
	}
	resp, err := a.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}

func (a *autoscaler) clusterPath(name string) string {
	return fmt.Sprintf("/apis/ray.io/v1/namespaces/%s/rayclusters/%s", a.rc.Namespace, name)
}

// patch sends a JSON patch exactly as written and requires the API server to accept it.
func (a *autoscaler) patch(t *testing.T, body string) {
	t.Helper()
	code, out := a.do(t, http.MethodPatch, a.clusterPath(a.rc.Name), body)
	if code != http.StatusOK {
		t.Fatalf("autoscaler patch %s: HTTP %d: %s", body, code, out)
	}
}

// autoscaledCluster creates an autoscaling RayCluster with groups "small-group" and "big-group" (no
// scaleStrategy in the manifest, as in most user YAML) and waits until it is ready.
func autoscaledCluster(t *testing.T, small, big int32) *rayv1.RayCluster {
	t.Helper()
	ns := namespace(t)
	rc := loadSample(t, "ray-cluster.autoscaler.yaml", ns)
	rc.Spec.WorkerGroupSpecs[0].Replicas = ptr.To(small)
	second := *rc.Spec.WorkerGroupSpecs[0].DeepCopy()
	second.GroupName = "big-group"
	second.Replicas = ptr.To(big)
	rc.Spec.WorkerGroupSpecs = append(rc.Spec.WorkerGroupSpecs, second)
	create(t, rc)
	waitReady(t, rc, int(small+big))
	return rc
}

func quoted(names ...string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = `"` + n + `"`
	}
	return strings.Join(q, ", ")
}

// Scale up: the v1 body for "+1 on group 0".
func TestAutoscalerScaleUp(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	rc := autoscaledCluster(t, 1, 0)
	as := newAutoscaler(t, rc)
	as.patch(t, `[{"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 3}]`)
	waitReady(t, rc, 3)
	created, deleted := ledger.counts(t, rc)
	g.Expect(created).To(Equal(1 + 3))
	g.Expect(deleted).To(BeZero())
	g.Expect(get(g, rc).Status.DesiredWorkerReplicas).To(Equal(int32(3)))
}

// Scale down across two groups in one patch: exactly the named pods are deleted, nothing is replaced,
// no other pod is touched. Then the v1 clearing patch and an empty patch change nothing.
func TestAutoscalerScaleDownAcrossGroups(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	rc := autoscaledCluster(t, 3, 2)
	as := newAutoscaler(t, rc)
	small, big := workerPods(g, rc, "small-group"), workerPods(g, rc, "big-group")
	keep := uids(append([]corev1.Pod{small[1], small[2]}, big[1]))
	keep[headPod(g, rc).Name] = headPod(g, rc).UID
	as.patch(t, fmt.Sprintf(`[{"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 2}, {"op": "replace", "path": "/spec/workerGroupSpecs/1/replicas", "value": 1}, {"op": "replace", "path": "/spec/workerGroupSpecs/0/scaleStrategy", "value": {"workersToDelete": [%s]}}, {"op": "replace", "path": "/spec/workerGroupSpecs/1/scaleStrategy", "value": {"workersToDelete": [%s]}}]`,
		quoted(small[0].Name), quoted(big[0].Name)))
	g.Eventually(func(g Gomega) { g.Expect(uids(clusterPods(g, rc))).To(Equal(keep)) }, readyTimeout, poll).Should(Succeed())

	as.patch(t, `[{"op": "replace", "path": "/spec/workerGroupSpecs/0/scaleStrategy", "value": {"workersToDelete": []}}, {"op": "replace", "path": "/spec/workerGroupSpecs/1/scaleStrategy", "value": {"workersToDelete": []}}]`)
	as.patch(t, `[]`)
	g.Consistently(func(g Gomega) { g.Expect(uids(clusterPods(g, rc))).To(Equal(keep)) }, 2*time.Second, poll).Should(Succeed())
	g.Expect(ledger.deletedNames(t, rc)).To(ConsistOf(small[0].Name, big[0].Name))
	created, _ := ledger.counts(t, rc)
	g.Expect(created).To(Equal(1+3+2), "nothing may be replaced")
	waitReady(t, rc, 3)
}

// Names that are already gone, dead (Failed) or in another group delete no wrong pod, cause no error
// loop, and are explained in an event.
func TestAutoscalerBadNames(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	rc := autoscaledCluster(t, 2, 1)
	as := newAutoscaler(t, rc)
	small, big := workerPods(g, rc, "small-group"), workerPods(g, rc, "big-group")
	dead := small[0]
	evict(g, &dead)
	// Wait until kray has removed the dead pod and the CloneSet has replaced it.
	g.Eventually(func(g Gomega) {
		g.Expect(uids(workerPods(g, rc, "small-group"))).NotTo(HaveKey(dead.Name))
		g.Expect(workerPods(g, rc, "small-group")).To(HaveLen(2))
	}, readyTimeout, poll).Should(Succeed())
	waitReady(t, rc, 3)
	before := uids(clusterPods(g, rc))
	as.patch(t, fmt.Sprintf(`[{"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 1}, {"op": "replace", "path": "/spec/workerGroupSpecs/0/scaleStrategy", "value": {"workersToDelete": [%s]}}]`,
		quoted("never-existed", dead.Name, big[0].Name)))
	g.Eventually(func(g Gomega) {
		g.Expect(eventMessages(g, rc, raycluster.EventWorkersToDeleteIgnored)).To(ContainElement(ContainSubstring(big[0].Name + ": the pod is not controlled by this group's CloneSet")))
	}, readyTimeout, poll).Should(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(uids(clusterPods(g, rc))).To(Equal(before), "no pod may be deleted for names kray cannot act on")
	}, 3*time.Second, poll).Should(Succeed())
	g.Expect(get(g, rc).Status.DesiredWorkerReplicas).To(Equal(int32(2)))
	// No error loop: the names are explained a bounded number of times, not on a hot retry loop.
	g.Expect(eventCount(g, rc, raycluster.EventWorkersToDeleteIgnored)).To(BeNumerically("<=", 10))
	g.Expect(eventCount(g, rc, raycluster.EventFailedToWriteWorkload)).To(BeZero())
}

// eventCount sums the counts of events about rc with the given reason (the recorder aggregates repeats).
func eventCount(g Gomega, rc *rayv1.RayCluster, reason string) int32 {
	list, err := clientset.CoreV1().Events(rc.Namespace).List(context.Background(), metav1.ListOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	var n int32
	for _, e := range list.Items {
		if e.InvolvedObject.Name == rc.Name && e.Reason == reason {
			n += max(e.Count, 1)
		}
	}
	return n
}

// A delete list without a replicas decrease (the v1 autoscaler sends this when its target already equals
// the CR's value) replaces the named pods.
func TestAutoscalerDeleteWithoutDecreaseReplaces(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	rc := autoscaledCluster(t, 2, 0)
	as := newAutoscaler(t, rc)
	small := workerPods(g, rc, "small-group")
	as.patch(t, fmt.Sprintf(`[{"op": "replace", "path": "/spec/workerGroupSpecs/0/scaleStrategy", "value": {"workersToDelete": [%s]}}]`, quoted(small[0].Name)))
	g.Eventually(func(g Gomega) {
		now := uids(workerPods(g, rc, "small-group"))
		g.Expect(now).NotTo(HaveKey(small[0].Name))
		g.Expect(now).To(HaveKeyWithValue(small[1].Name, small[1].UID))
		g.Expect(now).To(HaveLen(2))
	}, readyTimeout, poll).Should(Succeed())
	waitReady(t, rc, 2)
	g.Expect(ledger.deletedNames(t, rc)).To(ConsistOf(small[0].Name))
}

// The v2 order: a scale-up with the clear of a finished delete list piggybacked on it.
func TestAutoscalerV2ScaleUpWithClear(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	rc := autoscaledCluster(t, 1, 0)
	as := newAutoscaler(t, rc)
	victim := workerPods(g, rc, "small-group")[0]
	as.patch(t, fmt.Sprintf(`[{"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 0}, {"op": "replace", "path": "/spec/workerGroupSpecs/0/scaleStrategy", "value": {"workersToDelete": [%s]}}]`, quoted(victim.Name)))
	g.Eventually(func(g Gomega) { g.Expect(workerPods(g, rc, "small-group")).To(BeEmpty()) }, readyTimeout, poll).Should(Succeed())
	as.patch(t, `[{"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 1}, {"op": "replace", "path": "/spec/workerGroupSpecs/0/scaleStrategy", "value": {"workersToDelete": []}}]`)
	waitReady(t, rc, 1)
	created, deleted := ledger.counts(t, rc)
	g.Expect(created).To(Equal(1 + 1 + 1))
	g.Expect(deleted).To(Equal(1))
}

// The Role kray creates lets the autoscaler get and patch its own RayCluster and list pods, and nothing more.
func TestAutoscalerRoleIsLeastPrivilege(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	rc := autoscaledCluster(t, 1, 0)
	other := loadSample(t, "ray-cluster.sample.yaml", rc.Namespace)
	other.Name = "other-cluster"
	create(t, other)
	as := newAutoscaler(t, rc)
	code, _ := as.do(t, http.MethodGet, as.clusterPath(rc.Name), "")
	g.Expect(code).To(Equal(http.StatusOK))
	code, _ = as.do(t, http.MethodGet, fmt.Sprintf("/api/v1/namespaces/%s/pods?labelSelector=ray.io/cluster%%3D%s", rc.Namespace, rc.Name), "")
	g.Expect(code).To(Equal(http.StatusOK))
	code, _ = as.do(t, http.MethodPatch, as.clusterPath(other.Name), `[]`)
	g.Expect(code).To(Equal(http.StatusForbidden), "patching another RayCluster must be forbidden")
	pod := workerPods(g, rc, "small-group")[0]
	code, _ = as.do(t, http.MethodDelete, fmt.Sprintf("/api/v1/namespaces/%s/pods/%s", rc.Namespace, pod.Name), "")
	g.Expect(code).To(Equal(http.StatusForbidden), "deleting pods must be forbidden")
	g.Expect(uids(workerPods(g, rc, "small-group"))).To(HaveKeyWithValue(pod.Name, pod.UID))
}

// eventMessages returns the messages of events about obj with the given reason.
func eventMessages(g Gomega, obj client.Object, reason string) []string {
	list, err := clientset.CoreV1().Events(obj.GetNamespace()).List(context.Background(), metav1.ListOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	var out []string
	for _, e := range list.Items {
		if e.InvolvedObject.Name == obj.GetName() && e.Reason == reason {
			out = append(out, e.Message)
		}
	}
	return out
}
