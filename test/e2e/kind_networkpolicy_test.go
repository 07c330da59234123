package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/internal/controller/raycluster"
	"github.com/kray-project/kray/pkg/constants"
)

// NetworkPolicies on real kubelets: every kind node runs kube-network-policies (hack/kind/networkpolicy), which
// judges each new connection the node forwards, so these tests see packets refused. Connections are made by
// pod IP from inside pods, with bash's /dev/tcp.

const (
	// gcsPort and dashboardPort are the head's GCS and dashboard ports, as every cluster here has them.
	gcsPort       = 6379
	dashboardPort = constants.DefaultDashboardPort
	// listenerPort is the port of listenerPod's Redis.
	listenerPort = 6379
	// policyDelay bounds how long a change of a NetworkPolicy (or a new pod's labels) takes to reach the enforcer
	// of every node.
	policyDelay = time.Minute
	// refusalWindow is how long a refused connection must stay refused: every attempt in it is dropped.
	refusalWindow = 10 * time.Second
)

// probeScript checks TCP connections from inside a pod, a whole check in one run, so that it costs one exec
// however long it waits. Its arguments: MODE IP PORT WAIT WINDOW (seconds). Each attempt has 2 s to connect.
//   - reach: succeeds at the first connection made within WAIT.
//   - refuse: waits up to WAIT for an attempt that is dropped (no answer in 2 s; a reset, which a closed port
//     gives, is no refusal by a policy), then succeeds if every attempt in the next WINDOW is dropped too.
const probeScript = `
mode=$1 ip=$2 port=$3 wait=$4 window=$5
try() { timeout 2 bash -c 'exec 3<>"/dev/tcp/$0/$1"' "$ip" "$port" 2>/dev/null; }
end=$((SECONDS + wait))
case "$mode" in
reach)
  until try; do
    rc=$?
    ((SECONDS < end)) || { echo "no connection to $ip:$port in ${wait}s (last attempt: exit $rc)"; exit 1; }
    sleep 1
  done ;;
refuse)
  n=0
  while :; do
    try; rc=$?
    [[ $rc == 124 ]] && break
    ((SECONDS < end)) || { echo "$ip:$port never dropped in ${wait}s (last attempt: exit $rc, 0 connected)"; exit 1; }
    sleep 1
  done
  end=$((SECONDS + window))
  while ((SECONDS < end)); do
    try; rc=$?
    n=$((n + 1))
    [[ $rc == 124 ]] || { echo "$ip:$port dropped, then attempt $n of the ${window}s window ended with exit $rc (0 connected)"; exit 1; }
  done
  echo "$ip:$port dropped, then $n attempts in ${window}s all dropped" ;;
esac
`

// probe runs probeScript in the first container of p, and returns what it printed, or an error with it when the
// check fails.
func probe(p *corev1.Pod, mode, ip string, port int, wait, window time.Duration) (string, error) {
	out, err := podExec(p, "bash", "-c", probeScript, "probe", mode, ip, strconv.Itoa(port),
		strconv.Itoa(int(wait.Seconds())), strconv.Itoa(int(window.Seconds())))
	if err != nil {
		return out, fmt.Errorf("%s %s:%d from pod %s/%s: %w", mode, ip, port, p.Namespace, p.Name, err)
	}
	return out, nil
}

// podExec runs a command in the first container of p with the kubectl of bin/, and returns its output, with an
// error carrying that output when the command fails.
func podExec(p *corev1.Pod, command ...string) (string, error) {
	args := append([]string{"exec", "-n", p.Namespace, p.Name, "-c", p.Spec.Containers[0].Name, "--"}, command...)
	out, err := exec.Command(filepath.Join(repoRoot, "bin", "kubectl"), args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%v: %s", err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// expectReach fails the test unless p connects to ip:port within policyDelay.
func expectReach(t *testing.T, p *corev1.Pod, ip string, port int) {
	t.Helper()
	if _, err := probe(p, "reach", ip, port, policyDelay, 0); err != nil {
		t.Fatal(err)
	}
}

// expectRefused fails the test unless p's connections to ip:port are dropped within policyDelay, and stay
// dropped for refusalWindow.
func expectRefused(t *testing.T, p *corev1.Pod, ip string, port int) {
	t.Helper()
	out, err := probe(p, "refuse", ip, port, policyDelay, refusalWindow)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("from %s: %s", p.Name, strings.TrimSpace(out))
}

// smallResources are a probe's or listener's: they fit beside the tests' clusters.
func smallResources() corev1.ResourceRequirements {
	return corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
	}
}

// probePod is a pod that does nothing but wait for probeScript: the suite's Ray image (bash, timeout, wget).
func probePod(ns, name string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers: []corev1.Container{{Name: "probe", Image: "rayproject/ray:2.46.0", Command: []string{"sleep", "infinity"},
				Resources: smallResources()}},
		},
	}
}

