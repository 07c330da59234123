package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
)

// figure is one measured number of a scenario.
type figure struct {
	Key   string  `json:"key"`
	Label string  `json:"label"`
	Unit  string  `json:"unit"`
	Value float64 `json:"value"`
}

// scenarioOutput is what a scenario measured: its figures and the pods created against the pods desired
// (every pod UID of the scenario's clusters that the recorder saw, however briefly).
type scenarioOutput struct {
	figures          []figure
	created, desired int
}

// Names of the create scenario and of its figures, which the growth run reads.
const (
	scenarioCreate = "create"
	figureAllReady = "allReady"
	figureP50      = "p50"
	figureP99      = "p99"
)

type scenario struct {
	name, title string
	run         func(ctx context.Context, e *env, ns string) (scenarioOutput, error)
	// floor marks the scenarios kruise-alone runs too.
	floor bool
}

// scenarios returns the benchmark's scenarios in run order; each runs in its own namespace bench-<name>
// and nothing is deleted between them.
func scenarios(cfg config) []scenario {
	return []scenario{
		{scenarioCreate, fmt.Sprintf("create %d RayClusters (1 head + 3 workers) at %g/s", cfg.Clusters, cfg.CreateRate), runCreate, true},
		{"scale", fmt.Sprintf("one group 0→%d while %d small clusters are created", cfg.ScaleTo, cfg.SmallClusters), runScale, true},
		{"scaledown", fmt.Sprintf("%d named-pod deletions across %d clusters (autoscaler patch)", cfg.DownClusters*cfg.DownPerClust, cfg.DownClusters), runScaleDown, false},
		{"evict", fmt.Sprintf("%d head evictions, one at a time", cfg.Evictions), runEvict, false},
	}
}

func names(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%03d", prefix, i)
	}
	return out
}

// createFor creates the named clusters: RayClusters, or for kruise-alone the objects kray would build.
func (e *env) createFor(ctx context.Context, ns string, clusters []string, s clusterSpec, rate float64) (map[string]time.Time, error) {
	if e.alone() {
		return e.createWorkloads(ctx, ns, clusters, s, rate)
	}
	return e.createClusters(ctx, ns, clusters, s, rate)
}

// waitReadyFor waits until the clusters are ready: their state, or for kruise-alone 1 + workers Ready pods.
func (e *env) waitReadyFor(ctx context.Context, keys map[string]time.Time, workers int) error {
	if e.alone() {
		return e.waitPodsReady(ctx, keys, workers)
	}
	return e.waitClustersReady(ctx, keys)
}

// runCreate creates cfg.Clusters small clusters at a fixed rate and measures the time until all are ready
// and each one's time from its create request to ready.
func runCreate(ctx context.Context, e *env, ns string) (scenarioOutput, error) {
	var out scenarioOutput
	start := time.Now()
	sent, err := e.createFor(ctx, ns, names("c", e.cfg.Clusters), smallCluster, e.cfg.CreateRate)
	out.desired = len(sent) * (1 + smallCluster.workers)
	if err != nil {
		return out, err
	}
	err = e.waitReadyFor(ctx, sent, smallCluster.workers)
	allReady := time.Since(start).Seconds()
	lat := e.timesToReady(sent)
	toFirstPod, readyToState := e.phases(sent)
	if err == nil {
		e.settle(ctx)
	}
	out.created = len(e.rec.podsOf(keySet(sent)))
	out.figures = []figure{
		{figureAllReady, "all ready (from the first create)", "s", allReady},
		{figureP50, "per-cluster create→ready p50", "s", percentile(lat, 0.50)},
		{figureP99, "per-cluster create→ready p99", "s", percentile(lat, 0.99)},
		{"firstPodP50", "per-cluster create→first pod p50", "s", percentile(toFirstPod, 0.50)},
		{"stateLagP50", "per-cluster last pod Ready→ready state p50", "s", percentile(readyToState, 0.50)},
	}
	return out, err
}

