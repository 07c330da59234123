// Package membership decides which worker pods of a running Ray cluster kray restarts because the cluster's
// GCS no longer lists their Ray node. It is pure: the controller hands it the pods of each reconcile and the
// GCS's answers, with the time on the operator's own clock, and restarts the workers it names.
//
// Restarting a worker kills its running tasks and actors, and Ray brings a lost worker back on its own within
// a minute or so (a raylet whose GCS restarted without fault tolerance exits at its next liveness self-check,
// raylet_liveness_self_check_interval_ms, 60 s by default; one that cannot reach its GCS exits after
// gcs_rpc_server_reconnect_timeout_s, 60 s). A restart kray did not need costs more than a heal that comes
// late, so a worker is restarted only when all of these hold:
//   - the head pod runs and is ready, and the GCS answered with a list of nodes that holds this cluster's head,
//     alive, registered under the head pod's name at the head pod's IP: an empty answer, or the GCS of another
//     cluster, decides nothing;
//   - the worker's Ray container has been running the same run (container ID) while that GCS did not list a
//     node of it for a grace period, measured from the first answer that missed it, on the operator's clock
//     only: no timestamp of a node or of the API server is compared with another clock.
//
// Time out of the GCS is counted per head run (a new head container is a new GCS: everything starts over) and
// per worker run (a restarted container starts over).
//
// One case needs no grace: a worker run that a GCS of cluster ID X listed alive, at least BindAfter after the
// run was first seen, is bound to X. A raylet keeps the cluster ID it fetched first, and a GCS refuses the
// calls of another cluster's raylet, so while the head's current GCS answers with another ID and the cluster
// has no fault tolerance (which keeps the ID), that run can never join again: it is restarted at once. What
// is remembered lives in memory only; an operator that restarts starts over from its first answer, with no
// binding, which can only delay a restart, never cause one.
package membership

import (
	"slices"
	"time"

	"github.com/kray-project/kray/pkg/ray"
)

// Grace periods, counted from the first answer of a head run's GCS that did not list the worker.
const (
	// DefaultGrace is the grace of a worker run that kray first saw while the head's current GCS was answering:
	// a starting raylet registers within seconds, and Ray's readiness probe fails for one that cannot.
	DefaultGrace = 60 * time.Second
	// DefaultHeadReplacedGrace is the grace of a worker run that was running before the head's current run, in
	// a cluster without GCS fault tolerance. Such a run either belonged to the GCS that is gone, or waits for
	// the new one (it restarted while the head was away longer than Ray's reconnect timeout, or started before
	// the head) and registers within seconds. Ray's raylet ends the first kind at its next liveness self-check,
	// within 60 s of the new GCS by default, and the kubelet starts a new run: kray waits longer than that, so
	// that with Ray's defaults it never races Ray's own restart, and heals only what Ray would leave out longer
	// (a longer self-check interval, a raylet that hangs).
	DefaultHeadReplacedGrace = 75 * time.Second
	// MaxBackOff bounds the wait before another restart of a worker whose restarted runs keep staying out of
	// the GCS, as the kubelet bounds its crash-loop back-off.
	MaxBackOff = 5 * time.Minute
	// BindAfter is how long after a run was first seen a listing of its pod's node must come to bind the run to
	// that GCS's cluster ID. Until Ray's GCS marks a raylet that stopped answering dead (its health checks: 3 s
	// apart, dead after 5 misses), it may still list the node of the pod's previous run; a listing this late is
	// the run's own node.
	BindAfter = 30 * time.Second
)

// Reason says why a worker pod is restarted.
type Reason string

const (
	// ReasonHeadReplaced: the worker's run predates the current GCS, which has no fault tolerance and has not
	// listed it for the grace: its node belonged to a GCS that is gone.
	ReasonHeadReplaced Reason = "HeadReplaced"
	// ReasonNotInGCS: the GCS has not listed a live node of the worker for the grace.
	ReasonNotInGCS Reason = "NotInGCS"
)

