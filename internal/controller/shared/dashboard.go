package shared

import (
	"errors"
	"fmt"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/builder"
	"github.com/kray-project/kray/pkg/dashboard"
	"github.com/kray-project/kray/pkg/names"
)

// ErrNoDashboardPort reports a head whose ports name no "dashboard" port.
var ErrNoDashboardPort = errors.New("dashboard port is not found: the head container's ports name no \"dashboard\" port")

// DashboardAddress is the in-cluster address (host:port, no scheme) of rc's dashboard: its head Service's.
func DashboardAddress(rc *rayv1.RayCluster, opts builder.Options) (string, error) {
	port, ok := builder.DashboardPort(rc)
	if !ok {
		return "", ErrNoDashboardPort
	}
	return fmt.Sprintf("%s:%d", builder.HeadServiceFQDN(rc, opts), port), nil
}

// DashboardBase is the base URL kray calls rc's dashboard at: the operator's address template (the
// --ray-dashboard-address flag, or the API server's service proxy) for rc when set, with {namespace},
// {cluster} and {service} (its head Service) replaced, else its head Service's address. It is derived from the cluster
// alone, never from an address a status holds, which whoever may write the status could point elsewhere.
func DashboardBase(template string, rc *rayv1.RayCluster, opts builder.Options) (string, error) {
	if base := dashboard.Address(template, map[string]string{"namespace": rc.Namespace, "cluster": rc.Name, "service": names.HeadServiceFor(rc)}); base != "" {
		return base, nil
	}
	address, err := DashboardAddress(rc, opts)
	if err != nil {
		return "", err
	}
	return "http://" + address, nil
}