// runScale scales one cluster's worker group from 0 to cfg.ScaleTo and, at the same moment, starts
// creating cfg.SmallClusters small clusters; it measures the small clusters' time to ready (KubeRay
// issue #3909: one big reconcile starves the others) and the big group's time to all workers Ready.
func runScale(ctx context.Context, e *env, ns string) (scenarioOutput, error) {
	var out scenarioOutput
	big := clusterSpec{workers: 0, minWorkers: 0, maxWorkers: e.cfg.ScaleTo}
	bigSent, err := e.createFor(ctx, ns, []string{"big"}, big, 1)
	if err != nil {
		return out, err
	}
	if err := e.waitReadyFor(ctx, bigSent, 0); err != nil {
		return out, err
	}
	start := time.Now()
	if e.alone() {
		err = e.scaleWorkers(ctx, ns, "big", e.cfg.ScaleTo)
	} else {
		err = e.patchCluster(ctx, ns, "big", fmt.Sprintf(
			`[{"op":"replace","path":"/spec/workerGroupSpecs/0/replicas","value":%d}]`, e.cfg.ScaleTo))
	}
	if err != nil {
		return out, err
	}
	sent, err := e.createFor(ctx, ns, names("s", e.cfg.SmallClusters), smallCluster, e.cfg.CreateRate)
	out.desired = 1 + e.cfg.ScaleTo + len(sent)*(1+smallCluster.workers)
	if err != nil {
		return out, err
	}
	smallErr := e.waitReadyFor(ctx, sent, smallCluster.workers)
	lat := e.timesToReady(sent)
	bigKey := map[string]bool{ns + "/big": true}
	var bigReady time.Time
	bigErr := e.rec.waitFor(ctx, e.cfg.Timeout, func() bool {
		n, last := 0, time.Time{}
		for _, p := range e.rec.podsOfLocked(bigKey) {
			if p.NodeType != "head" && p.live() && !p.Ready.IsZero() {
				n++
				if p.Ready.After(last) {
					last = p.Ready
				}
			}
		}
		bigReady = last
		return n >= e.cfg.ScaleTo
	})
	if smallErr == nil && bigErr == nil {
		e.settle(ctx)
	}
	all := keySet(sent)
	all[ns+"/big"] = true
	out.created = len(e.rec.podsOf(all))
	out.figures = []figure{
		{"smallP50", "small clusters create→ready p50", "s", percentile(lat, 0.50)},
		{"smallP99", "small clusters create→ready p99", "s", percentile(lat, 0.99)},
		{"bigReady", fmt.Sprintf("big group 0→%d all Ready", e.cfg.ScaleTo), "s", sinceOrNaN(bigReady, start, bigErr)},
	}
	if smallErr != nil {
		return out, smallErr
	}
	if bigErr != nil {
		return out, fmt.Errorf("waiting for %d Ready workers of the big cluster: %w", e.cfg.ScaleTo, bigErr)
	}
	return out, nil
}

