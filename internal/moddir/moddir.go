// Package moddir locates the source of a Go module version in the module cache, downloading it through the
// configured module proxy when needed, so that tests can read files (such as CRDs) shipped in other modules.
package moddir

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
)

// download is the subset of `go mod download -json` output that Dir reads.
type download struct {
	Dir   string
	Error string
}

// Dir returns the directory holding modulePath at version, running `go mod download -json` outside any
// module so that the caller's go.mod and go.sum are neither read nor modified.
func Dir(modulePath, version string) (string, error) {
	if modulePath == "" || version == "" {
		return "", errors.New("moddir: module path and version are required")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("moddir: go command not found: %w", err)
	}
	cmd := exec.Command(goBin, "mod", "download", "-json", modulePath+"@"+version)
	cmd.Dir = os.TempDir()
	// GOFLAGS could carry -mod=vendor or similar from the caller; GOWORK could pull in a workspace.
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off", "GO111MODULE=on")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()

	var d download
	if err := json.Unmarshal(stdout.Bytes(), &d); err != nil {
		return "", fmt.Errorf("moddir: go mod download %s@%s: %v: %s", modulePath, version, runErr, stderr.String())
	}
	if d.Error != "" {
		return "", fmt.Errorf("moddir: go mod download %s@%s: %s", modulePath, version, d.Error)
	}
	if runErr != nil {
		return "", fmt.Errorf("moddir: go mod download %s@%s: %w: %s", modulePath, version, runErr, stderr.String())
	}
	if d.Dir == "" {
		return "", fmt.Errorf("moddir: go mod download %s@%s reported no directory", modulePath, version)
	}
	if _, err := os.Stat(d.Dir); err != nil {
		return "", fmt.Errorf("moddir: %s@%s: %w", modulePath, version, err)
	}
	return d.Dir, nil
}