// Options are the graces of a cluster.
type Options struct {
	// Grace and HeadReplacedGrace are DefaultGrace and DefaultHeadReplacedGrace when zero.
	Grace, HeadReplacedGrace time.Duration
	// FaultTolerant is set when the cluster's GCS keeps its state across restarts (Redis or embedded storage):
	// its raylets reconnect, and no run belongs to a GCS that is gone.
	FaultTolerant bool
}

// Memory is what the operator observed of one cluster's membership, on its own clock. The zero Memory is
// ready to use; it is not safe for concurrent use (one cluster is reconciled by one worker at a time).
type Memory struct {
	// head is the head run the rest is about, and headSeen when this memory first saw it.
	head     string
	headSeen time.Time
	// cluster is the cluster ID the head run's GCS reported with an answer that listed the head; "" before.
	cluster string
	// answered is when the head run's GCS first gave an answer that lists the head; zero before.
	answered time.Time
	// lastAnswer is when it last did.
	lastAnswer time.Time
	// unanswered counts the asks in a row the GCS did not answer.
	unanswered int
	runs       map[string]*run
	// restarts counts, by pod UID, the restarts kray asked since a run of the pod was last listed.
	restarts map[string]int
}

// run is what is known of one worker run.
type run struct {
	firstSeen time.Time
	// bound is the cluster ID of the last GCS that listed the run alive at least BindAfter after firstSeen;
	// bindTried is set once such a listing came, with an ID or without.
	bound     string
	bindTried bool
	// listed: the last answer listed a live node of the run; listedReady: the pod was ready then.
	listed, listedReady bool
	// missingSince is when the first answer that did not list the run came, since it was last listed.
	missingSince time.Time
	// asked is when kray asked for the run's restart (or first found its request); zero before.
	asked time.Time
}

// Look is what one reconcile needs to do about membership before any call.
type Look struct {
	// Ask is set when the GCS must be asked now.
	Ask bool
	// Later is when the GCS must next be asked: a worker out of it reaches its grace, or a run is BindAfter old
	// and not bound yet; zero when neither will happen.
	Later time.Time
}

// Lost is a worker the GCS has not listed for at least its grace.
type Lost struct {
	Worker Worker
	Reason Reason
	// Out is how long the GCS has not listed it; Grace is its grace, before any back-off.
	Out, Grace time.Duration
	// Bound is the cluster ID the run is bound to when it is lost for that alone (its grace is zero), else "".
	Bound string
}

// Answer is one answer of the head's GCS: the nodes it lists, and the cluster ID it reported in the same
// session ("" when it did not).
type Answer struct {
	Nodes     []ray.Node
	ClusterID string
}

// Observe records the pods of one reconcile at now, and returns whether the GCS must be asked. Nothing is
// asked while the head is not running and ready. The steady state asks nothing: every worker that the head
// run's GCS listed and that stays ready, and every ready worker first seen after that GCS answered, once its
// run was asked about BindAfter after it was first seen (without fault tolerance, to bind it).
func (m *Memory) Observe(head Head, workers []Worker, now time.Time, o Options) Look {
	if head.Run == "" {
		return Look{}
	}
	if head.Run != m.head {
		// A new GCS: what the old one said counts for nothing, but when each run was first seen still tells
		// the runs that predate the new head.
		runs := make(map[string]*run, len(m.runs))
		for key, r := range m.runs {
			runs[key] = &run{firstSeen: r.firstSeen, bound: r.bound, bindTried: r.bound != ""}
		}
		*m = Memory{head: head.Run, headSeen: now, runs: runs, restarts: m.restarts}
	}
	seen := make(map[string]bool, len(workers))
	var l Look
	for _, w := range workers {
		seen[w.Run] = true
		r := m.runs[w.Run]
		if r == nil {
			r = &run{firstSeen: now}
			m.runs[w.Run] = r
		}
		switch {
		case !r.missingSince.IsZero():
			due := r.missingSince.Add(m.grace(r, o))
			if !now.Before(due) {
				l.Ask = true // confirm before a restart
			} else if l.Later.IsZero() || due.Before(l.Later) {
				l.Later = due
			}
		case r.listed && !w.Ready && r.listedReady:
			l.Ask = true // it lost its readiness since it was listed
		case r.listed && !w.Ready:
			// Never ready while listed (a RayService worker without Serve replicas): looked at again on a later
			// reconcile, once the last answer is a grace old.
			l.Ask = l.Ask || !now.Before(m.lastAnswer.Add(m.grace(r, o)))
		case r.listed:
		case w.Ready && !m.answered.IsZero() && r.firstSeen.After(m.answered):
			// A new run, ready, in a cluster whose GCS answers: its raylet registered with this GCS.
		default:
			l.Ask = true // never judged by this GCS
		}
		if !o.FaultTolerant && !r.bindTried && r.missingSince.IsZero() {
			// Once, BindAfter after it was first seen: the listing that binds the run to its cluster ID.
			if due := r.firstSeen.Add(BindAfter); !now.Before(due) {
				l.Ask = true
			} else if l.Later.IsZero() || due.Before(l.Later) {
				l.Later = due
			}
		}
	}
	for key := range m.runs {
		if !seen[key] {
			delete(m.runs, key) // the pod went, or its container restarted: a new run starts over
		}
	}
	return l
}