// runScaleDown creates cfg.DownClusters autoscaling clusters of 3+cfg.DownPerClust workers, then sends
// each, as the Ray autoscaler does, one JSON patch that lowers replicas to 3 and names cfg.DownPerClust
// workers in workersToDelete. It measures the time until every named pod is gone and counts collateral
// deletions: pods of these clusters deleted that nobody named (must be 0).
func runScaleDown(ctx context.Context, e *env, ns string) (scenarioOutput, error) {
	var out scenarioOutput
	spec := clusterSpec{workers: 3 + e.cfg.DownPerClust, minWorkers: 0, maxWorkers: 3 + e.cfg.DownPerClust + 5, autoscaling: true}
	sent, err := e.createClusters(ctx, ns, names("d", e.cfg.DownClusters), spec, e.cfg.CreateRate)
	out.desired = len(sent) * (1 + spec.workers)
	if err != nil {
		return out, err
	}
	if err := e.waitClustersReady(ctx, sent); err != nil {
		return out, err
	}
	victims, err := e.pickVictims(ctx, sent, spec.workers, e.cfg.DownPerClust)
	if err != nil {
		return out, err
	}
	start := time.Now()
	if err := e.patchAll(ctx, ns, victims); err != nil {
		return out, err
	}
	named := map[string]bool{}
	for _, vs := range victims {
		for _, v := range vs {
			named[v.UID] = true
		}
	}
	var lastGone time.Time
	waitErr := e.rec.waitFor(ctx, e.cfg.Timeout, func() bool {
		lastGone = time.Time{}
		for uid := range named {
			p := e.rec.pods[uid]
			if p.live() {
				return false
			}
			if p.Deleted.After(lastGone) {
				lastGone = p.Deleted
			}
		}
		return true
	})
	e.settle(ctx)
	pods := e.rec.podsOf(keySet(sent))
	collateral, createdAfter := 0, 0
	for _, p := range pods {
		if !named[p.UID] && !p.live() && p.Deleted.After(start) {
			collateral++
		}
		if p.Added.After(start) {
			createdAfter++
		}
	}
	out.created = len(pods)
	out.figures = []figure{
		{"allGone", fmt.Sprintf("all %d named pods gone", len(named)), "s", sinceOrNaN(lastGone, start, waitErr)},
		{"collateral", "collateral deletions (must be 0)", "pods", float64(collateral)},
		{"createdAfter", "pods created after the patch (must be 0)", "pods", float64(createdAfter)},
	}
	if waitErr != nil {
		return out, fmt.Errorf("waiting for the named pods to be deleted: %w", waitErr)
	}
	return out, nil
}

// pickVictims waits until each cluster has its `workers` worker pods Ready and returns, per cluster name,
// the first n of them by name.
func (e *env) pickVictims(ctx context.Context, sent map[string]time.Time, workers, n int) (map[string][]podRecord, error) {
	victims := map[string][]podRecord{}
	err := e.rec.waitFor(ctx, e.cfg.Timeout, func() bool {
		for key := range sent {
			var ready []podRecord
			for _, p := range e.rec.podsOfLocked(map[string]bool{key: true}) {
				if p.NodeType != "head" && p.live() && !p.Ready.IsZero() {
					ready = append(ready, p)
				}
			}
			if len(ready) < workers {
				return false
			}
			sort.Slice(ready, func(i, j int) bool { return ready[i].Name < ready[j].Name })
			victims[key] = ready[:n]
		}
		return true
	})
	if err != nil {
		return nil, fmt.Errorf("waiting for every worker to be Ready: %w", err)
	}
	return victims, nil
}

