package shared

import (
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
)

// Served reports whether the API server serves every one of resources (plural names) in the group version gv
// ("group/version"); a group version it does not know is not served, any other discovery error is returned.
func Served(d discovery.DiscoveryInterface, gv string, resources ...string) (bool, error) {
	list, err := d.ServerResourcesForGroupVersion(gv)
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("discover %s: %w", gv, err)
	}
	for _, name := range resources {
		if !slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == name }) {
			return false, nil
		}
	}
	return true, nil
}
