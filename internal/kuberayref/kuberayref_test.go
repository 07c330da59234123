package kuberayref

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDirFindsTheReferenceData(t *testing.T) {
	d, err := Dir()
	if err != nil {
		t.Fatal(err)
	}
	for _, rel := range []string{CRDDir + "/ray.io_raycronjobs.yaml", SamplesDir + "/ray-cronjob.sample.yaml", HelmValues, GrafanaBoard} {
		if _, err := os.Stat(filepath.Join(d, rel)); err != nil {
			t.Errorf("reference data lacks %s: %v", rel, err)
		}
	}
}

func TestDirNamedByTheEnvironment(t *testing.T) {
	t.Setenv(EnvDir, t.TempDir())
	if _, err := Dir(); err == nil || !strings.Contains(err.Error(), "not KubeRay v1.7.0 reference data") {
		t.Errorf("Dir() error = %v, want a directory without crd/ refused", err)
	}
	d := t.TempDir()
	if err := os.Mkdir(filepath.Join(d, CRDDir), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvDir, d)
	if got, err := Dir(); err != nil || got != d {
		t.Errorf("Dir() = %q, %v; want %q", got, err, d)
	}
}