// listenerPod is a Redis (the suite's KRAY_KIND_REDIS_IMAGE) listening on listenerPort, ready once it accepts
// connections.
func listenerPod(ns, name string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers: []corev1.Container{{Name: "redis", Image: os.Getenv("KRAY_KIND_REDIS_IMAGE"),
				Args:           []string{"--port", strconv.Itoa(listenerPort), "--protected-mode", "no", "--save", "", "--appendonly", "no"},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(listenerPort)}}, PeriodSeconds: 1},
				Resources:      smallResources()}},
		},
	}
}

// startPod creates p and returns it once it is ready, with its IP.
func startPod(ctx context.Context, p *corev1.Pod) (*corev1.Pod, error) {
	if err := k8s.Create(ctx, p); err != nil {
		return nil, err
	}
	cur := &corev1.Pod{}
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, kindTimeout, true, func(ctx context.Context) (bool, error) {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(p), cur); err != nil {
			return false, err
		}
		return podReady(cur) && cur.Status.PodIP != "", nil
	})
	if err != nil {
		return nil, fmt.Errorf("pod %s/%s not ready (phase %s): %w", p.Namespace, p.Name, cur.Status.Phase, err)
	}
	return cur, nil
}

// startPodT is startPod for a test.
func startPodT(t *testing.T, p *corev1.Pod) *corev1.Pod {
	t.Helper()
	cur, err := startPod(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	return cur
}

// errNotEnforced is the kind suite's answer when a NetworkPolicy refuses nothing.
var errNotEnforced = errors.New("NetworkPolicies are not enforced on the kind cluster (is hack/kind/networkpolicy's enforcer running on every node?)")

// checkNetworkPoliciesEnforced is the kind suite's canary, run before any test: in a namespace of its own, a
// client connects to a listener, then a plain deny-all-ingress policy selects the listener, and the client
// must be refused. Without it, every test that a policy lets a connection through would pass on a cluster that
// enforces nothing.
func checkNetworkPoliciesEnforced(ctx context.Context) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "kind-networkpolicy-canary-"}}
	if err := k8s.Create(ctx, ns); err != nil {
		return err
	}
	defer func() { _ = k8s.Delete(context.Background(), ns) }()
	labels := map[string]string{"app": "listener"}
	listener, err := startPod(ctx, listenerPod(ns.Name, "listener", labels))
	if err != nil {
		return err
	}
	caller, err := startPod(ctx, probePod(ns.Name, "client", nil))
	if err != nil {
		return err
	}
	if _, err := probe(caller, "reach", listener.Status.PodIP, listenerPort, time.Minute, 0); err != nil {
		return fmt.Errorf("the NetworkPolicy canary's client cannot reach its listener before any policy: %w", err)
	}
	deny := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "deny-all-ingress"},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: labels},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}},
	}
	if err := k8s.Create(ctx, deny); err != nil {
		return err
	}
	if _, err := probe(caller, "refuse", listener.Status.PodIP, listenerPort, 30*time.Second, 4*time.Second); err != nil {
		return fmt.Errorf("%w: %v", errNotEnforced, err)
	}
	return nil
}

// denyAllSample is KubeRay v1.7.0's ray-cluster.network-policy-deny-all.yaml as users write it, with only its CPU
// and memory cut to fit a kind node.
func denyAllSample(t *testing.T, ns string) *rayv1.RayCluster {
	t.Helper()
	rc := kubeRaySample(t, "ray-cluster.network-policy-deny-all.yaml", ns, &rayv1.RayCluster{})
	fitKindNode(rc)
	return rc
}

