package raycluster

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/membership"
)

// healMemory holds, by cluster, what worker healing observed of its membership (membership.Memory). It is held
// in memory only: an operator that restarts starts each cluster's memory over, which delays a restart and
// never causes one.
type healMemory struct {
	mu       sync.Mutex
	clusters map[types.NamespacedName]*clusterHealMemory
}

// clusterHealMemory is one cluster's memory, for the cluster of that UID: a cluster deleted and created again
// under its name starts over.
type clusterHealMemory struct {
	uid types.UID
	mem membership.Memory
}

// of returns rc's memory. One cluster is reconciled by one worker at a time, so the memory it returns is used
// by one goroutine at a time.
func (h *healMemory) of(rc *rayv1.RayCluster) *membership.Memory {
	h.mu.Lock()
	defer h.mu.Unlock()
	key := types.NamespacedName{Namespace: rc.Namespace, Name: rc.Name}
	c := h.clusters[key]
	if c == nil || c.uid != rc.UID {
		if h.clusters == nil {
			h.clusters = map[types.NamespacedName]*clusterHealMemory{}
		}
		c = &clusterHealMemory{uid: rc.UID}
		h.clusters[key] = c
	}
	return &c.mem
}

// forget drops the memory of a cluster that is gone.
func (h *healMemory) forget(key types.NamespacedName) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.clusters, key)
}
