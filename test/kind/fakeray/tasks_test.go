package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/kray-project/kray/pkg/ray"
)

// fakeClock is a clock the test moves.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

var nodeA, nodeB, nodeC = []byte("node-a"), []byte("node-b"), []byte("node-c")

// Placement as Ray's scheduler does it: one CPU per task, no lease on a draining or dead node
// (ClusterResourceScheduler::NodeAvailable), the oldest task first.
func TestTaskPlacement(t *testing.T) {
	for _, tc := range []struct {
		name    string
		tasks   int
		nodes   []taskNode
		want    map[string]int
		pending int
	}{
		{name: "every free CPU, the rest waits", tasks: 5, nodes: []taskNode{{id: nodeA, cpus: 2}, {id: nodeB, cpus: 1}},
			want: map[string]int{"node-a": 2, "node-b": 1}, pending: 2},
		{name: "a draining node takes no task", tasks: 3, nodes: []taskNode{{id: nodeA, cpus: 2, draining: true}, {id: nodeB, cpus: 1}},
			want: map[string]int{"node-b": 1}, pending: 2},
		{name: "a dead node takes no task", tasks: 1, nodes: []taskNode{{id: nodeA, cpus: 4, dead: true}},
			want: map[string]int{}, pending: 1},
		{name: "a node of no CPU (a head started with --num-cpus=0) takes no task", tasks: 2,
			nodes: []taskNode{{id: nodeA, cpus: 0}, {id: nodeB, cpus: 1}}, want: map[string]int{"node-b": 1}, pending: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := &fakeClock{t: time.Unix(1000, 0)}
			table := newTaskTable(clock.now)
			table.submit(tc.tasks, 10*time.Second)
			placed := table.place(tc.nodes)
			got := map[string]int{}
			for i, p := range placed {
				table.started(p.id)
				got[string(p.node)]++
				if p.id != uint64(i+1) {
					t.Errorf("attempt %d is task %d: the oldest task goes first", i, p.id)
				}
			}
			if len(got) != len(tc.want) {
				t.Errorf("placed %v, want %v", got, tc.want)
			}
			for n, c := range tc.want {
				if got[n] != c {
					t.Errorf("placed %v, want %v", got, tc.want)
				}
			}
			if s := table.snapshot(); s.Pending != tc.pending || s.Running != len(placed) {
				t.Errorf("pending %d running %d, want %d and %d", s.Pending, s.Running, tc.pending, len(placed))
			}
			// A second pass adds nothing while the nodes' CPUs are taken.
			if again := table.place(tc.nodes); len(again) != 0 {
				t.Errorf("a second pass placed %d more on busy nodes", len(again))
			}
		})
	}
}

