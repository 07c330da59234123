// Command render prints charts/kray rendered as `helm template --include-crds` renders it, for the kind
// cluster of hack/kind.sh, where no helm binary is needed:
//
//	go run ./hack/kind/render -chart charts/kray -name kray -namespace kray-system -values values.yaml
//
// The output is a multi-document YAML stream in apply order (CRDs, then namespaced objects' dependencies).
package main

import (
	"flag"
	"fmt"
	"os"

	"sigs.k8s.io/yaml"

	"github.com/kray-project/kray/test/install"
)

func main() {
	chart := flag.String("chart", "charts/kray", "the chart's directory")
	name := flag.String("name", "kray", "the release name")
	namespace := flag.String("namespace", "kray-system", "the release namespace")
	valuesFile := flag.String("values", "", "a YAML file of values over the chart's defaults")
	flag.Parse()
	if err := render(*chart, *name, *namespace, *valuesFile); err != nil {
		fmt.Fprintf(os.Stderr, "render: %v\n", err)
		os.Exit(1)
	}
}

func render(chart, name, namespace, valuesFile string) error {
	values := map[string]any{}
	if valuesFile != "" {
		data, err := os.ReadFile(valuesFile)
		if err != nil {
			return err
		}
		if err := yaml.Unmarshal(data, &values); err != nil {
			return fmt.Errorf("%s: %w", valuesFile, err)
		}
	}
	objs, err := install.HelmChart(chart, install.Release{Name: name, Namespace: namespace}, values)
	if err != nil {
		return err
	}
	for _, o := range objs {
		if o.GetNamespace() == "" && o.GetKind() != "Namespace" && isNamespaced(o.GetKind()) {
			o.SetNamespace(namespace)
		}
		out, err := yaml.Marshal(o.Object)
		if err != nil {
			return err
		}
		fmt.Printf("---\n%s", out)
	}
	return nil
}

// isNamespaced reports whether a kind the chart renders lives in a namespace; helm sets the release namespace
// on such objects when their template leaves it out.
func isNamespaced(kind string) bool {
	switch kind {
	case "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding", "Namespace",
		"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration":
		return false
	}
	return true
}