// KubeRay v1.7's deny-all sample, enforced. An outside pod of the same namespace reaches the head's GCS and
// dashboard before the policies exist, and is refused on both once they do; the worker still reaches its head
// and the cluster stays ready. Under DenyAll the head cannot reach an outside listener, under DenyAllIngress it
// can while the outside pod is still refused; once spec.networkPolicy is gone the outside pod connects again.
// No pod is created or deleted by any of it.
func TestKindNetworkPoliciesOfTheDenyAllSample(t *testing.T) {
	requireKind(t)
	t.Parallel()
	g := NewWithT(t)
	ns := kindNamespace(t)
	rc := denyAllSample(t, ns)
	policy := rc.Spec.NetworkPolicy
	rc.Spec.NetworkPolicy = nil
	outside := startPodT(t, probePod(ns, "outside", nil))
	listener := startPodT(t, listenerPod(ns, "listener", nil))
	create(t, rc)
	waitKindReady(t, rc, 1)
	before := uids(clusterPods(g, rc))
	head := headPod(g, rc)
	for _, port := range []int{gcsPort, dashboardPort} {
		expectReach(t, outside, head.Status.PodIP, port)
	}
	expectReach(t, head, listener.Status.PodIP, listenerPort)

	update(t, rc, func(c *rayv1.RayCluster) { c.Spec.NetworkPolicy = policy })
	g.Eventually(func(g Gomega) {
		g.Expect(networkPolicies(g, rc)).To(HaveLen(2))
	}, kindTimeout, time.Second).Should(Succeed())
	for _, port := range []int{gcsPort, dashboardPort} {
		expectRefused(t, outside, head.Status.PodIP, port)
	}
	expectRefused(t, head, listener.Status.PodIP, listenerPort)
	worker := workerPods(g, rc, rc.Spec.WorkerGroupSpecs[0].GroupName)[0]
	expectReach(t, &worker, head.Status.PodIP, gcsPort)
	waitKindReady(t, rc, 1)
	g.Expect(rayNodes(t, rc)).To(HaveKeyWithValue(worker.Name, BeElementOf("IDLE", "RUNNING")), "the worker is still in its head's GCS")

	// DenyAllIngress restricts no egress, so KubeRay refuses egress rules under it: the sample's DNS rules go.
	update(t, rc, func(c *rayv1.RayCluster) {
		c.Spec.NetworkPolicy.Mode = ptr.To(rayv1.NetworkPolicyDenyAllIngress)
		c.Spec.NetworkPolicy.Head.EgressRules = nil
		c.Spec.NetworkPolicy.Worker.EgressRules = nil
	})
	expectReach(t, head, listener.Status.PodIP, listenerPort)
	expectRefused(t, outside, head.Status.PodIP, gcsPort)

	update(t, rc, func(c *rayv1.RayCluster) { c.Spec.NetworkPolicy = nil })
	g.Eventually(func(g Gomega) {
		g.Expect(networkPolicies(g, rc)).To(BeEmpty())
	}, kindTimeout, time.Second).Should(Succeed())
	for _, port := range []int{gcsPort, dashboardPort} {
		expectReach(t, outside, head.Status.PodIP, port)
	}
	waitKindReady(t, rc, 1)
	g.Expect(uids(clusterPods(g, rc))).To(Equal(before), "no pod created or deleted")
	expectOperatorNeverForbidden(t)
}

// A K8sJobMode RayJob whose cluster has the deny-all sample's policies: the submitter pod reaches the head's
// dashboard through the head policy's submitter rule, the worker joins, and the job succeeds.
func TestKindRayJobSubmitterUnderNetworkPolicies(t *testing.T) {
	requireKind(t)
	t.Parallel()
	g := NewWithT(t)
	ns := kindNamespace(t)
	rc := kindRayCluster(ns, "", 1)
	rc.Spec.NetworkPolicy = denyAllSample(t, ns).Spec.NetworkPolicy
	job := &rayv1.RayJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "isolated"},
		Spec:       rayv1.RayJobSpec{Entrypoint: "echo ran-behind-networkpolicies", RayClusterSpec: &rc.Spec},
	}
	g.Expect(k8s.Create(context.Background(), job)).To(Succeed())
	cur := &rayv1.RayJob{}
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(job), cur)).To(Succeed())
		g.Expect(cur.Status.JobStatus).To(Equal(rayv1.JobStatusSucceeded))
		g.Expect(cur.Status.JobDeploymentStatus).To(Equal(rayv1.JobDeploymentStatusComplete))
	}, kindTimeout, time.Second).Should(Succeed())
	cluster := &rayv1.RayCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cur.Status.RayClusterName}}
	head := networkPolicies(g, cluster)[cluster.Name+"-head"]
	g.Expect(head.Spec.PolicyTypes).To(ConsistOf(networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress), "the cluster ran under DenyAll")
	pods, err := clientset.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "job-name=" + job.Name})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pods.Items).NotTo(BeEmpty())
	logs, err := clientset.CoreV1().Pods(ns).GetLogs(pods.Items[0].Name, &corev1.PodLogOptions{}).DoRaw(context.Background())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(logs)).To(ContainSubstring("ran-behind-networkpolicies"), "the submitter reached the dashboard and read the job's logs")
	expectOperatorNeverForbidden(t)
}

