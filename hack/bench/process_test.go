package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The request counters are summed per method (non-2xx apart) and the reconciles are the RayCluster
// controller's, whatever it is called.
func TestScrapeMetrics(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`# HELP rest_client_requests_total Number of HTTP requests.
# TYPE rest_client_requests_total counter
rest_client_requests_total{code="200",host="127.0.0.1:6443",method="GET"} 7
rest_client_requests_total{code="201",host="127.0.0.1:6443",method="POST"} 3
rest_client_requests_total{code="409",host="127.0.0.1:6443",method="POST"} 2
# HELP controller_runtime_reconcile_total Total number of reconciliations per controller
# TYPE controller_runtime_reconcile_total counter
controller_runtime_reconcile_total{controller="raycluster-controller",result="success"} 5
controller_runtime_reconcile_total{controller="raycluster-controller",result="requeue"} 1
controller_runtime_reconcile_total{controller="rayjob",result="success"} 9
`))
	}))
	defer srv.Close()
	all, errs, reconciles, err := scrapeMetrics(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]float64{"GET": 7, "POST": 5}, all); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]float64{"POST": 2}, errs); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
	if reconciles != 6 {
		t.Errorf("reconciles %v, want 6", reconciles)
	}
}

// This test's own process has CPU time and a resident set.
func TestSampleProcessReadsProc(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	s, err := sampleProcess(os.Getpid(), srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if s.CPUSeconds <= 0 || s.PeakRSSMiB < 1 || s.PeakRSSMiB > 4096 {
		t.Errorf("sample %+v: want some CPU time and a peak RSS in MiB", s)
	}
}
