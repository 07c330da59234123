package main

import (
	"sort"
	"sync"
	"time"
)

// defaultTaskRetries is Ray's default max_retries of a normal task (ray.remote's max_retries): a task whose
// worker dies is run again up to three times.
const defaultTaskRetries = 3

// taskCounts are the counts the fake's task table keeps over its life, read back through the dashboard.
type taskCounts struct {
	// Submitted counts tasks submitted; Completed, tasks that ran to their end.
	Submitted int `json:"submitted"`
	Completed int `json:"completed"`
	// Killed counts running attempts that ended with their node (a container killed, a raylet gone): Ray's
	// NODE_DIED and WORKER_DIED failures.
	Killed int `json:"killed"`
	// Failed counts tasks killed with no retry left: Ray raises their error to the caller.
	Failed int `json:"failed"`
	// LostSeconds adds up, over the killed attempts, how long each had run: the work done again or lost.
	LostSeconds float64 `json:"lostTaskSeconds"`
	// Pending and Running are the tasks waiting for a node (or for the node placed on to begin them) and those
	// running now.
	Pending int `json:"pending"`
	Running int `json:"running"`
	// RunningSeconds is how long each running attempt has run, oldest first: what a reader loses with the head
	// when the head goes (the driver and its tasks go with it).
	RunningSeconds []float64 `json:"runningTaskSeconds,omitempty"`
}

// task is one normal task of the fake: it runs for length on one CPU of a node.
type task struct {
	id          uint64
	length      time.Duration
	retriesLeft int
	// node is the node ID of the attempt placed, nil while pending; started is when its node began it, zero
	// until then.
	node    []byte
	started time.Time
}

// taskNode is what placement needs of one node: its ID, its CPUs, and whether it may take work. Ray's scheduler
// gives no lease to a node that is draining or dead (ClusterResourceScheduler::NodeAvailable).
type taskNode struct {
	id       []byte
	cpus     int
	draining bool
	dead     bool
}

// taskTable is the head's table of tasks: the queue, the running attempts and the counts. In Ray the driver
// owns its tasks and the raylets lease them workers; in the fake the head does both, with the same outcome for
// what is counted here: each task takes one CPU of a node that is neither draining nor dead, runs to its end
// unless its node goes, and a killed attempt is retried while the task has retries left.
type taskTable struct {
	mu      sync.Mutex
	now     func() time.Time
	nextID  uint64
	pending []*task
	running map[uint64]*task
	// ended is when each node's last attempt ended, by node ID: a node is idle since then.
	ended  map[string]time.Time
	counts taskCounts
}

func newTaskTable(now func() time.Time) *taskTable {
	return &taskTable{now: now, running: map[uint64]*task{}, ended: map[string]time.Time{}}
}

// submit queues n tasks of length each, with Ray's default retries.
func (t *taskTable) submit(n int, length time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for range n {
		t.nextID++
		t.pending = append(t.pending, &task{id: t.nextID, length: length, retriesLeft: defaultTaskRetries})
	}
	t.counts.Submitted += n
}

// placement is one attempt placed on a node: the task's ID and length, and the node's ID.
type placement struct {
	id     uint64
	length time.Duration
	node   []byte
}

// place starts pending tasks, oldest first, on the free CPUs of the nodes that may take work, filling the nodes
// in the order given, and returns the attempts started.
func (t *taskTable) place(nodes []taskNode) []placement {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []placement
	for _, n := range nodes {
		if n.draining || n.dead {
			continue
		}
		free := n.cpus - t.runningOnLocked(n.id)
		for ; free > 0 && len(t.pending) > 0; free-- {
			k := t.pending[0]
			t.pending = t.pending[1:]
			k.node, k.started = n.id, time.Time{}
			t.running[k.id] = k
			out = append(out, placement{id: k.id, length: k.length, node: n.id})
		}
	}
	return out
}

// started records that the node of the attempt id began it.
func (t *taskTable) started(id uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if k, ok := t.running[id]; ok {
		k.started = t.now()
	}
}

// runningOn counts the attempts placed on the node id.
func (t *taskTable) runningOn(id []byte) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.runningOnLocked(id)
}

func (t *taskTable) runningOnLocked(id []byte) int {
	n := 0
	for _, k := range t.running {
		if string(k.node) == string(id) {
			n++
		}
	}
	return n
}

// completed records that the attempt id ran to its end.
func (t *taskTable) completed(id uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if k, ok := t.running[id]; ok {
		t.end(k)
		t.counts.Completed++
	}
}

// refused puts the attempt id back at the head of the queue, uncounted: it never began (its node began draining
// as the task was sent, or could not be reached), as Ray's owner asks for another lease.
func (t *taskTable) refused(id uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if k, ok := t.running[id]; ok {
		t.requeue(k)
	}
}

// killed records that the attempt id died with its node, having run since it started; one that had not begun
// is refused. The task is queued again at the head of the queue while it has retries left; a node that was
// being drained (preempted) does not use one up, as Ray's TaskManager does not for a NODE_DIED whose node died
// AUTOSCALER_DRAIN_PREEMPTED (ray-project/ray#54182). Out of retries, the task has failed.
func (t *taskTable) killed(id uint64, preempted bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	k, ok := t.running[id]
	if !ok {
		return
	}
	if k.started.IsZero() {
		t.requeue(k)
		return
	}
	t.counts.Killed++
	t.counts.LostSeconds += t.now().Sub(k.started).Seconds()
	if !preempted && k.retriesLeft == 0 {
		t.counts.Failed++
		t.end(k)
		return
	}
	if !preempted {
		k.retriesLeft--
	}
	t.requeue(k)
}

// requeue takes the attempt k off its node and puts its task first in the queue.
func (t *taskTable) requeue(k *task) {
	t.end(k)
	t.pending = append([]*task{k}, t.pending...)
}

// end takes the attempt k off its node.
func (t *taskTable) end(k *task) {
	delete(t.running, k.id)
	t.ended[string(k.node)] = t.now()
	k.node = nil
}

// busy reports whether the node id runs an attempt it began, and else since when it has run none (the zero
// time when it never ran one).
func (t *taskTable) busy(id []byte) (bool, time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, k := range t.running {
		if string(k.node) == string(id) && !k.started.IsZero() {
			return true, time.Time{}
		}
	}
	return false, t.ended[string(id)]
}

// snapshot is the counts now, with the tasks pending and running.
func (t *taskTable) snapshot() taskCounts {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.counts
	c.Pending = len(t.pending)
	for _, k := range t.running {
		if k.started.IsZero() {
			c.Pending++
		} else {
			c.Running++
			c.RunningSeconds = append(c.RunningSeconds, t.now().Sub(k.started).Seconds())
		}
	}
	sort.Sort(sort.Reverse(sort.Float64Slice(c.RunningSeconds)))
	return c
}
