package main

import (
	"flag"
	"io"
	"strings"
	"testing"
	"time"
)

// parse runs parseFlags on args with env as the whole environment.
func parse(t *testing.T, env map[string]string, args ...string) (options, error) {
	t.Helper()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o, _, err := parseFlags(fs, args, func(k string) string { return env[k] })
	return o, err
}

// KubeRay's RayJob environment variables set the defaults of their flags, read as KubeRay reads them.
func TestRayJobSettingsFromKubeRaysEnvironment(t *testing.T) {
	tests := []struct {
		name       string
		env        map[string]string
		args       []string
		wantDelete bool
		wantGrace  time.Duration
		wantErr    string
	}{
		{name: "defaults", wantGrace: 5 * time.Minute},
		{name: "KubeRay's env", env: map[string]string{envDeleteRayJobAfterJobFinishes: "TRUE", envTransitionGracePeriodSeconds: "30"},
			wantDelete: true, wantGrace: 30 * time.Second},
		{name: "anything but true is false, as in KubeRay", env: map[string]string{envDeleteRayJobAfterJobFinishes: "yes"}, wantGrace: 5 * time.Minute},
		{name: "flags override the env", env: map[string]string{envDeleteRayJobAfterJobFinishes: "true", envTransitionGracePeriodSeconds: "30"},
			args: []string{"--delete-rayjob-cr-after-job-finishes=false", "--rayjob-deployment-status-transition-grace-period=2m"}, wantGrace: 2 * time.Minute},
		{name: "a grace period that is not seconds", env: map[string]string{envTransitionGracePeriodSeconds: "5m"},
			wantErr: "RAYJOB_DEPLOYMENT_STATUS_TRANSITION_GRACE_PERIOD_SECONDS must be a positive whole number of seconds, got \"5m\""},
		{name: "no RayJob workers", args: []string{"--rayjob-max-concurrent-reconciles=0"}, wantErr: "--rayjob-max-concurrent-reconciles must be at least 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := parse(t, tt.env, tt.args...)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if o.deleteJobs != tt.wantDelete || o.jobGrace != tt.wantGrace {
				t.Errorf("delete %t grace %s, want %t %s", o.deleteJobs, o.jobGrace, tt.wantDelete, tt.wantGrace)
			}
		})
	}
}

func TestRayJobWorkersAreTheirOwn(t *testing.T) {
	o, err := parse(t, nil, "--max-concurrent-reconciles=8", "--rayjob-max-concurrent-reconciles=2")
	if err != nil {
		t.Fatal(err)
	}
	if o.concurrency != 8 || o.jobWorkers != 2 {
		t.Errorf("RayCluster workers %d, RayJob workers %d; want 8 and 2", o.concurrency, o.jobWorkers)
	}
}
