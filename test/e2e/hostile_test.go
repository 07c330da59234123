package e2e

import (
	"bufio"
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/internal/controller/rayservice"
	"github.com/kray-project/kray/pkg/constants"
)

// attack is how a hostile head answers every call kray makes to its dashboard, Serve API and Serve proxy;
// rest is the request's path after the /c/<namespace>/<cluster> or /p/<namespace>/<pod> prefix.
type attack func(w http.ResponseWriter, r *http.Request, rest string)

// trapNamespace is where the redirecting heads send kray's calls: no cluster lives there, so a call that
// arrives was steered.
const trapNamespace = "kray-trap"

// attacked answers a call to a cluster or pod with its namespace's attack, if it has one, and counts the
// calls that reach the trap.
func (f *fakeDashboard) attacked(w http.ResponseWriter, r *http.Request, kind, key string) bool {
	if kind == "" {
		return false
	}
	ns, _, _ := strings.Cut(key, "/")
	f.mu.Lock()
	a := f.hostile[ns]
	if ns == trapNamespace {
		f.trapped++
	}
	f.mu.Unlock()
	if ns == trapNamespace {
		http.Error(w, "trapped", http.StatusNotFound)
		return true
	}
	if a == nil {
		return false
	}
	_, _, rest := route(r.URL.Path)
	a(w, r, rest)
	return true
}

// setAttack makes the heads of ns answer with a.
func (f *fakeDashboard) setAttack(ns string, a attack) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.hostile == nil {
		f.hostile = map[string]attack{}
	}
	f.hostile[ns] = a
}

// streamed writes head, then n filler bytes (n < 0: until the client hangs up), then tail.
func streamed(w http.ResponseWriter, r *http.Request, head string, n int, tail string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	chunk := bytes.Repeat([]byte("x"), 64<<10)
	if _, err := w.Write([]byte(head)); err != nil {
		return
	}
	for left := n; n < 0 || left > 0; left -= len(chunk) {
		size := len(chunk)
		if n >= 0 {
			size = min(size, left)
		}
		if r.Context().Err() != nil {
			return
		}
		if _, err := w.Write(chunk[:size]); err != nil {
			return
		}
	}
	_, _ = w.Write([]byte(tail))
}

// The attacks of hostile heads, by name: what an image a tenant controls can make its head answer.
var attacks = map[string]attack{
	// A valid Serve details object of 250 MB: a string kray does not read, padded out.
	"huge": func(w http.ResponseWriter, r *http.Request, _ string) {
		streamed(w, r, `{"applications":{"app":{"status":"RUNNING","deployments":{"d":{"status":"HEALTHY"}}}},"padding":"`, 250<<20, `"}`)
	},
	// An answer that never ends.
	"endless": func(w http.ResponseWriter, r *http.Request, _ string) {
		streamed(w, r, `{"applications":{"app":{"status":"RUNNING","message":"`, -1, "")
	},
	// No answer at all, until kray gives up.
	"slow": func(_ http.ResponseWriter, r *http.Request, _ string) {
		<-r.Context().Done()
	},
	// Every call sent on to the trap, as a head pointing kray at another team's dashboard would.
	"redirect": func(w http.ResponseWriter, r *http.Request, rest string) {
		http.Redirect(w, r, "/c/"+trapNamespace+"/victim"+rest, http.StatusTemporaryRedirect)
	},
	// Not JSON: cut, with control bytes and invalid UTF-8.
	"malformed": func(w http.ResponseWriter, _ *http.Request, _ string) {
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte("{\"applications\":{\"app\":[1,2,\x00\xff\x1b[31m"))
	},
}

