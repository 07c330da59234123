// Command kruise reads the manifests of Kruise's config/default (kustomized) on stdin and prints them for the
// kind cluster of hack/kind.sh: the manager and kruise-daemon run the image built here (never pulled) with the
// given feature gates instead of the development defaults (all alpha and beta gates), the daemon without the
// development cache mutation detector and at log level 2.
//
//	kubectl kustomize <kruise>/config/default | go run ./hack/kind/kruise -image IMAGE -gates GATES
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/kray-project/kray/test/install"
)

const (
	managerName = "kruise-controller-manager"
	daemonName  = "kruise-daemon"
)

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
	found, daemon := false, false
	for _, o := range objs {
		switch {
		case o.GetKind() == "DaemonSet" && o.GetName() == daemonName:
			if err := patchDaemon(o, image, gates); err != nil {
				return nil, err
			}
			daemon = true
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
	if !daemon {
		return nil, fmt.Errorf("no DaemonSet %s in the input", daemonName)
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
		c.Args = append(withArgs(c.Args, "--feature-gates=", "--v="), "--v=2", "--feature-gates="+gates)
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&d)
	if err != nil {
		return err
	}
	o.Object = m
	return nil
}

func patchDaemon(o *unstructured.Unstructured, image, gates string) error {
	var d appsv1.DaemonSet
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &d); err != nil {
		return err
	}
	for i := range d.Spec.Template.Spec.Containers {
		c := &d.Spec.Template.Spec.Containers[i]
		c.Image, c.ImagePullPolicy = image, corev1.PullNever
		c.Args = withArgs(c.Args, "--feature-gates=", "-v=", "--v=")
		c.Args = append(c.Args, "--v=2", "--feature-gates="+gates)
		var env []corev1.EnvVar
		for _, e := range c.Env {
			if e.Name != "KUBE_CACHE_MUTATION_DETECTOR" {
				env = append(env, e)
			}
		}
		c.Env = env
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&d)
	if err != nil {
		return err
	}
	o.Object = m
	return nil
}

// withArgs is args without those that start with one of prefixes.
func withArgs(args []string, prefixes ...string) []string {
	var out []string
	for _, a := range args {
		if !slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(a, p) }) {
			out = append(out, a)
		}
	}
	return out
}
