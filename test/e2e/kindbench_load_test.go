package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/constants"
)

// The kind upgrade benchmark's load and what it loses: a driver that keeps the cluster busy through the fake
// Ray head's task API, and the bytes the registry sends.

// benchTaskSeconds and benchTaskEvery shape the benchmark's load: one task of benchTaskSeconds every
// benchTaskEvery keeps three of the four workers' CPUs busy.
const (
	benchTaskSeconds = 15
	benchTaskEvery   = 5 * time.Second
)

// taskOutcome is what the load's tasks came to over an upgrade.
type taskOutcome struct {
	completed, killed int
	lostSeconds       float64
	// dropped counts the tasks queued on a head that went: they never ran.
	dropped int
	// refused counts the submissions no head took (none was up).
	refused int
}

// headTasks is what the load read from one head: a head pod, or a later run of Ray in the same pod. atMark is
// its counts at the mark (nil for a head that came later, whose counts start at zero), last the last counts it
// answered, and gone whether it is gone.
type headTasks struct {
	uid          types.UID
	name         string
	atMark, last *rayTaskCounts
	gone         bool
}

// taskLoad submits one task every benchTaskEvery to the cluster's newest ready head, and reads every head's
// counts each second through the API server's pod proxy, so that a head that goes still leaves its last counts.
type taskLoad struct {
	rc     *rayv1.RayCluster
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	heads   []*headTasks // oldest first
	refused int
}

// startTaskLoad starts the load on rc; stop ends it.
func startTaskLoad(t *testing.T, rc *rayv1.RayCluster) *taskLoad {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	l := &taskLoad{rc: rc, cancel: cancel, done: make(chan struct{})}
	t.Cleanup(cancel)
	go l.run(ctx)
	return l
}

func (l *taskLoad) run(ctx context.Context) {
	defer close(l.done)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	lastSubmit := time.Time{}
	for {
		ready := l.poll(ctx)
		if time.Since(lastSubmit) >= benchTaskEvery {
			lastSubmit = time.Now()
			if len(ready) == 0 || l.submit(ctx, ready[len(ready)-1]) != nil {
				l.mu.Lock()
				l.refused++
				l.mu.Unlock()
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// poll reads the counts of every head of the cluster, records which are gone, and returns the ready head pods.
func (l *taskLoad) poll(ctx context.Context) []corev1.Pod {
	var pods corev1.PodList
	if err := k8s.List(ctx, &pods, client.InNamespace(l.rc.Namespace),
		client.MatchingLabels{constants.LabelCluster: l.rc.Name, constants.LabelNodeType: constants.NodeTypeHead}); err != nil {
		return nil
	}
	live := map[types.UID]corev1.Pod{}
	var ready []corev1.Pod
	for _, p := range pods.Items {
		live[p.UID] = p
		if p.DeletionTimestamp == nil && podReady(&p) {
			ready = append(ready, p)
		}
	}
	l.mu.Lock()
	for _, p := range pods.Items {
		if p.Status.PodIP != "" && !slices.ContainsFunc(l.heads, func(h *headTasks) bool { return h.uid == p.UID }) {
			l.heads = append(l.heads, &headTasks{uid: p.UID, name: p.Name})
		}
	}
	heads := slices.Clone(l.heads)
	l.mu.Unlock()
	for _, h := range heads {
		if h.gone {
			continue
		}
		p, exists := live[h.uid]
		c, err := headCounts(ctx, l.rc.Namespace, h.name)
		l.mu.Lock()
		switch {
		case !exists || (err != nil && p.DeletionTimestamp != nil):
			h.gone = true
		case err != nil:
		case h.last != nil && c.Submitted < h.last.Submitted:
			// Ray started again in the same pod (its container restarted): the head before it is gone.
			h.gone = true
			l.heads = append(l.heads, &headTasks{uid: h.uid, name: h.name, last: c})
		default:
			h.last = c
		}
		l.mu.Unlock()
	}
	return ready
}

// headCounts reads the task counts of the head pod name through the API server's pod proxy.
func headCounts(ctx context.Context, ns, name string) (*rayTaskCounts, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	raw, err := clientset.CoreV1().Pods(ns).ProxyGet("http", name, "8265", "/api/fake/tasks", nil).DoRaw(ctx)
	if err != nil {
		return nil, err
	}
	c := &rayTaskCounts{}
	return c, json.Unmarshal(raw, c)
}

// submit submits one task to the head pod.
func (l *taskLoad) submit(ctx context.Context, head corev1.Pod) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	body := fmt.Sprintf(`{"count": 1, "seconds": %d}`, benchTaskSeconds)
	return clientset.CoreV1().RESTClient().Post().
		AbsPath("/api/v1/namespaces", head.Namespace, "pods", head.Name+":8265", "proxy/api/fake/tasks").
		SetHeader("Content-Type", "application/json").Body([]byte(body)).Do(ctx).Error()
}

// running is how many tasks the newest head runs now.
func (l *taskLoad) running() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := len(l.heads) - 1; i >= 0; i-- {
		if h := l.heads[i]; !h.gone && h.last != nil {
			return h.last.Running
		}
	}
	return 0
}

// mark starts the count: what the load's heads do from now on is what stop returns.
func (l *taskLoad) mark() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, h := range l.heads {
		c := rayTaskCounts{}
		if h.last != nil {
			c = *h.last
		}
		h.atMark = &c
	}
	l.refused = 0
}

// stop ends the load, reads every head once more and returns what its tasks came to since the mark: a head's
// own counts (completed, killed and the seconds they had run), and for a head that went, the tasks it ran then,
// killed with the driver and the seconds they had run by its last answer, and those it queued, dropped.
func (l *taskLoad) stop(ctx context.Context) taskOutcome {
	l.cancel()
	<-l.done
	l.poll(ctx)
	l.mu.Lock()
	defer l.mu.Unlock()
	out := taskOutcome{refused: l.refused}
	for _, h := range l.heads {
		if h.last == nil {
			continue
		}
		from := rayTaskCounts{}
		if h.atMark != nil {
			from = *h.atMark
		}
		out.completed += h.last.Completed - from.Completed
		out.killed += h.last.Killed - from.Killed
		out.lostSeconds += h.last.LostSeconds - from.LostSeconds
		if h.gone {
			out.killed += h.last.Running
			for _, s := range h.last.RunningSeconds {
				out.lostSeconds += s
			}
			out.dropped += h.last.Pending
		}
	}
	return out
}

// registryBytes samples, every second, how many bytes the kind cluster's registry has sent (its tc classes,
// hack/bench/kind.sh), and adds up those sent while short() held at the sample before.
type registryBytes struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu           sync.Mutex
	first, total int64
	short        int64
}