// Pods forgets the restarts counted for pods that are not among uids, the cluster's worker pods whether or not
// their Ray container runs: a count outlives the restart it counts, so that the next restart backs off.
func (m *Memory) Pods(uids []string) {
	for uid := range m.restarts {
		if !slices.Contains(uids, uid) {
			delete(m.restarts, uid)
		}
	}
}

// Verdict is what a GCS's answer decides.
type Verdict struct {
	// Lost are the workers the GCS has not listed for their grace.
	Lost []Lost
	// Later is when the next worker out of the GCS reaches its grace; zero when none will.
	Later time.Time
	// Ignored is set when the answer was not this cluster's GCS speaking (it does not list the head yet, or
	// it is another cluster's): it counts as no answer (NotAnswered).
	Ignored bool
}

// Heard records the GCS's answer at now and returns the workers it has not listed for their grace. An answer
// that does not list this cluster's head, alive at the head pod's IP, is not this cluster's GCS speaking: it
// is ignored, and so is its cluster ID. workers are those given to the Observe of the same reconcile.
func (m *Memory) Heard(head Head, workers []Worker, a Answer, now time.Time, o Options) Verdict {
	var v Verdict
	if head.Run == "" || head.Run != m.head || !listsHead(a.Nodes, head) {
		v.Ignored = true
		return v
	}
	m.unanswered = 0
	if m.answered.IsZero() {
		m.answered = now
	}
	m.lastAnswer = now
	if a.ClusterID != "" {
		m.cluster = a.ClusterID
	}
	for _, w := range workers {
		r := m.runs[w.Run]
		if r == nil {
			continue
		}
		if Listed(a.Nodes, w.Pod.Name, IPs(w.Pod)) {
			r.listed, r.listedReady, r.missingSince = true, w.Ready, time.Time{}
			if now.Sub(r.firstSeen) >= BindAfter {
				r.bindTried = true
				if m.cluster != "" {
					r.bound = m.cluster
				}
			}
			delete(m.restarts, string(w.Pod.UID))
			continue
		}
		r.listed = false
		if r.missingSince.IsZero() {
			r.missingSince = now
		}
		gone, grace := now.Sub(r.missingSince), m.grace(r, o)
		if gone >= grace {
			l := Lost{Worker: w, Reason: m.reason(r, o), Out: gone, Grace: grace}
			if m.foreign(r, o) {
				l.Bound = r.bound
			}
			v.Lost = append(v.Lost, l)
		} else if due := r.missingSince.Add(grace); v.Later.IsZero() || due.Before(v.Later) {
			v.Later = due
		}
	}
	return v
}

// Unanswered bounds the retries of a GCS that does not answer, as the breaker bounds its calls.
const (
	firstRetry = 5 * time.Second
	maxRetry   = time.Minute
)

