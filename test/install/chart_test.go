package install

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/kray-project/kray/pkg/operatorconfig"
)

// The chart ships a copy of the generated CRD (Helm installs crds/ before templates); the copy must be the
// generated file byte for byte.
func TestChartCRDsMatchConfig(t *testing.T) {
	want, err := filepath.Glob(filepath.Join(configDir, "crd", "bases", "*.yaml"))
	if err != nil || len(want) == 0 {
		t.Fatalf("no generated CRDs in config/crd/bases (%v)", err)
	}
	got, err := filepath.Glob(filepath.Join(chartDir, "crds", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(baseNames(want), baseNames(got)); diff != "" {
		t.Fatalf("charts/kray/crds/ does not hold the files of config/crd/bases/ (-want +got):\n%s\nfix: cp config/crd/bases/*.yaml charts/kray/crds/", diff)
	}
	for _, file := range want {
		a, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(chartDir, "crds", filepath.Base(file)))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("charts/kray/crds/%s differs from config/crd/bases/%[1]s; fix: cp config/crd/bases/*.yaml charts/kray/crds/", filepath.Base(file))
		}
	}
}

func baseNames(paths []string) []string {
	out := make([]string, 0, len(paths))
	for _, p := range paths {
		out = append(out, filepath.Base(p))
	}
	sort.Strings(out)
	return out
}

// The chart's ClusterRole grants exactly what config/rbac/role.yaml (generated from the RBAC markers in
// internal/controller/raycluster) grants, its leader election Role what config/rbac's does, and its metrics-reader
// ClusterRole what config/rbac's does.
func TestChartRBACMatchesConfig(t *testing.T) {
	objs := renderChart(t, defaultRelease, nil)
	var operatorRoles, readers []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == "ClusterRole" && strings.HasSuffix(o.GetName(), "metrics-reader") {
			readers = append(readers, o)
		} else {
			operatorRoles = append(operatorRoles, o)
		}
	}
	for _, tc := range []struct {
		kind, file string
		objs       []*unstructured.Unstructured
	}{
		{"ClusterRole", "role.yaml", operatorRoles},
		{"Role", "leader_election_role.yaml", objs},
		{"ClusterRole", "metrics_reader_role.yaml", readers},
	} {
		t.Run(tc.file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(configDir, "rbac", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			want, err := Decode(data)
			if err != nil {
				t.Fatal(err)
			}
			var wantRole, gotRole rbacv1.ClusterRole // a Role's fields are a subset
			typed(t, find(t, want, tc.kind), &wantRole)
			typed(t, find(t, tc.objs, tc.kind), &gotRole)
			if len(wantRole.Rules) == 0 {
				t.Fatalf("config/rbac/%s has no rules", tc.file)
			}
			if diff := cmp.Diff(wantRole.Rules, gotRole.Rules); diff != "" {
				t.Errorf("the chart's %s rules differ from config/rbac/%s (-config +chart):\n%s\nfix: copy the rules into charts/kray/templates/", tc.kind, tc.file, diff)
			}
		})
	}
}

