// Package operatorconfig reads KubeRay's operator Configuration file (config.ray.io/v1alpha1, kind
// Configuration, passed with --config), so that a platform's KubeRay configuration starts kray unchanged.
package operatorconfig

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// APIVersion and Kind identify the file, as KubeRay's.
const (
	APIVersion = "config.ray.io/v1alpha1"
	Kind       = "Configuration"
)

// KubeRay's defaults for the fields the file leaves unset.
const (
	DefaultMetricsAddr          = ":8080"
	DefaultProbeAddr            = ":8082"
	DefaultReconcileConcurrency = 1
	DefaultQPS                  = 100.0
	DefaultBurst                = 200
)

// Configuration is KubeRay v1.7's operator Configuration, field for field.
type Configuration struct {
	metav1.TypeMeta `json:",inline"`

	MetricsAddr             string `json:"metricsAddr,omitempty"`
	ProbeAddr               string `json:"probeAddr,omitempty"`
	EnableLeaderElection    *bool  `json:"enableLeaderElection,omitempty"`
	LeaderElectionNamespace string `json:"leaderElectionNamespace,omitempty"`
	ReconcileConcurrency    int    `json:"reconcileConcurrency,omitempty"`
	// WatchNamespace is a comma-separated list of namespaces; empty watches all.
	WatchNamespace string   `json:"watchNamespace,omitempty"`
	QPS            *float64 `json:"qps,omitempty"`
	Burst          *int     `json:"burst,omitempty"`

	LogFile          string `json:"logFile,omitempty"`
	LogStdoutEncoder string `json:"logStdoutEncoder,omitempty"`
	LogFileEncoder   string `json:"logFileEncoder,omitempty"`

	BatchScheduler       string `json:"batchScheduler,omitempty"`
	EnableBatchScheduler bool   `json:"enableBatchScheduler,omitempty"`
	UseKubernetesProxy   bool   `json:"useKubernetesProxy,omitempty"`

	DeleteRayJobAfterJobFinishes bool `json:"deleteRayJobAfterJobFinishes,omitempty"`
	EnableMetrics                bool `json:"enableMetrics,omitempty"`

	HeadSidecarContainers   []corev1.Container `json:"headSidecarContainers,omitempty"`
	WorkerSidecarContainers []corev1.Container `json:"workerSidecarContainers,omitempty"`
	DefaultContainerEnvs    []corev1.EnvVar    `json:"defaultContainerEnvs,omitempty"`
	DefaultPodLabels        map[string]string  `json:"defaultPodLabels,omitempty"`
	DefaultPodAnnotations   map[string]string  `json:"defaultPodAnnotations,omitempty"`

	// fields are the JSON names of the fields the file sets.
	fields map[string]bool
}

// Sets reports whether the file sets the field of JSON name field (as opposed to leaving it to its default).
func (c *Configuration) Sets(field string) bool { return c.fields[field] }

// Load reads the Configuration file at path, strictly: an unknown or misspelled field, a value of the wrong
// type or another apiVersion or kind is an error naming the file (KubeRay ignores unknown fields, so a typo
// would silently lose a setting). apiVersion and kind may be left out, as in KubeRay. Unset fields take
// KubeRay's defaults.
func Load(path string) (*Configuration, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read the Configuration file: %w", err)
	}
	c, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("Configuration file %s: %w", path, err)
	}
	return c, nil
}

// Parse decodes a Configuration strictly and fills KubeRay's defaults.
func Parse(data []byte) (*Configuration, error) {
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, err
	}
	c := &Configuration{}
	if len(js) > 0 && string(js) != "null" {
		// Field names match case-sensitively, as in KubeRay's decoder; an unknown one is an error here.
		strict, err := kjson.UnmarshalStrict(js, c)
		if err != nil {
			return nil, err
		}
		if err := errors.Join(strict...); err != nil {
			return nil, err
		}
		var present map[string]json.RawMessage
		if err := json.Unmarshal(js, &present); err != nil {
			return nil, err
		}
		c.fields = map[string]bool{}
		for k := range present {
			c.fields[k] = true
		}
	}
	if c.APIVersion != "" && c.APIVersion != APIVersion {
		return nil, fmt.Errorf("apiVersion %q, want %s", c.APIVersion, APIVersion)
	}
	if c.Kind != "" && c.Kind != Kind {
		return nil, fmt.Errorf("kind %q, want %s", c.Kind, Kind)
	}
	var errs []error
	for i, ctr := range append(append([]corev1.Container{}, c.HeadSidecarContainers...), c.WorkerSidecarContainers...) {
		if ctr.Name == "" || ctr.Image == "" {
			errs = append(errs, fmt.Errorf("sidecar container %d has no name or no image", i))
		}
	}
	for _, e := range c.DefaultContainerEnvs {
		if e.Name == "" {
			errs = append(errs, errors.New("defaultContainerEnvs: an env var has no name"))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	c.setDefaults()
	return c, nil
}

// setDefaults fills KubeRay's defaults (SetDefaults_Configuration).
func (c *Configuration) setDefaults() {
	if c.MetricsAddr == "" {
		c.MetricsAddr = DefaultMetricsAddr
	}
	if c.ProbeAddr == "" {
		c.ProbeAddr = DefaultProbeAddr
	}
	if c.EnableLeaderElection == nil {
		on := true
		c.EnableLeaderElection = &on
	}
	if c.ReconcileConcurrency <= 0 {
		c.ReconcileConcurrency = DefaultReconcileConcurrency
	}
	if c.QPS == nil {
		q := DefaultQPS
		c.QPS = &q
	}
	if c.Burst == nil {
		b := DefaultBurst
		c.Burst = &b
	}
}
