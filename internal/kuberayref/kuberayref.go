// Package kuberayref locates the reference data of KubeRay v1.7.0, the newest KubeRay release, whose
// ray-operator module the Go module proxy does not serve: its CRDs, sample manifests, operator chart values
// and Grafana dashboard, kept as data beside the repository (a directory "shared/kuberay-v1.7.0" in one of
// its parent directories) or wherever KRAY_KUBERAY_REFERENCE names.
package kuberayref

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"
)

// Version is the KubeRay release of the reference data.
const Version = "v1.7.0"

// EnvDir names the reference data directory, overriding the search.
const EnvDir = "KRAY_KUBERAY_REFERENCE"

// The reference data's layout.
const (
	CRDDir       = "crd"
	SamplesDir   = "samples"
	HelmValues   = "helm/kuberay-operator-values.yaml"
	GrafanaBoard = "grafana/KubeRay-Operator.json"
)

// Dir returns the reference data directory: $KRAY_KUBERAY_REFERENCE, else shared/kuberay-v1.7.0 in the
// nearest directory above the working directory that has one.
func Dir() (string, error) {
	if d := os.Getenv(EnvDir); d != "" {
		return check(d)
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	var tried []string
	for d := wd; ; d = filepath.Dir(d) {
		candidate := filepath.Join(d, "shared", "kuberay-"+Version)
		tried = append(tried, candidate)
		if _, err := os.Stat(filepath.Join(candidate, CRDDir)); err == nil {
			return candidate, nil
		}
		if filepath.Dir(d) == d {
			break
		}
	}
	return "", fmt.Errorf("KubeRay %s reference data not found (set %s; looked in %s)", Version, EnvDir, strings.Join(tried, ", "))
}

// Path returns the file or directory rel inside the reference data.
func Path(rel string) (string, error) {
	d, err := Dir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, rel), nil
}

func check(d string) (string, error) {
	if _, err := os.Stat(filepath.Join(d, CRDDir)); err != nil {
		return "", fmt.Errorf("%s=%s: not KubeRay %s reference data: %w", EnvDir, d, Version, err)
	}
	return d, nil
}

// Sample decodes into into the object of kind in the sample manifest file (which may hold several objects).
func Sample(file, kind string, into any) error {
	path, err := Path(filepath.Join(SamplesDir, file))
	if err != nil {
		return err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	for _, doc := range strings.Split(string(data), "\n---") {
		var head struct{ Kind string }
		if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		if head.Kind == kind {
			if err := yaml.Unmarshal([]byte(doc), into); err != nil {
				return fmt.Errorf("%s: %w", file, err)
			}
			return nil
		}
	}
	return fmt.Errorf("%s holds no %s", file, kind)
}
