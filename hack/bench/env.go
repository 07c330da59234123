package main

import (
	"context"
	"fmt"
	"log"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// env is one operator running on one fresh cluster, with the harness's clients and recorder.
type env struct {
	cfg    config
	cl     *localCluster
	op     *operator
	proc   *process
	cs     kubernetes.Interface
	dyn    dynamic.Interface
	rec    *recorder
	kruise int // kruise-manager's PID
}

// newEnv installs op's CRDs, starts the recorder and then op. The caller must close the env.
func newEnv(ctx context.Context, cfg config, cl *localCluster, op *operator) (*env, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", cl.kubeconfig())
	if err != nil {
		return nil, err
	}
	// The harness must never be the bottleneck: its own client limit is far above the operators'.
	rc.QPS, rc.Burst = 1000, 2000
	e := &env{cfg: cfg, cl: cl, op: op}
	if e.cs, err = kubernetes.NewForConfig(rc); err != nil {
		return nil, err
	}
	if e.dyn, err = dynamic.NewForConfig(rc); err != nil {
		return nil, err
	}
	if e.kruise, err = cl.kruisePID(); err != nil {
		return nil, err
	}
	if err := cl.kubectl(ctx, "apply", "--server-side", "--force-conflicts", "-f", op.crdDir); err != nil {
		return nil, err
	}
	if err := e.waitRayCRDs(ctx); err != nil {
		return nil, err
	}
	if e.rec, err = startRecorder(ctx, e.cs, e.dyn); err != nil {
		return nil, err
	}
	if op.binary == "" {
		return e, nil // kruise-alone
	}
	logFile := filepath.Join(cl.env["KRAY_LOCAL_DIR"], "logs", op.name+".log")
	if e.proc, err = op.start(ctx, cl.kubeconfig(), logFile); err != nil {
		e.rec.close()
		return nil, err
	}
	log.Printf("%s: running (pid %d, log %s)", op.name, e.proc.pid(), logFile)
	return e, nil
}

func (e *env) close() {
	if e.proc != nil {
		e.proc.stop()
	}
	e.rec.close()
}

// sample reads the operator's and kruise-manager's counters; kruise-alone has no operator to sample.
func (e *env) sample() (opS, kruiseS procSample, err error) {
	if e.proc == nil {
		kruiseS, err = sampleProcess(e.kruise, e.cl.kruiseMetricsURL())
		return opS, kruiseS, err
	}
	if opS, err = sampleProcess(e.proc.pid(), "http://127.0.0.1:"+operatorMetricsPort+"/metrics"); err != nil {
		return opS, kruiseS, fmt.Errorf("sampling %s: %w", e.op.name, err)
	}
	if kruiseS, err = sampleProcess(e.kruise, e.cl.kruiseMetricsURL()); err != nil {
		return opS, kruiseS, fmt.Errorf("sampling kruise-manager: %w", err)
	}
	return opS, kruiseS, nil
}

// runScenario creates the scenario's namespace, samples the processes around sc.run and returns the
// result; a scenario error is recorded in the result, never hidden.
func (e *env) runScenario(ctx context.Context, sc scenario) scenarioResult {
	res := scenarioResult{Name: sc.name, Title: sc.title}
	ns := "bench-" + sc.name
	if _, err := e.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		res.Error = err.Error()
		return res
	}
	if err := e.waitForServiceAccount(ctx, ns); err != nil {
		res.Error = err.Error()
		return res
	}
	opBefore, kBefore, err := e.sample()
	if err != nil {
		res.Error = err.Error()
		return res
	}
	start := time.Now()
	out, err := sc.run(ctx, e, ns)
	res.Seconds = time.Since(start).Seconds()
	res.Figures, res.PodsCreated, res.PodsDesired = out.figures, out.created, out.desired
	if err != nil {
		res.Error = err.Error()
	}
	opAfter, kAfter, serr := e.sample()
	if serr != nil {
		res.Error += "; " + serr.Error()
		return res
	}
	res.Operator, res.Kruise = delta(opBefore, opAfter), delta(kBefore, kAfter)
	return res
}

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// waitRayCRDs waits until every ray.io CRD just applied is established, so that an operator starting next
// finds all its kinds served (kray watches RayJobs as well as RayClusters).
func (e *env) waitRayCRDs(ctx context.Context) error {
	list, err := e.dyn.Resource(crdGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	found := false
	for _, crd := range list.Items {
		if group, _, _ := unstructured.NestedString(crd.Object, "spec", "group"); group != "ray.io" {
			continue
		}
		found = true
		if err := e.waitEstablished(ctx, crd.GetName()); err != nil {
			return err
		}
	}
	if !found {
		return fmt.Errorf("no ray.io CRD installed")
	}
	return nil
}

// waitEstablished waits until the CRD's Established condition is True (kubectl wait fails instead while
// the CRD has no conditions yet).
func (e *env) waitEstablished(ctx context.Context, name string) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		crd, err := e.dyn.Resource(crdGVR).Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
			for _, c := range conds {
				if m, ok := c.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
					return nil
				}
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("CRD %s not established after 60 s (last error: %v)", name, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitForServiceAccount waits for the namespace's default ServiceAccount: no pod is admitted before it.
func (e *env) waitForServiceAccount(ctx context.Context, ns string) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, err := e.cs.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no default ServiceAccount in %s: %w", ns, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// createClusters creates the named RayClusters at rate per second and returns when each was sent (keyed by
// namespace/name) and the first create error.
func (e *env) createClusters(ctx context.Context, ns string, names []string, s clusterSpec, rate float64) (map[string]time.Time, error) {
	return createAtRate(ctx, ns, names, rate, func(ctx context.Context, name string) error {
		_, err := e.dyn.Resource(rayClusterGVR).Namespace(ns).Create(ctx, rayCluster(ns, name, s), metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("creating RayCluster %s/%s: %w", ns, name, err)
		}
		return nil
	})
}

// createAtRate calls create for each name at rate per second, each call in its own goroutine so that a slow
// answer does not lower the rate, and returns when each call started (keyed by namespace/name) and the first
// error.
func createAtRate(ctx context.Context, ns string, names []string, rate float64, create func(ctx context.Context, name string) error) (map[string]time.Time, error) {
	var (
		mu      sync.Mutex
		wg      sync.WaitGroup
		sent    = map[string]time.Time{}
		firstEr error
	)
	tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer tick.Stop()
	for i, name := range names {
		if i > 0 {
			select {
			case <-tick.C:
			case <-ctx.Done():
				return sent, ctx.Err()
			}
		}
		wg.Add(1)
		go func(name string) {
			defer wg.Done()
			t := time.Now()
			err := create(ctx, name)
			mu.Lock()
			defer mu.Unlock()
			if err != nil && firstEr == nil {
				firstEr = err
			}
			sent[ns+"/"+name] = t
		}(name)
	}
	wg.Wait()
	return sent, firstEr
}

// patchCluster applies a JSON patch to a RayCluster, the way the Ray autoscaler does.
func (e *env) patchCluster(ctx context.Context, ns, name, patch string) error {
	_, err := e.dyn.Resource(rayClusterGVR).Namespace(ns).Patch(ctx, name, types.JSONPatchType, []byte(patch), metav1.PatchOptions{})
	if err != nil {
		return fmt.Errorf("patching RayCluster %s/%s: %w", ns, name, err)
	}
	return nil
}

// waitClustersReady waits until every cluster in keys has been seen with state ready.
func (e *env) waitClustersReady(ctx context.Context, keys map[string]time.Time) error {
	err := e.rec.waitFor(ctx, e.cfg.Timeout, func() bool {
		for k := range keys {
			if _, ok := e.rec.readyAt[k]; !ok {
				return false
			}
		}
		return true
	})
	if err != nil {
		return fmt.Errorf("waiting for %d clusters to be ready (%d are): %w", len(keys), e.readyCount(keys), err)
	}
	return nil
}

func (e *env) readyCount(keys map[string]time.Time) int {
	e.rec.mu.Lock()
	defer e.rec.mu.Unlock()
	n := 0
	for k := range keys {
		if _, ok := e.rec.readyAt[k]; ok {
			n++
		}
	}
	return n
}

// timesToReady returns, per cluster of sent, the seconds from its create request to its first ready state.
func (e *env) timesToReady(sent map[string]time.Time) []float64 {
	e.rec.mu.Lock()
	defer e.rec.mu.Unlock()
	var out []float64
	for k, t := range sent {
		if r, ok := e.rec.readyAt[k]; ok {
			out = append(out, r.Sub(t).Seconds())
		}
	}
	return out
}

// phases splits each cluster of sent into the seconds from its create request to its first pod (the
// operator's part before Kruise or the kubelet start any pod) and from its last pod Ready to its ready state
// (the operator noticing and writing it; zero for kruise-alone, whose ready is its last pod's).
func (e *env) phases(sent map[string]time.Time) (toFirstPod, readyToState []float64) {
	e.rec.mu.Lock()
	defer e.rec.mu.Unlock()
	for k, t := range sent {
		var first, lastReady time.Time
		for _, p := range e.rec.podsOfLocked(map[string]bool{k: true}) {
			if first.IsZero() || p.Added.Before(first) {
				first = p.Added
			}
			if p.Ready.After(lastReady) {
				lastReady = p.Ready
			}
		}
		if !first.IsZero() {
			toFirstPod = append(toFirstPod, first.Sub(t).Seconds())
		}
		if r, ok := e.rec.readyAt[k]; ok && !lastReady.IsZero() {
			readyToState = append(readyToState, max(0, r.Sub(lastReady).Seconds()))
		}
	}
	return toFirstPod, readyToState
}

// settle lets late events arrive (a duplicate pod, a late deletion) before pods are counted.
func (e *env) settle(ctx context.Context) {
	select {
	case <-time.After(e.cfg.Settle):
	case <-ctx.Done():
	}
}

func keySet[V any](m map[string]V) map[string]bool {
	out := make(map[string]bool, len(m))
	for k := range m {
		out[k] = true
	}
	return out
}