// kray's own calls under the deny-all sample's policies, let in by the head policy's operator rule: an image
// change under RollingUpdate with workerDrain drains each worker over the GCS (no timeout, no failure) and
// updates it in place; then a replaced head gets both workers back in its GCS, in their own pods.
func TestKindDrainAndHeadLossUnderNetworkPolicies(t *testing.T) {
	requireKind(t)
	t.Parallel()
	g := NewWithT(t)
	ns := kindNamespace(t)
	rc := kindRayCluster(ns, "drain", 2)
	rc.Spec.NetworkPolicy = denyAllSample(t, ns).Spec.NetworkPolicy
	withUpgrade(rc, rayv1.RayClusterRollingUpdate, 120)
	create(t, rc)
	waitKindReady(t, rc, 2)
	g.Expect(networkPolicies(g, rc)).To(HaveLen(2))
	workers := uids(allWorkers(g, rc))

	update(t, rc, func(c *rayv1.RayCluster) {
		c.Spec.WorkerGroupSpecs[0].Template.Spec.Containers[0].Image = kindUpgradeImage
	})
	g.Eventually(func(g Gomega) {
		for _, p := range allWorkers(g, rc) {
			g.Expect(runsImage(&p, kindUpgradeImage)).To(BeTrue(), "pod %s runs the new image", p.Name)
			g.Expect(podReady(&p)).To(BeTrue(), "pod %s ready", p.Name)
			g.Expect(rayContainerStatus(&p).RestartCount).To(Equal(int32(1)), "pod %s: one restart, the update's", p.Name)
		}
	}, kindTimeout, time.Second).Should(Succeed())
	g.Expect(uids(allWorkers(g, rc))).To(Equal(workers), "the same pods, updated in place")
	g.Expect(eventMessages(g, rc, raycluster.EventDrainedWorker)).To(HaveEach(
		MatchRegexp(`released to be updated in place: its Ray node [0-9a-f]+ (is DEAD|has left the cluster)`)))
	g.Expect(eventMessages(g, rc, raycluster.EventDrainedWorker)).To(HaveLen(2))
	g.Expect(eventMessages(g, rc, raycluster.EventDrainFailed)).To(BeEmpty())
	g.Expect(eventMessages(g, rc, raycluster.EventDrainTimedOut)).To(BeEmpty())

	old := headPod(g, rc)
	g.Expect(k8s.Delete(context.Background(), old)).To(Succeed())
	newHeadReady(t, rc, old.UID)
	g.Eventually(func(g Gomega) {
		nodes := rayNodes(t, rc)
		for name := range workers {
			g.Expect(nodes).To(HaveKeyWithValue(name, BeElementOf("IDLE", "RUNNING")), "worker %s in the new GCS", name)
		}
	}, kindTimeout, 2*time.Second).Should(Succeed())
	g.Expect(uids(allWorkers(g, rc))).To(Equal(workers), "the workers keep their pods")
	expectOperatorNeverForbidden(t)
}

// KubeRay's RayService sample behind the deny-all sample's policies, with a user rule that lets pods labelled
// app=client in on the Serve port: the service becomes ready (the operator's Serve health checks and
// dashboard calls let in), a client pod gets Serve's answer from the head, and a pod without the label is
// refused on the same port.
func TestKindRayServiceUnderNetworkPolicies(t *testing.T) {
	requireKind(t)
	t.Parallel()
	g := NewWithT(t)
	ns := kindNamespace(t)
	svc := kubeRayServiceSample(t, "ray-service.sample.yaml", ns)
	fitKindSpec(&svc.Spec.RayClusterSpec)
	policy := denyAllSample(t, ns).Spec.NetworkPolicy
	clients := map[string]string{"app": "client"}
	policy.Head.IngressRules = append(policy.Head.IngressRules, networkingv1.NetworkPolicyIngressRule{
		From:  []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: clients}}},
		Ports: []networkingv1.NetworkPolicyPort{{Port: ptr.To(intstr.FromInt32(constants.DefaultServePort))}},
	})
	svc.Spec.RayClusterSpec.NetworkPolicy = policy
	createService(t, svc)
	active := waitKindServiceReady(t, svc)
	rc := &rayv1.RayCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: active}}
	g.Expect(networkPolicies(g, rc)).To(HaveKey(active + "-head"))
	head := headPod(g, rc)
	caller := startPodT(t, probePod(ns, "client", clients))
	outside := startPodT(t, probePod(ns, "outside", nil))

	expectReach(t, caller, head.Status.PodIP, constants.DefaultServePort)
	out, err := podExec(caller, "wget", "-qO-", "--tries=1", "-T", "5", fmt.Sprintf("http://%s:%d/-/healthz", head.Status.PodIP, constants.DefaultServePort))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(ContainSubstring("success"), "Serve's health answer, to a pod the user's rule lets in")
	expectRefused(t, outside, head.Status.PodIP, constants.DefaultServePort)
	expectOperatorNeverForbidden(t)
}