// patchAll sends, concurrently, one autoscaler-style patch per cluster: replicas lowered by the number of
// named pods and workersToDelete set, in the same request.
func (e *env) patchAll(ctx context.Context, ns string, victims map[string][]podRecord) error {
	var wg sync.WaitGroup
	errs := make(chan error, len(victims))
	for _, vs := range victims {
		podNames := make([]string, len(vs))
		for i, v := range vs {
			podNames[i] = v.Name
		}
		list, _ := json.Marshal(podNames)
		patch := fmt.Sprintf(`[{"op":"replace","path":"/spec/workerGroupSpecs/0/replicas","value":3},`+
			`{"op":"add","path":"/spec/workerGroupSpecs/0/scaleStrategy","value":{"workersToDelete":%s}}]`, list)
		wg.Add(1)
		go func(cluster string) {
			defer wg.Done()
			errs <- e.patchCluster(ctx, ns, cluster, patch)
		}(vs[0].Cluster)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// runEvict creates cfg.Evictions small clusters and evicts their heads one at a time (phase Failed, reason
// Evicted, as the kubelet leaves a pod; kwok keeps it so). Each eviction's time runs from the status write
// to the first Ready head pod of that cluster with another UID.
func runEvict(ctx context.Context, e *env, ns string) (scenarioOutput, error) {
	var out scenarioOutput
	clusters := names("e", e.cfg.Evictions)
	sent, err := e.createClusters(ctx, ns, clusters, smallCluster, e.cfg.CreateRate)
	out.desired = len(sent)*(1+smallCluster.workers) + len(sent) // plus one replacement head each
	if err != nil {
		return out, err
	}
	if err := e.waitClustersReady(ctx, sent); err != nil {
		return out, err
	}
	var lat []float64
	var runErr error
	for _, c := range clusters {
		d, err := e.evictHead(ctx, ns, c)
		if err != nil {
			runErr = err
			break
		}
		lat = append(lat, d.Seconds())
	}
	e.settle(ctx)
	out.created = len(e.rec.podsOf(keySet(sent)))
	out.figures = []figure{
		{"p50", "eviction→Ready head p50", "s", percentile(lat, 0.50)},
		{"p99", "eviction→Ready head p99", "s", percentile(lat, 0.99)},
	}
	return out, runErr
}

// evictHead evicts the Ready head pod of cluster and returns the time until a new head pod is Ready.
func (e *env) evictHead(ctx context.Context, ns, cluster string) (time.Duration, error) {
	key := map[string]bool{ns + "/" + cluster: true}
	var old podRecord
	if err := e.rec.waitFor(ctx, e.cfg.Timeout, func() bool {
		for _, p := range e.rec.podsOfLocked(key) {
			if p.NodeType == "head" && p.live() && !p.Ready.IsZero() && !p.Failed {
				old = p
				return true
			}
		}
		return false
	}); err != nil {
		return 0, fmt.Errorf("no Ready head for %s: %w", cluster, err)
	}
	start := time.Now()
	if err := e.evictPod(ctx, ns, old.Name); err != nil {
		return 0, err
	}
	var ready time.Time
	if err := e.rec.waitFor(ctx, e.cfg.Timeout, func() bool {
		for _, p := range e.rec.podsOfLocked(key) {
			if p.NodeType == "head" && p.UID != old.UID && p.live() && !p.Ready.IsZero() {
				ready = p.Ready
				return true
			}
		}
		return false
	}); err != nil {
		return 0, fmt.Errorf("head of %s not replaced: %w", cluster, err)
	}
	return ready.Sub(start), nil
}

// evictPod makes a pod look the way the kubelet leaves an evicted one: phase Failed, reason Evicted, a
// DisruptionTarget condition, Ready false and every container terminated.
func (e *env) evictPod(ctx context.Context, ns, name string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p, err := e.cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.Now()
		msg := "The node was low on resource: memory."
		p.Status.Phase, p.Status.Reason, p.Status.Message = corev1.PodFailed, "Evicted", msg
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.DisruptionTarget,
			Status: corev1.ConditionTrue, Reason: "TerminationByKubelet", Message: msg, LastTransitionTime: now})
		for i := range p.Status.Conditions {
			if t := p.Status.Conditions[i].Type; t == corev1.PodReady || t == corev1.ContainersReady {
				p.Status.Conditions[i].Status, p.Status.Conditions[i].Reason = corev1.ConditionFalse, "PodFailed"
			}
		}
		for i := range p.Status.ContainerStatuses {
			p.Status.ContainerStatuses[i].Ready = false
			p.Status.ContainerStatuses[i].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: 137, Reason: "Error", StartedAt: now, FinishedAt: now}}
		}
		_, err = e.cs.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
		return err
	})
}

// percentile is the nearest-rank percentile of xs (NaN when empty).
func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	i := int(math.Ceil(p*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

// sinceOrNaN is t-start in seconds, or NaN when the wait failed or t is unset.
func sinceOrNaN(t, start time.Time, err error) float64 {
	if err != nil || t.IsZero() {
		return math.NaN()
	}
	return t.Sub(start).Seconds()
}
