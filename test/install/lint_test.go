package install

import (
	"testing"

	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
)

// The chart passes `helm lint --strict` (Helm's own lint rules, run from its Go packages).
func TestChartLint(t *testing.T) {
	res := lint.All(chartDir, nil, defaultRelease.Namespace, true)
	for _, m := range res.Messages {
		if m.Severity >= support.WarningSev {
			t.Errorf("helm lint: %s", m)
		} else {
			t.Logf("helm lint: %s", m)
		}
	}
}