// operatorRSS samples the resident memory of the operator that hack/operator.sh started, in bytes, every
// interval; it returns the operator's PID and a function that stops the sampling (once) and returns the peak.
func operatorRSS(t *testing.T, interval time.Duration) (int, func() int64) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, ".local", "run", "kray-operator.pid"))
	if err != nil {
		t.Skipf("needs the operator that hack/operator.sh starts: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	var peak int64
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			peak = max(peak, residentBytes(pid))
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	var once sync.Once
	return pid, func() int64 {
		once.Do(func() { close(stop) })
		<-done
		return peak
	}
}

// residentBytes is the VmRSS of process pid, 0 when it cannot be read (the process is gone).
func residentBytes(pid int) int64 {
	f, err := os.Open(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// hostileRSSBound is the most resident memory the operator may reach while every attack runs beside the other
// tenants' work (measured: see docs/reliability.md).
const hostileRSSBound = 256 << 20

// One tenant cannot hurt the others: with a head of each kind of attack running (answers of 250 MB, endless,
// silent, redirecting, malformed; a GCS that stalls every drain of 8 held workers), another tenant's
// RayCluster, RayJob and RayService reach Ready within the usual times, the operator keeps running under a
// memory bound, no redirect is followed, and each hostile object says what went wrong.
func TestHostileHeadsHurtNoOtherTenant(t *testing.T) {
	needFakeDashboard(t)
	needFakeGCS(t)
	pid, peak := operatorRSS(t, 50*time.Millisecond)
	defer func() { t.Logf("operator peak RSS under attack: %d MiB", peak()>>20) }()

	// The hostile tenants: a RayService per kind of answer, a RayJob whose head redirects the submission,
	// and a cluster whose GCS stalls the drains of its held workers.
	services := map[string]*rayv1.RayService{}
	for name, a := range attacks {
		ns := namespace(t)
		dash.setAttack(ns, a)
		services[name] = createService(t, kubeRayServiceSample(t, "ray-service.sample.yaml", ns))
	}
	jobNS := namespace(t)
	dash.setAttack(jobNS, attacks["redirect"])
	hostileJob := createJob(t, rayJob(t, jobNS, "steered", rayv1.HTTPMode))
	stalling := drainCluster(t, 8, 600, -1)
	gcs.mu.Lock()
	gcs.stalled[stalling.Namespace] = true
	gcs.mu.Unlock()
	update(t, stalling, func(rc *rayv1.RayCluster) { group(rc).Replicas = ptr.To[int32](0) })

	// The other tenant.
	ns := namespace(t)
	rc := create(t, loadSample(t, "ray-cluster.sample.yaml", ns))
	spec := rayJob(t, ns, "job", rayv1.HTTPMode)
	dash.plan(spec.Spec.Entrypoint, jobPlan{runFor: time.Second, outcome: rayv1.JobStatusSucceeded})
	job := createJob(t, spec)
	svc := createService(t, kubeRayServiceSample(t, "ray-service.sample.yaml", ns))
	waitReady(t, rc, 2)
	waitJobState(t, job, rayv1.JobDeploymentStatusComplete)
	waitServing(t, svc)

	// Each hostile object is held where it is and says why, once its head has been asked.
	g := NewWithT(t)
	for name, want := range map[string]string{
		"huge":      "is larger than 67108864 bytes, the most kray reads",
		"endless":   "is larger than 67108864 bytes, the most kray reads",
		"slow":      "context deadline exceeded",
		"redirect":  "307 Temporary Redirect, and kray follows no redirect",
		"malformed": "is not Serve details",
	} {
		g.Eventually(func(g Gomega) {
			g.Expect(eventMessages(g, services[name], rayservice.EventFailedToGetServeApplications)).To(ContainElement(ContainSubstring(want)))
		}, serviceTimeout, poll).Should(Succeed(), "the %s head", name)
		ready := serviceCondition(getService(g, services[name]), rayv1.RayServiceReady)
		g.Expect(ready == nil || ready.Status != "True").To(BeTrue(), "the %s RayService is Ready", name)
	}
	g.Eventually(func(g Gomega) {
		// Its first call, the read of the job before submitting it, is the one redirected.
		g.Expect(getJob(g, hostileJob).Status.Message).To(ContainSubstring("kray follows no redirect"))
	}, jobTimeout, poll).Should(Succeed())
	g.Eventually(func(g Gomega) {
		c := condition(get(g, stalling), constants.ConditionRayGCSPaused)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Message).To(ContainSubstring("context deadline exceeded"))
	}, readyTimeout, poll).Should(Succeed())

	dash.mu.Lock()
	trapped := dash.trapped
	dash.mu.Unlock()
	g.Expect(trapped).To(BeZero(), "calls steered to the trap")
	g.Expect(residentBytes(pid)).To(BeNumerically(">", 0), "the operator (pid %d) is gone", pid)
	g.Expect(peak()).To(BeNumerically("<", hostileRSSBound))

	// The hostile tenants leave; their heads answer as Ray's again.
	for name := range attacks {
		dash.setAttack(services[name].Namespace, nil)
	}
	dash.setAttack(jobNS, nil)
	gcs.mu.Lock()
	delete(gcs.stalled, stalling.Namespace)
	gcs.mu.Unlock()
}