// asOperatorWithoutItsRule restarts the operator without --operator-namespace and --operator-pod-labels, as an
// operator run outside the cluster is (it adds no rule for itself to the head policies), and puts the operator
// back as it was once the test ends.
func asOperatorWithoutItsRule(t *testing.T) {
	t.Helper()
	args := operatorContainerArgs(t)
	var kept []string
	for _, a := range args {
		if !strings.HasPrefix(a, "--operator-namespace=") && !strings.HasPrefix(a, "--operator-pod-labels=") {
			kept = append(kept, a)
		}
	}
	if len(kept) != len(args)-2 {
		t.Fatalf("the operator's arguments have no --operator-namespace and --operator-pod-labels to remove: %v", args)
	}
	setOperatorArgs(t, kept)
	t.Cleanup(func() { setOperatorArgs(t, args) })
}

// operatorContainerArgs are the arguments of the operator's container.
func operatorContainerArgs(t *testing.T) []string {
	t.Helper()
	d, err := clientset.AppsV1().Deployments(kindOperatorNS).Get(context.Background(), kindDeployment, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return d.Spec.Template.Spec.Containers[0].Args
}

// setOperatorArgs replaces the arguments of the operator's container and waits for the rollout.
func setOperatorArgs(t *testing.T, args []string) {
	t.Helper()
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = strconv.Quote(a)
	}
	kubectl(t, "-n", kindOperatorNS, "patch", "deployment", kindDeployment, "--type=json", "-p",
		`[{"op":"replace","path":"/spec/template/spec/containers/0/args","value":[`+strings.Join(quoted, ",")+`]}]`)
	kubectl(t, "-n", kindOperatorNS, "rollout", "status", "deployment/"+kindDeployment, "--timeout=180s")
}

// What docs/operations.md says fails without the operator's rule, shown: with the operator restarted without
// its own pods' labels, the head policy has no rule for it, so its GCS calls are dropped; a drain under
// RollingUpdate cannot reach the GCS, is reported (DrainFailed, then DrainTimedOut), and the worker is updated
// once the drain's timeout has passed. Nothing restarts a worker it could not ask about.
func TestKindDrainTimesOutWithoutTheOperatorRule(t *testing.T) {
	requireKind(t)
	asOperatorWithoutItsRule(t)
	g := NewWithT(t)
	ns := kindNamespace(t)
	rc := kindRayCluster(ns, "unruled", 1)
	rc.Spec.NetworkPolicy = denyAllSample(t, ns).Spec.NetworkPolicy
	withUpgrade(rc, rayv1.RayClusterRollingUpdate, 20)
	create(t, rc)
	waitKindReady(t, rc, 1)
	head := networkPolicies(g, rc)[rc.Name+"-head"]
	g.Expect(head.Spec.Ingress).To(HaveLen(1), "only the cluster's own pods are let in: no operator rule")
	worker := allWorkers(g, rc)[0]

	update(t, rc, func(c *rayv1.RayCluster) {
		c.Spec.WorkerGroupSpecs[0].Template.Spec.Containers[0].Image = kindUpgradeImage
	})
	g.Eventually(func(g Gomega) {
		p := allWorkers(g, rc)[0]
		g.Expect(runsImage(&p, kindUpgradeImage)).To(BeTrue(), "pod %s runs the new image", p.Name)
		g.Expect(podReady(&p)).To(BeTrue(), "pod %s ready", p.Name)
	}, kindTimeout, time.Second).Should(Succeed())
	g.Expect(eventMessages(g, rc, raycluster.EventDrainFailed)).To(ContainElement(ContainSubstring("cannot reach Ray GCS")))
	g.Expect(eventMessages(g, rc, raycluster.EventDrainTimedOut)).To(HaveLen(1))
	g.Expect(eventMessages(g, rc, raycluster.EventDrainedWorker)).To(BeEmpty(), "no drain completed")
	p := allWorkers(g, rc)[0]
	g.Expect(p.UID).To(Equal(worker.UID), "updated in place")
	g.Expect(rayContainerStatus(&p).RestartCount).To(Equal(int32(1)), "one restart, the update's")
	g.Expect(restartRequests(g, rc)).To(BeEmpty(), "no restart asked for a worker the operator could not see in the GCS")
}