// Each case renders the chart with some values and checks the objects and the operator's arguments.
func TestChartRender(t *testing.T) {
	base := []string{
		"CustomResourceDefinition", "CustomResourceDefinition", "CustomResourceDefinition", "CustomResourceDefinition", "ServiceAccount", "ClusterRole", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
		"Service", "Deployment",
	}
	operatorNS, operatorLabels := "--operator-namespace=kray-system",
		"--operator-pod-labels=app.kubernetes.io/name=kray,app.kubernetes.io/instance=kray,app.kubernetes.io/component=operator"
	defaultArgs := []string{
		"--leader-elect", "--leader-election-namespace=kray-system", "--metrics-bind-address=:8443",
		"--metrics-secure=true", "--health-probe-bind-address=:8081", operatorNS, operatorLabels, "--max-concurrent-reconciles=4",
		"--rayjob-max-concurrent-reconciles=4", "--rayservice-max-concurrent-reconciles=4", "--kube-api-qps=50",
		"--kube-api-burst=100", "--zap-log-level=info", "--zap-encoder=json",
	}
	cases := []struct {
		name   string
		rel    Release
		values string
		kinds  []string
		args   []string
		check  func(t *testing.T, objs []*unstructured.Unstructured)
	}{
		{
			name: "defaults", rel: defaultRelease, kinds: base, args: defaultArgs,
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				d := deployment(t, objs)
				if got := container(t, d).Image; got != "kray-operator:latest" {
					t.Errorf("image %q, want kray-operator:latest", got)
				}
				if d.Name != "kray" || d.Namespace != "kray-system" || *d.Spec.Replicas != 1 {
					t.Errorf("Deployment %s/%s with %d replicas, want kray-system/kray with 1", d.Namespace, d.Name, *d.Spec.Replicas)
				}
			},
		},
		{
			name: "tuned", rel: Release{Name: "ray-ops", Namespace: "ops"},
			values: `
image: {repository: registry.example/kray-operator, tag: v0.1.0, pullPolicy: Always}
replicas: 2
maxConcurrentReconciles: 16
rayJob: {maxConcurrentReconciles: 2, deleteAfterJobFinishes: true, deploymentStatusTransitionGracePeriodSeconds: 600}
rayService: {maxConcurrentReconciles: 3, enableZeroDowntime: false}
kubeAPI: {qps: 200.5, burst: 4000000}
watchNamespaces: [team-a, team-b]
clusterDomain: corp.internal
logging: {level: debug, encoder: console}
healthProbePort: 9440
metrics: {port: 9090, service: {port: 9090}}
extraArgs: [--zap-stacktrace-level=panic]
resources: {requests: {cpu: 500m, memory: 1Gi}, limits: {cpu: "2", memory: 2Gi}}
`,
			kinds: base,
			args: []string{
				"--leader-elect", "--leader-election-namespace=ops", "--metrics-bind-address=:9090",
				"--metrics-secure=true", "--health-probe-bind-address=:9440", "--operator-namespace=ops",
				"--operator-pod-labels=app.kubernetes.io/name=kray,app.kubernetes.io/instance=ray-ops,app.kubernetes.io/component=operator", "--max-concurrent-reconciles=16",
				"--rayjob-max-concurrent-reconciles=2", "--delete-rayjob-cr-after-job-finishes=true", "--rayjob-deployment-status-transition-grace-period=600s",
				"--rayservice-max-concurrent-reconciles=3", "--enable-zero-downtime=false", "--kube-api-qps=200.5",
				"--kube-api-burst=4000000", "--watch-namespaces=team-a,team-b", "--cluster-domain=corp.internal",
				"--zap-log-level=debug", "--zap-encoder=console", "--zap-stacktrace-level=panic",
			},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				d := deployment(t, objs)
				c := container(t, d)
				if d.Name != "ray-ops-kray" || *d.Spec.Replicas != 2 {
					t.Errorf("Deployment %s with %d replicas, want ray-ops-kray with 2", d.Name, *d.Spec.Replicas)
				}
				if c.Image != "registry.example/kray-operator:v0.1.0" || c.ImagePullPolicy != "Always" {
					t.Errorf("image %s (%s)", c.Image, c.ImagePullPolicy)
				}
				if got := c.Resources.Limits.Memory().String(); got != "2Gi" {
					t.Errorf("memory limit %s, want 2Gi", got)
				}
				if !hasPort(c, "9090") || !hasPort(c, "9440") {
					t.Errorf("container ports %v lack 9090 or 9440", c.Ports)
				}
			},
		},
		{
			name: "feature gates", rel: defaultRelease,
			values: `featureGates: {WorkerPodEventBatching: false}`,
			kinds:  base,
			args:   append(slices.Clone(defaultArgs), "--feature-gates=WorkerPodEventBatching=false"),
		},
		{
			name: "feature gates as KubeRay's chart lists them", rel: defaultRelease,
			values: `featureGates: [{name: RayClusterStatusConditions, enabled: true}, {name: RayCronJob, enabled: false}]`,
			kinds:  base,
			args:   append(slices.Clone(defaultArgs), "--feature-gates=RayClusterStatusConditions=true,RayCronJob=false"),
		},
		{
			name: "leader election and metrics off", rel: defaultRelease,
			values: `{leaderElection: {enabled: false}, metrics: {enabled: false}}`,
			kinds:  []string{"CustomResourceDefinition", "CustomResourceDefinition", "CustomResourceDefinition", "CustomResourceDefinition", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Deployment"},
			args: []string{
				"--metrics-bind-address=0", "--health-probe-bind-address=:8081", operatorNS, operatorLabels, "--max-concurrent-reconciles=4",
				"--rayjob-max-concurrent-reconciles=4", "--rayservice-max-concurrent-reconciles=4",
				"--kube-api-qps=50", "--kube-api-burst=100", "--zap-log-level=info", "--zap-encoder=json",
			},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				if c := container(t, deployment(t, objs)); hasPort(c, "metrics") {
					t.Errorf("metrics port declared while metrics are off")
				}
			},
		},
		{
			name: "secure metrics with a ServiceMonitor", rel: defaultRelease,
			values: `metrics: {serviceMonitor: {enabled: true, interval: 15s, scrapeTimeout: 10s, labels: {release: prometheus}}}`,
			kinds:  append(slices.Clone(base), "ServiceMonitor"),
			args:   defaultArgs,
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				sm := find(t, objs, "ServiceMonitor")
				if sm.GetLabels()["release"] != "prometheus" {
					t.Errorf("ServiceMonitor labels %v lack release=prometheus", sm.GetLabels())
				}
				eps, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
				want := []any{map[string]any{
					"port": "metrics", "path": "/metrics", "interval": "15s", "scrapeTimeout": "10s", "scheme": "https",
					"bearerTokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token",
					"tlsConfig":       map[string]any{"insecureSkipVerify": true},
				}}
				if diff := cmp.Diff(want, eps); diff != "" {
					t.Errorf("ServiceMonitor endpoints (-want +got):\n%s", diff)
				}
				checkMonitorSelects(t, sm, find(t, objs, "Service"))
			},
		},
		{
			name: "scheduling", rel: defaultRelease,
			values: `
nodeSelector: {kubernetes.io/os: linux}
tolerations: [{key: dedicated, operator: Equal, value: ops, effect: NoSchedule}]
affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: pool, operator: In, values: [ops]}]}]}}}
priorityClassName: system-cluster-critical
podAnnotations: {example.com/team: ray}
podLabels: {team: ray}
imagePullSecrets: [{name: regcred}]
`,
			kinds: base, args: defaultArgs,
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				d := deployment(t, objs)
				pod := d.Spec.Template
				if pod.Spec.NodeSelector["kubernetes.io/os"] != "linux" || len(pod.Spec.Tolerations) != 1 ||
					pod.Spec.Affinity == nil || pod.Spec.Affinity.NodeAffinity == nil ||
					pod.Spec.PriorityClassName != "system-cluster-critical" || len(pod.Spec.ImagePullSecrets) != 1 {
					t.Errorf("scheduling values not rendered: %+v", pod.Spec)
				}
				if pod.Annotations["example.com/team"] != "ray" || pod.Labels["team"] != "ray" {
					t.Errorf("pod metadata not rendered: %+v", pod.ObjectMeta)
				}
			},
		},
		{
			name: "KubeRay's env and configuration values", rel: defaultRelease,
			values: `
env: [{name: CLUSTER_DOMAIN, value: corp.example}, {name: RAYJOB_STATUS_CHECK_TIMEOUT_SECONDS, value: "60"}]
configuration:
  enabled: true
  workerSidecarContainers: [{name: log-shipper, image: fluent/fluent-bit:1.9.6}]
  defaultContainerEnvs: [{name: PLATFORM, value: gpu}]
  defaultPodLabels: {cost-center: ml}
`,
			kinds: append(slices.Clone(base), "ConfigMap"),
			args:  append(slices.Clone(defaultArgs[:len(defaultArgs)-2]), "--config=/etc/kray/config.yaml", "--zap-log-level=info", "--zap-encoder=json"),
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				d := deployment(t, objs)
				c := container(t, d)
				if len(c.Env) != 2 || c.Env[0].Name != "CLUSTER_DOMAIN" || c.Env[0].Value != "corp.example" {
					t.Errorf("env %v, want the values' env", c.Env)
				}
				if len(c.VolumeMounts) != 1 || c.VolumeMounts[0].MountPath != "/etc/kray" || len(d.Spec.Template.Spec.Volumes) != 1 ||
					d.Spec.Template.Spec.Volumes[0].ConfigMap == nil || d.Spec.Template.Spec.Volumes[0].ConfigMap.Name != "kray-config" {
					t.Errorf("the Configuration is not mounted: mounts %v, volumes %v", c.VolumeMounts, d.Spec.Template.Spec.Volumes)
				}
				cm := find(t, objs, "ConfigMap")
				file, _, _ := unstructured.NestedString(cm.Object, "data", "config.yaml")
				cfg, err := operatorconfig.Parse([]byte(file))
				if err != nil {
					t.Fatalf("the chart's Configuration does not load: %v\n%s", err, file)
				}
				if len(cfg.WorkerSidecarContainers) != 1 || cfg.DefaultPodLabels["cost-center"] != "ml" || cfg.DefaultContainerEnvs[0].Value != "gpu" {
					t.Errorf("Configuration %+v", cfg)
				}
				for _, f := range []string{"metricsAddr", "probeAddr", "enableLeaderElection", "reconcileConcurrency", "qps", "burst", "watchNamespace"} {
					if cfg.Sets(f) {
						t.Errorf("the chart's Configuration sets %s, which the chart passes as a flag", f)
					}
				}
			},
		},
		{
			name: "scheduler-plugins", rel: defaultRelease,
			values: `batchScheduler: {name: scheduler-plugins}`,
			kinds:  base,
			args:   append(slices.Clone(defaultArgs[:len(defaultArgs)-2]), "--batch-scheduler=scheduler-plugins", "--zap-log-level=info", "--zap-encoder=json"),
			check:  lastRuleIsPodGroups("scheduling.x-k8s.io"),
		},
		{
			name: "the API server proxy", rel: defaultRelease,
			values: `useKubernetesProxy: true`,
			kinds:  base,
			args:   append(slices.Clone(defaultArgs[:len(defaultArgs)-2]), "--use-kubernetes-proxy", "--zap-log-level=info", "--zap-encoder=json"),
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				var role rbacv1.ClusterRole
				for _, o := range objs {
					if o.GetKind() == "ClusterRole" && o.GetName() == "kray" {
						typed(t, o, &role)
					}
				}
				proxies := map[string][]string{}
				for _, r := range role.Rules {
					for _, res := range r.Resources {
						if strings.HasSuffix(res, "/proxy") {
							proxies[res] = r.Verbs
						}
					}
				}
				want := map[string][]string{"services/proxy": {"create", "delete", "get", "update"}, "pods/proxy": {"get"}}
				if diff := cmp.Diff(want, proxies); diff != "" {
					t.Errorf("proxy rights (-want +got):\n%s", diff)
				}
			},
		},
		{
			name: "volcano", rel: defaultRelease,
			values: `batchScheduler: {name: volcano}`,
			kinds:  base,
			args:   append(slices.Clone(defaultArgs[:len(defaultArgs)-2]), "--batch-scheduler=volcano", "--zap-log-level=info", "--zap-encoder=json"),
			check:  lastRuleIsPodGroups("scheduling.volcano.sh"),
		},
		{
			name: "KubeRay's deprecated switch is volcano", rel: defaultRelease,
			values: `batchScheduler: {enabled: true}`,
			kinds:  base,
			args:   append(slices.Clone(defaultArgs[:len(defaultArgs)-2]), "--enable-batch-scheduler", "--zap-log-level=info", "--zap-encoder=json"),
			check:  lastRuleIsPodGroups("scheduling.volcano.sh"),
		},
		{
			name: "single namespace install", rel: defaultRelease,
			values: `singleNamespaceInstall: true`,
			kinds: []string{"CustomResourceDefinition", "CustomResourceDefinition", "CustomResourceDefinition", "CustomResourceDefinition", "ServiceAccount",
				"Role", "RoleBinding", "ClusterRole", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Service", "Deployment"},
			args: append(slices.Clone(defaultArgs[:len(defaultArgs)-2]), "--watch-namespaces=kray-system", "--zap-log-level=info", "--zap-encoder=json"),
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				for _, o := range objs {
					if o.GetKind() == "ClusterRole" && o.GetName() != "kray-metrics-reader" && o.GetName() != "kray-metrics-auth" {
						t.Errorf("ClusterRole %s in a single-namespace install", o.GetName())
					}
				}
			},
		},
		{
			name: "existing ServiceAccount and RBAC", rel: defaultRelease,
			values: `{serviceAccount: {create: false, name: ray-operator}, rbac: {create: false}, fullnameOverride: kray-operator}`,
			kinds:  []string{"CustomResourceDefinition", "CustomResourceDefinition", "CustomResourceDefinition", "CustomResourceDefinition", "Service", "Deployment"},
			args:   defaultArgs,
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				d := deployment(t, objs)
				if d.Name != "kray-operator" || d.Spec.Template.Spec.ServiceAccountName != "ray-operator" {
					t.Errorf("Deployment %s runs as %s, want kray-operator as ray-operator", d.Name, d.Spec.Template.Spec.ServiceAccountName)
				}
			},
		},
	}
	flags := operatorFlags(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			values := map[string]any{}
			if err := yaml.Unmarshal([]byte(tc.values), &values); err != nil {
				t.Fatal(err)
			}
			objs := renderChart(t, tc.rel, values)
			got := kinds(objs)
			sort.Strings(got)
			want := slices.Clone(tc.kinds)
			sort.Strings(want)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("rendered kinds (-want +got):\n%s", diff)
			}
			for _, o := range objs {
				if o.GetNamespace() != "" && o.GetNamespace() != tc.rel.Namespace {
					t.Errorf("%s %s is in namespace %s, not the release's %s", o.GetKind(), o.GetName(), o.GetNamespace(), tc.rel.Namespace)
				}
			}
			checkTyped(t, objs)
			d := deployment(t, objs)
			c := container(t, d)
			if diff := cmp.Diff(tc.args, c.Args); diff != "" {
				t.Errorf("operator arguments (-want +got):\n%s", diff)
			}
			checkArgsAreFlags(t, c, flags)
			checkHardened(t, d)
			checkSelectors(t, objs, d)
			checkRBACWiring(t, objs, d)
			if tc.check != nil {
				tc.check(t, objs)
			}
		})
	}
}

