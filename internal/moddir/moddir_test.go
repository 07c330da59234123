package moddir_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/kray-project/kray/internal/moddir"
)

func TestDir(t *testing.T) {
	dir, err := moddir.Dir("github.com/ray-project/kuberay/ray-operator", "v1.5.0")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		t.Errorf("module directory %s has no go.mod: %v", dir, err)
	}
}

func TestDirErrors(t *testing.T) {
	tests := []struct {
		name, path, version string
	}{
		{name: "empty path", version: "v1.0.0"},
		{name: "empty version", path: "github.com/ray-project/kuberay/ray-operator"},
		{name: "unknown version", path: "github.com/ray-project/kuberay/ray-operator", version: "v0.0.0-not-a-version"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if dir, err := moddir.Dir(tt.path, tt.version); err == nil {
				t.Errorf("Dir(%q, %q) = %q, want an error", tt.path, tt.version, dir)
			}
		})
	}
}
