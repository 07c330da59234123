// Package integration runs kray's real reconciler against a real kube-apiserver and etcd (envtest) with
// the RayCluster CRD and Kruise's CRDs installed, and no Kruise controllers: it proves the objects kray
// writes are accepted and kept right under updates, conflicts and deletions. Pods never appear on their
// own here; tests that need pods create them, owned by the CloneSet as Kruise would.
package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	kruisev1beta1 "github.com/openkruise/kruise-api/apps/v1beta1"
	"go.uber.org/zap/zapcore"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/internal/controller/raycluster"
	"github.com/kray-project/kray/internal/controller/shared"
	"github.com/kray-project/kray/internal/moddir"
	"github.com/kray-project/kray/pkg/builder"
)

// kruiseModule is the Kruise release whose CRDs the tests install (the same one the local cluster runs).
const kruiseModule, kruiseVersion = "github.com/openkruise/kruise", "v1.8.2"

var (
	scheme = runtime.NewScheme()
	// k8s is an uncached admin client for the tests' own reads and writes.
	k8s client.Client
	cfg *rest.Config
	// interceptUpdate, when set, runs before each Update the reconciler sends (used to inject conflicts).
	interceptUpdate func(obj client.Object) error
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(rayv1.AddToScheme(scheme))
	utilruntime.Must(kruisev1alpha1.AddToScheme(scheme))
	utilruntime.Must(kruisev1beta1.AddToScheme(scheme))
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		fmt.Fprintln(os.Stderr, "KUBEBUILDER_ASSETS is not set: run `make test-integration` (it builds kube-apiserver and etcd with hack/tools.sh)")
		return 1
	}
	kruiseDir, err := moddir.Dir(kruiseModule, kruiseVersion)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "..", "config", "crd", "bases"), filepath.Join(kruiseDir, "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
	cfg, err = env.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "start envtest:", err)
		return 1
	}
	defer func() { _ = env.Stop() }()
	k8s, err = client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := startOperator(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "start operator:", err)
		return 1
	}
	return m.Run()
}

// startOperator runs the real reconciler in a manager configured as cmd/kray-operator configures it, with
// a client hook so tests can inject write conflicts.
func startOperator(ctx context.Context) error {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.UseDevMode(true), zap.Level(zapLevel())))
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:  scheme,
		Cache:   raycluster.CacheOptions(nil),
		Metrics: metricsserver.Options{BindAddress: "0"},
		NewClient: func(config *rest.Config, options client.Options) (client.Client, error) {
			c, err := client.NewWithWatch(config, options)
			if err != nil {
				return nil, err
			}
			return interceptor.NewClient(c, interceptor.Funcs{
				Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
					if hook := interceptUpdate; hook != nil {
						if err := hook(obj); err != nil {
							return err
						}
					}
					return c.Update(ctx, obj, opts...)
				},
			}), nil
		},
	})
	if err != nil {
		return err
	}
	r := &raycluster.Reconciler{
		Cache:     mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Writer:    shared.ClientWriter(mgr.GetClient(), mgr.GetConfig(), mgr.GetHTTPClient()),
		Events:    shared.Events{Recorder: mgr.GetEventRecorderFor("kray-operator")},
		Options:   builder.Options{Version: "integration"},
	}
	if err := r.SetupWithManager(mgr, raycluster.SetupOptions{Concurrency: 2, WorkerPodBatch: raycluster.DefaultWorkerPodBatch}); err != nil {
		return err
	}
	go func() {
		if err := mgr.Start(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "manager stopped:", err)
		}
	}()
	syncCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if !mgr.GetCache().WaitForCacheSync(syncCtx) {
		return fmt.Errorf("caches did not sync")
	}
	return nil
}

// zapLevel keeps the operator quiet unless KRAY_TEST_VERBOSE is set.
func zapLevel() zapcore.Level {
	if os.Getenv("KRAY_TEST_VERBOSE") != "" {
		return -1
	}
	return 2
}