// Every value in values.yaml is documented in the chart README's table, as `dotted.key`.
func TestChartREADMEDocumentsEveryValue(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	values := map[string]any{}
	if err := yaml.Unmarshal(data, &values); err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(chartDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([^`]+)` \\|").FindAllStringSubmatch(string(readme), -1) {
		documented[m[1]] = true
	}
	var keys []string
	leafKeys("", values, &keys)
	for _, k := range keys {
		if !documented[k] {
			t.Errorf("value %s is not in charts/kray/README.md's table", k)
		}
		delete(documented, k)
	}
	for k := range documented {
		t.Errorf("charts/kray/README.md documents %s, which values.yaml does not have", k)
	}
}

// leafKeys appends the dotted keys of v's leaves; lists and empty maps are leaves.
func leafKeys(prefix string, v any, out *[]string) {
	m, ok := v.(map[string]any)
	if !ok || len(m) == 0 || prefix == "resources" || strings.HasSuffix(prefix, "SecurityContext") || prefix == "securityContext" {
		*out = append(*out, prefix)
		return
	}
	for k, child := range m {
		key := k
		if prefix != "" {
			key = prefix + "." + k
		}
		leafKeys(key, child, out)
	}
}

// lastRuleIsPodGroups checks that the operator's ClusterRole ends with the rule on the PodGroups of group.
func lastRuleIsPodGroups(group string) func(*testing.T, []*unstructured.Unstructured) {
	return func(t *testing.T, objs []*unstructured.Unstructured) {
		var role rbacv1.ClusterRole
		for _, o := range objs {
			if o.GetKind() == "ClusterRole" && o.GetName() == "kray" {
				typed(t, o, &role)
			}
		}
		last := role.Rules[len(role.Rules)-1]
		if !slices.Equal(last.APIGroups, []string{group}) || !slices.Equal(last.Resources, []string{"podgroups"}) {
			t.Errorf("the operator's role lacks the %s PodGroups rule: last rule %+v", group, last)
		}
	}
}

// A values file written for KubeRay's chart keeps its scope: watchNamespace is taken as watchNamespaces. With
// singleNamespaceInstall, every watched namespace gets the operator's Role bound there, and no other.
func TestChartWatchedNamespacesGetTheirRoles(t *testing.T) {
	for _, tc := range []struct {
		values string
		arg    string
		roles  []string // namespaces of the operator's Role and RoleBinding
	}{
		{`watchNamespace: [team-a, team-b]`, "--watch-namespaces=team-a,team-b", nil},
		{`{watchNamespaces: [team-c], watchNamespace: [team-a]}`, "--watch-namespaces=team-c", nil},
		{`{singleNamespaceInstall: true, watchNamespace: [team-a, team-b]}`, "--watch-namespaces=team-a,team-b", []string{"team-a", "team-b"}},
		{`singleNamespaceInstall: true`, "--watch-namespaces=kray-system", []string{"kray-system"}},
	} {
		values := map[string]any{}
		if err := yaml.Unmarshal([]byte(tc.values), &values); err != nil {
			t.Fatal(err)
		}
		objs := renderChart(t, defaultRelease, values)
		if args := container(t, deployment(t, objs)).Args; !slices.Contains(args, tc.arg) {
			t.Errorf("%s: arguments %q, want %s", tc.values, args, tc.arg)
		}
		var roles, bindings []string
		for _, o := range objs {
			switch {
			case o.GetKind() == "Role" && o.GetName() == "kray":
				roles = append(roles, o.GetNamespace())
			case o.GetKind() == "RoleBinding" && o.GetName() == "kray":
				bindings = append(bindings, o.GetNamespace())
			case o.GetKind() == "ClusterRoleBinding" && o.GetName() == "kray" && tc.roles != nil:
				t.Errorf("%s: a ClusterRoleBinding beside the Roles", tc.values)
			}
		}
		if !slices.Equal(roles, tc.roles) || !slices.Equal(bindings, tc.roles) {
			t.Errorf("%s: Roles in %q, RoleBindings in %q; want both in %q", tc.values, roles, bindings, tc.roles)
		}
	}
}

// A key the chart does not know fails the install instead of being ignored: a KubeRay values file's
// setting kray has no value for, or a typo, would otherwise silently do nothing.
func TestChartRefusesUnknownValues(t *testing.T) {
	for _, values := range []string{
		`crNamespacedRbacEnable: false`,
		`watchNamespacess: [a]`,
		`metrics: {secured: true}`,
		`image: {pullPolicy: Sometimes}`,
	} {
		v := map[string]any{}
		if err := yaml.Unmarshal([]byte(values), &v); err != nil {
			t.Fatal(err)
		}
		if _, err := HelmChart(chartDir, defaultRelease, v); err == nil || !strings.Contains(err.Error(), "values don't meet the specifications of the schema") {
			t.Errorf("%s: %v, want the schema's refusal", values, err)
		}
	}
}
