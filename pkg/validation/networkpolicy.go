package validation

import (
	"errors"
	"fmt"
	"strings"

	k8svalidation "k8s.io/apimachinery/pkg/util/validation"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/builder"
	"github.com/kray-project/kray/pkg/features"
)

// networkPolicyRules checks spec.networkPolicy as KubeRay v1.7 does, with its words: refused while the
// RayClusterNetworkPolicy gate is off; rules only for a direction the mode restricts; worker group names that
// fit in the policies' names; an entry of workerGroups for a group that exists.
func networkPolicyRules(rc *rayv1.RayCluster, opts ClusterOptions) error {
	np := rc.Spec.NetworkPolicy
	if np == nil {
		return nil
	}
	if !opts.on(features.RayClusterNetworkPolicy) {
		return errors.New("spec.networkPolicy requires the RayClusterNetworkPolicy feature gate to be enabled")
	}
	ingress, egress := builder.NetworkPolicyTypes(np)
	mode := rayv1.NetworkPolicyDenyAll
	if np.Mode != nil {
		mode = *np.Mode
	}
	rules := func(path string, r *rayv1.NetworkPolicyRules) error {
		switch {
		case r == nil:
		case len(r.IngressRules) > 0 && !ingress:
			return fmt.Errorf("%s.ingressRules cannot be set when mode is %q (ingress is not restricted)", path, mode)
		case len(r.EgressRules) > 0 && !egress:
			return fmt.Errorf("%s.egressRules cannot be set when mode is %q (egress is not restricted)", path, mode)
		}
		return nil
	}
	if err := rules("networkPolicy.head", np.Head); err != nil {
		return err
	}
	if err := rules("networkPolicy.worker", np.Worker); err != nil {
		return err
	}
	groups := map[string]bool{}
	for _, g := range rc.Spec.WorkerGroupSpecs {
		if errs := k8svalidation.IsDNS1123Label(g.GroupName); len(errs) > 0 {
			return fmt.Errorf("worker group name %q must be a valid DNS1123 label when networkPolicy is enabled (it is embedded in the NetworkPolicy name): %s", g.GroupName, strings.Join(errs, "; "))
		}
		groups[g.GroupName] = true
	}
	for i := range np.WorkerGroups {
		w := &np.WorkerGroups[i]
		if err := rules(fmt.Sprintf("networkPolicy.workerGroups[%q]", w.GroupName), &w.NetworkPolicyRules); err != nil {
			return err
		}
		if !groups[w.GroupName] {
			return fmt.Errorf("networkPolicy.workerGroups[%q] does not match any group name in workerGroupSpecs", w.GroupName)
		}
	}
	return nil
}
