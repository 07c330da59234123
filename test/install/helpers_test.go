package install

import (
	"flag"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/client/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// Paths from this package to what it checks.
var (
	repoRoot  = filepath.Join("..", "..")
	chartDir  = filepath.Join(repoRoot, "charts", "kray")
	configDir = filepath.Join(repoRoot, "config")
)

// defaultRelease is the release of `helm install kray charts/kray -n kray-system`.
var defaultRelease = Release{Name: "kray", Namespace: "kray-system"}

func renderChart(t *testing.T, rel Release, values map[string]any) []*unstructured.Unstructured {
	t.Helper()
	objs, err := HelmChart(chartDir, rel, values)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func kustomize(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := Kustomize(filepath.Join(configDir, dir))
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// find returns the only object of kind; it fails the test when there is none or several.
func find(t *testing.T, objs []*unstructured.Unstructured, kind string) *unstructured.Unstructured {
	t.Helper()
	o, err := Find(objs, kind)
	if err != nil {
		t.Fatal(err)
	}
	if o == nil {
		t.Fatalf("no %s among %s", kind, kinds(objs))
	}
	return o
}

// typed converts u into out, failing on any field that out's type does not know (a typo in a template).
func typed(t *testing.T, u *unstructured.Unstructured, out any) {
	t.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, out, true); err != nil {
		t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
	}
}

func deployment(t *testing.T, objs []*unstructured.Unstructured) *appsv1.Deployment {
	t.Helper()
	d := &appsv1.Deployment{}
	typed(t, find(t, objs, "Deployment"), d)
	return d
}

func kinds(objs []*unstructured.Unstructured) []string {
	out := make([]string, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.GetKind())
	}
	return out
}

func container(t *testing.T, d *appsv1.Deployment) corev1.Container {
	t.Helper()
	if n := len(d.Spec.Template.Spec.Containers); n != 1 {
		t.Fatalf("Deployment %s has %d containers, want 1", d.Name, n)
	}
	return d.Spec.Template.Spec.Containers[0]
}

// operatorFlags returns the names of every flag kray-operator accepts: the ones cmd/kray-operator defines
// on its FlagSet with a *Var or Func call (read from its source, so this test needs no binary), zap's and
// controller-runtime's.
func operatorFlags(t *testing.T) map[string]bool {
	t.Helper()
	flags := map[string]bool{}
	dir := filepath.Join(repoRoot, "cmd", "kray-operator")
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, file, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) < 2 {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || (!strings.HasSuffix(sel.Sel.Name, "Var") && sel.Sel.Name != "Func") {
				return true
			}
			name := call.Args[1] // fs.XxxVar(&v, name, ...)
			if sel.Sel.Name == "Func" {
				name = call.Args[0] // fs.Func(name, usage, fn)
			}
			if lit, ok := name.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if name, err := strconv.Unquote(lit.Value); err == nil {
					flags[name] = true
				}
			}
			return true
		})
	}
	if len(flags) < 5 {
		t.Fatalf("found only %d flag definitions in %s; has the flag parsing moved?", len(flags), dir)
	}
	fs := flag.NewFlagSet("kray-operator", flag.ContinueOnError)
	(&zap.Options{}).BindFlags(fs)
	ctrlconfig.RegisterFlags(fs)
	fs.VisitAll(func(f *flag.Flag) { flags[f.Name] = true })
	return flags
}

// checkArgsAreFlags fails for every argument of c that is not a `--flag` or `--flag=value` kray-operator knows.
func checkArgsAreFlags(t *testing.T, c corev1.Container, known map[string]bool) {
	t.Helper()
	if len(c.Command) > 0 {
		t.Errorf("container %s sets command %v; the image's entrypoint is the operator", c.Name, c.Command)
	}
	for _, arg := range c.Args {
		name, ok := strings.CutPrefix(arg, "--")
		if !ok {
			t.Errorf("argument %q is not a --flag", arg)
			continue
		}
		name, _, _ = strings.Cut(name, "=")
		if !known[name] {
			t.Errorf("argument %q: kray-operator has no flag %q", arg, name)
		}
	}
}

// checkHardened checks the operator Deployment against the restricted Pod Security Standard and the
// operational basics: probes on the health port, resource requests and limits.
func checkHardened(t *testing.T, d *appsv1.Deployment) {
	t.Helper()
	pod := d.Spec.Template.Spec
	c := container(t, d)
	if pod.SecurityContext == nil || pod.SecurityContext.RunAsNonRoot == nil || !*pod.SecurityContext.RunAsNonRoot {
		t.Errorf("pod securityContext.runAsNonRoot is not true")
	}
	if pod.SecurityContext == nil || pod.SecurityContext.SeccompProfile == nil || pod.SecurityContext.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod securityContext.seccompProfile is not RuntimeDefault")
	}
	sc := c.SecurityContext
	switch {
	case sc == nil:
		t.Errorf("container has no securityContext")
	default:
		if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			t.Errorf("allowPrivilegeEscalation is not false")
		}
		if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			t.Errorf("readOnlyRootFilesystem is not true")
		}
		if sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" {
			t.Errorf("capabilities do not drop ALL: %+v", sc.Capabilities)
		}
		if sc.Privileged != nil && *sc.Privileged {
			t.Errorf("container is privileged")
		}
	}
	for name, p := range map[string]*corev1.Probe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe} {
		if p == nil || p.HTTPGet == nil {
			t.Errorf("%s probe is missing or not an HTTP GET", name)
			continue
		}
		if !hasPort(c, p.HTTPGet.Port.String()) {
			t.Errorf("%s probe port %s is not a container port", name, p.HTTPGet.Port.String())
		}
	}
	if c.LivenessProbe != nil && c.LivenessProbe.HTTPGet != nil && c.LivenessProbe.HTTPGet.Path != "/healthz" {
		t.Errorf("liveness probe path %q, want /healthz", c.LivenessProbe.HTTPGet.Path)
	}
	if c.ReadinessProbe != nil && c.ReadinessProbe.HTTPGet != nil && c.ReadinessProbe.HTTPGet.Path != "/readyz" {
		t.Errorf("readiness probe path %q, want /readyz", c.ReadinessProbe.HTTPGet.Path)
	}
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if _, ok := c.Resources.Requests[r]; !ok {
			t.Errorf("no %s request", r)
		}
		if _, ok := c.Resources.Limits[r]; !ok {
			t.Errorf("no %s limit", r)
		}
	}
	if pod.ServiceAccountName == "" {
		t.Errorf("no serviceAccountName")
	}
}

func hasPort(c corev1.Container, nameOrNumber string) bool {
	for _, p := range c.Ports {
		if p.Name == nameOrNumber || strconv.Itoa(int(p.ContainerPort)) == nameOrNumber {
			return true
		}
	}
	return false
}

// arg returns the value of --name among args and whether it is there; a bare --name has the value "".
func arg(args []string, name string) (string, bool) {
	for _, a := range args {
		if a == "--"+name {
			return "", true
		}
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, true
		}
	}
	return "", false
}
