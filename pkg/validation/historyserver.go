package validation

import (
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/builder"
	"github.com/kray-project/kray/pkg/features"
)

// historyServerRules checks historyServerOptions as KubeRay v1.7 does, with its words: refused while the
// RayClusterHistoryServer gate is off; a collector with an image, none of the variables the operator sets,
// a literal STORAGE_BACKEND with what that backend needs; no container of the collector's name in a template.
func historyServerRules(rc *rayv1.RayCluster, opts ClusterOptions) error {
	h := rc.Spec.HistoryServerOptions
	if h == nil {
		return nil
	}
	if !opts.on(features.RayClusterHistoryServer) {
		return errors.New("RayClusterHistoryServer feature gate is not enabled")
	}
	if h.CollectorOptions == nil {
		return errors.New("historyServerOptions.collectorOptions must be set")
	}
	if err := collectorRules(h.CollectorOptions); err != nil {
		return err
	}
	for _, c := range rc.Spec.HeadGroupSpec.Template.Spec.Containers {
		if c.Name == builder.CollectorContainerName {
			return fmt.Errorf("head pod template must not define a container with name '%s' when history server collector options are enabled", builder.CollectorContainerName)
		}
	}
	for _, g := range rc.Spec.WorkerGroupSpecs {
		for _, c := range g.Template.Spec.Containers {
			if c.Name == builder.CollectorContainerName {
				return fmt.Errorf("worker group %s pod template must not define a container with name '%s' when history server collector options are enabled", g.GroupName, builder.CollectorContainerName)
			}
		}
	}
	return nil
}

// collectorRules checks the collector's image and env: the storage backend's settings must be given.
func collectorRules(o *rayv1.CollectorOptions) error {
	if o.Image == nil || *o.Image == "" {
		return errors.New("historyServerOptions.collectorOptions.image must be set")
	}
	env := map[string]corev1.EnvVar{}
	for _, e := range o.Env {
		env[e.Name] = e
	}
	set := func(name string) bool {
		e, ok := env[name]
		return ok && (e.Value != "" || e.ValueFrom != nil)
	}
	for _, name := range builder.CollectorManagedEnv {
		if _, ok := env[name]; ok {
			return fmt.Errorf("historyServerOptions.collectorOptions.env must not contain %s: it is managed by KubeRay and injected automatically into the collector container", name)
		}
	}
	backend := env["STORAGE_BACKEND"].Value
	if backend == "" {
		return errors.New("STORAGE_BACKEND environment variable must be set with a literal string value in historyServerOptions.collectorOptions.env")
	}
	need := func(name, when string) error {
		if !set(name) {
			return fmt.Errorf("%s environment variable must be set when STORAGE_BACKEND is %s", name, when)
		}
		return nil
	}
	switch strings.ToUpper(backend) {
	case "GCS":
		return need("GCS_BUCKET", "GCS")
	case "S3":
		return need("S3_REGION", "S3")
	case "AZUREBLOB":
		switch mode := strings.ToLower(strings.TrimSpace(env["AZURE_STORAGE_AUTH_MODE"].Value)); mode {
		case "connection_string":
			return need("AZURE_STORAGE_CONNECTION_STRING", "AZUREBLOB and AZURE_STORAGE_AUTH_MODE is connection_string")
		case "workload_identity", "default":
			return need("AZURE_STORAGE_ACCOUNT_URL", "AZUREBLOB and AZURE_STORAGE_AUTH_MODE is "+mode)
		default:
			if !set("AZURE_STORAGE_CONNECTION_STRING") && !set("AZURE_STORAGE_ACCOUNT_URL") {
				return errors.New("either AZURE_STORAGE_CONNECTION_STRING or AZURE_STORAGE_ACCOUNT_URL environment variable must be set when STORAGE_BACKEND is AZUREBLOB")
			}
		}
	case "ALIYUNOSS":
		for _, name := range []string{"OSS_BUCKET", "OSS_ENDPOINT", "OSS_REGION"} {
			if err := need(name, "ALIYUNOSS"); err != nil {
				return err
			}
		}
	}
	return nil
}