// How an attempt ends, as Ray's TaskManager counts it: a task that ran to its end is done; one whose node died
// is killed, its time so far lost, and it runs again while it has retries (max_retries, 3 by default), without
// using one when its node died drained for preemption (ray-project/ray#54182); a node that refused the push never
// ran it.
func TestTaskOutcomes(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1000, 0)}
	table := newTaskTable(clock.now)
	table.submit(2, 30*time.Second)
	first := table.place([]taskNode{{id: nodeA, cpus: 2}})
	if len(first) != 2 {
		t.Fatalf("placed %d", len(first))
	}
	if got := table.snapshot(); got.Running != 0 || got.Pending != 2 {
		t.Errorf("placed, not begun: %+v, want both pending", got)
	}
	table.started(first[0].id)
	clock.advance(5 * time.Second)
	table.started(first[1].id)
	clock.advance(2 * time.Second)
	if got := table.snapshot().RunningSeconds; !reflect.DeepEqual(got, []float64{7, 2}) {
		t.Errorf("running for %v s, want [7 2]", got)
	}
	clock.advance(23 * time.Second)
	table.completed(first[0].id)
	clock.advance(-15 * time.Second) // the second attempt dies 10 s in
	table.killed(first[1].id, false)
	want := taskCounts{Submitted: 2, Completed: 1, Killed: 1, LostSeconds: 10, Pending: 1}
	if got := table.snapshot(); !reflect.DeepEqual(got, want) {
		t.Fatalf("after one done and one killed: %+v, want %+v", got, want)
	}
	if busy, since := table.busy(nodeA); busy || !since.Equal(clock.now()) {
		t.Errorf("node A busy %v since %v: it is idle since its last attempt ended", busy, since)
	}

	// The killed task is retried before a newer one, and its three retries die too: four attempts, then it fails.
	table.submit(1, time.Second)
	for i := range defaultTaskRetries {
		p := table.place([]taskNode{{id: nodeB, cpus: 1}})
		if len(p) != 1 || p[0].id != first[1].id {
			t.Fatalf("retry %d placed %+v, want task %d first", i+1, p, first[1].id)
		}
		table.started(p[0].id)
		table.killed(p[0].id, false)
	}
	if got := table.snapshot(); got.Failed != 1 || got.Killed != 4 || got.Pending != 1 {
		t.Errorf("after the retries: %+v, want 1 failed, 4 killed, the newer task pending", got)
	}

	// A node drained for preemption: its death uses no retry, however often.
	table = newTaskTable(clock.now)
	table.submit(1, time.Second)
	for range defaultTaskRetries + 2 {
		p := table.place([]taskNode{{id: nodeC, cpus: 1}})
		if len(p) != 1 {
			t.Fatal("the preempted task is not queued again")
		}
		table.started(p[0].id)
		table.killed(p[0].id, true)
	}
	if got := table.snapshot(); got.Failed != 0 || got.Pending != 1 {
		t.Errorf("preempted deaths: %+v, want the task pending, not failed", got)
	}

	// A refused push, or a node that died before it began the task: back at the head of the queue, nothing
	// counted.
	before := table.snapshot()
	p := table.place([]taskNode{{id: nodeC, cpus: 1}})
	table.refused(p[0].id)
	p = table.place([]taskNode{{id: nodeC, cpus: 1}})
	table.killed(p[0].id, false)
	if after := table.snapshot(); !reflect.DeepEqual(after, before) {
		t.Errorf("refused and killed before it began: %+v, then %+v", before, after)
	}
}

// DrainRaylet as Ray's raylet answers it (NodeManager::HandleDrainRaylet): an idle-termination drain of a node
// running a task is refused with Ray's message; a preemption drain is accepted, and the node then takes no task.
func TestDrainRayletReasons(t *testing.T) {
	r := &raylet{running: 1}
	idle := ray.EncodeDrainRequest([]byte("n"), "idle", time.Now().Add(time.Minute))
	idle[len([]byte("n"))+3] = drainReasonIdleTermination // the reason's varint, after field 1 (tag, length, ID) and field 2's tag
	if d, _ := ray.DecodeDrainRequest(idle); d.Reason != drainReasonIdleTermination {
		t.Fatalf("the test's request has reason %d", d.Reason)
	}
	reply, _ := ray.DecodeDrainReply(r.drainRaylet(idle))
	if reply.Accepted || reply.Rejection != "The node to be idle terminated is no longer idle." || r.draining {
		t.Errorf("idle termination of a busy node: %+v, draining %v", reply, r.draining)
	}
	reply, _ = ray.DecodeDrainReply(r.drainRaylet(ray.EncodeDrainRequest([]byte("n"), "upgrade", time.Now().Add(time.Minute))))
	if !reply.Accepted || !r.draining || r.exited() {
		t.Errorf("preemption drain of a busy node: %+v, draining %v, exited %v: accepted, draining, not gone", reply, r.draining, r.exited())
	}
}

