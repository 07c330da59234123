package main

import (
	"strings"
	"testing"
)

// KubeRay v1.7's batch scheduler switches, validated in its order and words.
func TestBatchSchedulerFlags(t *testing.T) {
	for _, tt := range []struct {
		name    string
		args    []string
		want    string
		err     string
		warning string
	}{
		{name: "none"},
		{name: "scheduler-plugins", args: []string{"--batch-scheduler=scheduler-plugins"}, want: "scheduler-plugins"},
		{name: "an unknown name, KubeRay's chart comment's default among them", args: []string{"--batch-scheduler=default"}, err: "scheduler is not supported, name=default"},
		{name: "both switches", args: []string{"--enable-batch-scheduler", "--batch-scheduler=yunikorn"},
			err: "both feature flags enable-batch-scheduler (deprecated) and batch-scheduler are set. Please use batch-scheduler only"},
		{name: "the Workload API gate beside a scheduler", args: []string{"--feature-gates=KubernetesWAS=true", "--batch-scheduler=scheduler-plugins"},
			err: "the KubernetesWAS feature gate cannot be combined with --batch-scheduler or --enable-batch-scheduler"},
		{name: "volcano", args: []string{"--batch-scheduler=volcano"}, want: "volcano"},
		{name: "yunikorn", args: []string{"--batch-scheduler=yunikorn"}, want: "yunikorn"},
		{name: "kai-scheduler", args: []string{"--batch-scheduler=kai-scheduler"}, want: "kai-scheduler"},
		{name: "the deprecated switch is volcano", args: []string{"--enable-batch-scheduler"}, want: "volcano",
			warning: "Feature flag enable-batch-scheduler is deprecated and will not be supported soon. Use batch-scheduler instead."},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o, err := parse(t, nil, tt.args...)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if o.batchScheduler != tt.want {
				t.Errorf("batch scheduler %q, want %q", o.batchScheduler, tt.want)
			}
		})
	}
}

func TestBatchSchedulerFromTheConfigurationFile(t *testing.T) {
	o, err := parse(t, nil, "--config", writeConfig(t, "batchScheduler: scheduler-plugins\n"))
	if err != nil {
		t.Fatal(err)
	}
	if o.batchScheduler != "scheduler-plugins" {
		t.Errorf("batch scheduler %q", o.batchScheduler)
	}
}

func TestTheConfigurationFilesDeprecatedSwitchIsVolcano(t *testing.T) {
	o, err := parse(t, nil, "--config", writeConfig(t, "enableBatchScheduler: true\n"))
	if err != nil {
		t.Fatal(err)
	}
	if o.batchScheduler != "volcano" {
		t.Errorf("batch scheduler %q, want volcano", o.batchScheduler)
	}
}