// NotAnswered records that the GCS did not answer an ask (or answered as another cluster's GCS), and returns
// how long to wait before the next: 5 s after the first miss, doubling to a minute, so that a GCS the operator
// cannot reach costs a reconcile a minute at most. An answer of this cluster's GCS, or a new head run, starts
// over.
func (m *Memory) NotAnswered() time.Duration {
	m.unanswered++
	d := firstRetry
	for i := 1; i < m.unanswered; i++ {
		if d *= 2; d >= maxRetry {
			return maxRetry
		}
	}
	return d
}

// Asked records that the run's restart was asked at now (or found asked), and returns when it was first.
func (m *Memory) Asked(runKey string, now time.Time) time.Time {
	r := m.runs[runKey]
	if r == nil {
		return now
	}
	if r.asked.IsZero() {
		r.asked = now
	}
	return r.asked
}

// WasAsked returns when the run's restart was first asked or found asked; false when it was not.
func (m *Memory) WasAsked(runKey string) (time.Time, bool) {
	r := m.runs[runKey]
	if r == nil || r.asked.IsZero() {
		return time.Time{}, false
	}
	return r.asked, true
}

// Restarted counts a restart kray asked for the worker.
func (m *Memory) Restarted(w Worker) {
	if m.restarts == nil {
		m.restarts = map[string]int{}
	}
	m.restarts[string(w.Pod.UID)]++
}

// Restarts is how many restarts kray asked for the worker's pod since a run of it was last listed by the
// current head run's GCS: the earlier restarts after which it did not join.
func (m *Memory) Restarts(w Worker) int {
	return m.restarts[string(w.Pod.UID)]
}

// NotJoining are the workers that the GCS has left out for their grace although kray restarted their pod
// since a run of it was last listed: restarts do not bring them back.
func (m *Memory) NotJoining(workers []Worker, now time.Time, o Options) []Worker {
	var out []Worker
	for _, w := range workers {
		r := m.runs[w.Run]
		if r != nil && m.restarts[string(w.Pod.UID)] > 0 && !r.missingSince.IsZero() && now.Sub(r.missingSince) >= m.grace(r, o) {
			out = append(out, w)
		}
	}
	return out
}

// BackOff is how long a worker must stay out of the GCS before another restart, after restarts earlier
// restarts of its pod after which it never joined: the grace, doubled for each, at most MaxBackOff.
func BackOff(grace time.Duration, restarts int) time.Duration {
	d := grace
	for range restarts {
		if d *= 2; d >= MaxBackOff {
			return MaxBackOff
		}
	}
	return d
}

// Identified reports whether the cluster ID of head's run is known: its GCS reported it with an answer.
func (m *Memory) Identified(head Head) bool {
	return head.Run != "" && head.Run == m.head && m.cluster != ""
}

// foreign reports whether the run is bound to a cluster ID other than the current GCS's, in a cluster without
// fault tolerance: its raylet can never join that GCS.
func (m *Memory) foreign(r *run, o Options) bool {
	return !o.FaultTolerant && r.bound != "" && m.cluster != "" && r.bound != m.cluster
}

// grace is the run's grace.
func (m *Memory) grace(r *run, o Options) time.Duration {
	if m.foreign(r, o) {
		return 0
	}
	if m.reason(r, o) == ReasonHeadReplaced {
		if o.HeadReplacedGrace > 0 {
			return o.HeadReplacedGrace
		}
		return DefaultHeadReplacedGrace
	}
	if o.Grace > 0 {
		return o.Grace
	}
	return DefaultGrace
}

// reason is why the run would be restarted: HeadReplaced for a run seen before the current head run, or bound
// to another cluster ID, in a cluster without fault tolerance. An operator that starts sees both at once, and
// gives its runs the longer grace.
func (m *Memory) reason(r *run, o Options) Reason {
	if (!r.firstSeen.After(m.headSeen) || m.foreign(r, o)) && !o.FaultTolerant {
		return ReasonHeadReplaced
	}
	return ReasonNotInGCS
}
