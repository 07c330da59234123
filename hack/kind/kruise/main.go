// Command kruise reads the manifests of Kruise's config/default (kustomized) on stdin and prints them for the
// kind cluster of hack/kind.sh: the manager runs the image built here (never pulled) with the given feature
// gates instead of the development defaults (all alpha and beta gates), and kruise-daemon is left out.
//
//	kubectl kustomize <kruise>/config/default | go run ./hack/kind/kruise -image IMAGE -gates GATES
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/kray-project/kray/test/install"
)

const managerName = "kruise-controller-manager"

func main() {
	image := flag.String("image", "", "the kruise-manager image")
	gates := flag.String("gates", "", "the manager's --feature-gates")
	flag.Parse()
	in, err := io.ReadAll(os.Stdin)
	if err == nil {
		var out []byte
		out, err = patch(in, *image, *gates)
		os.Stdout.Write(out)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "kruise: %v\n", err)
		os.Exit(1)
	}
}

func patch(in []byte, image, gates string) ([]byte, error) {
	objs, err := install.Decode(in)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	found := false
	for _, o := range objs {
		switch {
		case o.GetKind() == "DaemonSet":
			continue
		case o.GetKind() == "Deployment" && o.GetName() == managerName:
			if err := patchManager(o, image, gates); err != nil {
				return nil, err
			}
			found = true
		}
		b, err := yaml.Marshal(o.Object)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&out, "---\n%s", b)
	}
	if !found {
		return nil, fmt.Errorf("no Deployment %s in the input", managerName)
	}
	return out.Bytes(), nil
}

func patchManager(o *unstructured.Unstructured, image, gates string) error {
	var d appsv1.Deployment
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &d); err != nil {
		return err
	}
	for i := range d.Spec.Template.Spec.Containers {
		c := &d.Spec.Template.Spec.Containers[i]
		if c.Name != "manager" {
			continue
		}
		c.Image, c.ImagePullPolicy = image, corev1.PullNever
		var args []string
		for _, a := range c.Args {
			if !strings.HasPrefix(a, "--feature-gates=") && !strings.HasPrefix(a, "--v=") {
				args = append(args, a)
			}
		}
		c.Args = append(args, "--v=2", "--feature-gates="+gates)
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&d)
	if err != nil {
		return err
	}
	o.Object = m
	return nil
}