// The wire, end to end: a worker drained while it runs a task finishes the task first, then its raylet exits
// (DEAD), and nothing is lost; a worker whose container is killed kills its task, which runs again elsewhere.
func TestTasksOnDrainedAndKilledWorkers(t *testing.T) {
	gcsPort, dashboardPort := freePort(t), freePort(t)
	startNode(t, "head-0", "--head", "--port="+gcsPort, "--dashboard-port="+dashboardPort, "--num-cpus=0",
		"--dashboard-agent-listen-port="+freePort(t), "--node-manager-port="+freePort(t))
	address := "127.0.0.1:" + gcsPort
	startNode(t, "worker-a", "--address="+address, "--num-cpus=1", "--dashboard-agent-listen-port="+freePort(t), "--node-manager-port="+freePort(t))
	client, err := (&ray.GRPCDialer{}).Dial(address, ray.Credentials{})
	if err != nil {
		t.Fatal(err)
	}
	dashboard := "http://127.0.0.1:" + dashboardPort
	nodeOf := func(instance string) ray.Node {
		nodes, _ := client.Nodes(context.Background())
		n, _ := ray.FindNode(nodes, instance, "")
		return n
	}
	waitFor(t, func() bool { return nodeOf("worker-a").Status == ray.NodeStatusIdle })
	submitTasks(t, dashboard, 1, 2*time.Second)
	waitFor(t, func() bool { return nodeOf("worker-a").Status == ray.NodeStatusRunning })
	worker := nodeOf("worker-a")
	if reply, err := client.Drain(context.Background(), worker.ID, "upgrade", time.Now().Add(time.Minute)); err != nil || !reply.Accepted {
		t.Fatalf("drain: %+v, %v", reply, err)
	}
	submitTasks(t, dashboard, 1, time.Second) // no node takes it: the worker drains, the head has no CPU
	if got := nodeOf("worker-a"); got.Status != ray.NodeStatusDraining {
		t.Errorf("the drained worker is %s while its task runs, want DRAINING", got.Status)
	}
	waitFor(t, func() bool {
		nodes, _ := client.Nodes(context.Background())
		n, _ := ray.FindNodeByID(nodes, worker.ID)
		return n.Status == ray.NodeStatusDead
	})
	if got := taskSummary(t, dashboard); got.Completed != 1 || got.Killed != 0 || got.LostSeconds != 0 || got.Pending != 1 {
		t.Errorf("after the drain: %+v, want the task completed, nothing lost, the new one pending", got)
	}

	// A new worker takes the pending task; its container is killed mid-task; a third worker runs it again.
	ctx, kill := context.WithCancel(context.Background())
	defer kill()
	b := parseFlags([]string{"--address=" + address, "--num-cpus=1", "--dashboard-agent-listen-port=" + freePort(t), "--node-manager-port=" + freePort(t)})
	go startUntil(ctx, b, node{instance: "worker-b", servePort: freePort(t)})
	waitFor(t, func() bool { return taskSummary(t, dashboard).Running == 1 })
	time.Sleep(300 * time.Millisecond)
	kill()
	waitFor(t, func() bool { return taskSummary(t, dashboard).Killed == 1 })
	startNode(t, "worker-c", "--address="+address, "--num-cpus=1", "--dashboard-agent-listen-port="+freePort(t), "--node-manager-port="+freePort(t))
	waitFor(t, func() bool { return taskSummary(t, dashboard).Completed == 2 })
	got := taskSummary(t, dashboard)
	if got.Killed != 1 || got.LostSeconds < 0.3 || got.LostSeconds > 1 || got.Failed != 0 || got.Submitted != 2 {
		t.Errorf("after the kill: %+v, want 1 killed after about 0.3 s, run again and completed", got)
	}
}

// submitTasks submits n tasks of length through the dashboard at url.
func submitTasks(t *testing.T, url string, n int, length time.Duration) {
	t.Helper()
	body, _ := json.Marshal(taskRequest{Count: n, Seconds: length.Seconds()})
	resp, err := http.Post(url+pathTasks, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("submit: %s", resp.Status)
	}
}

// taskSummary is the task counts the dashboard at url answers.
func taskSummary(t *testing.T, url string) taskCounts {
	t.Helper()
	resp, err := http.Get(url + pathTasks)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var c taskCounts
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil {
		t.Fatal(err)
	}
	return c
}