// watchRegistryBytes starts the sampling of the registry container's sent bytes.
func watchRegistryBytes(t *testing.T, container string, short func() bool) *registryBytes {
	t.Helper()
	first, err := registrySent(container)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	r := &registryBytes{cancel: cancel, done: make(chan struct{}), first: first, total: first}
	go func() {
		defer close(r.done)
		wasShort := short()
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
			n, err := registrySent(container)
			if err != nil {
				continue
			}
			r.mu.Lock()
			if wasShort {
				r.short += n - r.total
			}
			r.total = n
			r.mu.Unlock()
			wasShort = short()
		}
	}()
	return r
}

// stop ends the sampling and returns the bytes sent while short, and in all.
func (r *registryBytes) stop() (short, all int64) {
	r.cancel()
	<-r.done
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.short, r.total - r.first
}

// registrySent is how many bytes the registry container has sent through its tc classes: the sum of the
// "Sent N bytes" lines of `tc -s class show`.
func registrySent(container string) (int64, error) {
	out, err := exec.Command("docker", "exec", container, "tc", "-s", "class", "show", "dev", "eth0").Output()
	if err != nil {
		return 0, fmt.Errorf("tc class show in %s: %w", container, err)
	}
	var n int64
	for _, line := range strings.Split(string(out), "\n") {
		var sent int64
		if _, err := fmt.Sscanf(strings.TrimSpace(line), "Sent %d bytes", &sent); err == nil {
			n += sent
		}
	}
	return n, nil
}

// forgetRefs removes from a node's containerd every reference to the manifest the image reference $1 names:
// the CRI keeps an image under its tag, its digest and its ID, and its layers stay while any one of them does.
// --sync removes the unpacked layers at once, which would otherwise spare the next pull their bytes.
const forgetRefs = `d=$(ctr -n k8s.io images ls | awk -v r="$1" '$1 == r { print $3 }'); ` +
	`[ -z "$d" ] || ctr -n k8s.io images rm --sync $(ctr -n k8s.io images ls | awk -v d="$d" '$3 == d { print $1 }')`

// forgetImage removes image from every kind node's containerd, so the next pod or pull of it fetches it again.
func forgetImage(t *testing.T, image string) {
	t.Helper()
	var nodes corev1.NodeList
	if err := k8s.List(context.Background(), &nodes); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes.Items {
		// kind names each node's container after the node.
		if out, err := exec.Command("docker", "exec", n.Name, "sh", "-c", forgetRefs, "_", image).CombinedOutput(); err != nil {
			t.Fatalf("remove %s from node %s: %v: %s", image, n.Name, err, out)
		}
	}
}
