package scale

import (
	"sort"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kray-project/kray/pkg/constants"
)

// replica is one labelled replica of a group: its name, index and active member pods.
type replica struct {
	name    string
	index   int
	members []*corev1.Pod
}

// replicasOf groups the active pods of a CloneSet into labelled replicas (by replica name for multi-host
// groups, by index otherwise) and returns the pods that carry no replica index yet, oldest first.
func replicasOf(pods []corev1.Pod, uid types.UID, multiHost bool) (map[string]*replica, []*corev1.Pod) {
	reps := map[string]*replica{}
	var unlabeled []*corev1.Pod
	for i := range pods {
		p := &pods[i]
		if !IsActive(p, uid) {
			continue
		}
		idx, err := strconv.Atoi(p.Labels[constants.LabelReplicaIndex])
		key := p.Labels[constants.LabelReplicaIndex]
		if multiHost {
			key = p.Labels[constants.LabelReplicaName]
		}
		if err != nil || key == "" {
			unlabeled = append(unlabeled, p)
			continue
		}
		r := reps[key]
		if r == nil {
			r = &replica{name: key, index: idx}
			reps[key] = r
		}
		r.members = append(r.members, p)
	}
	sort.Slice(unlabeled, func(i, j int) bool {
		a, b := unlabeled[i], unlabeled[j]
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		return a.Name < b.Name
	})
	return reps, unlabeled
}

// ReplicaLabels returns, per pod name, the replica labels to add to a group's pods that have none yet.
// Single-host groups (hosts 1) give each such pod the smallest unused replica index. Multi-host groups form
// a replica only from hosts unlabelled pods at once (the oldest first): they share the smallest unused index
// and a replica name ("<group>-" plus the first member's random name suffix), and get host indices
// 0..hosts-1. Fewer unlabelled pods than hosts wait for their siblings.
func ReplicaLabels(pods []corev1.Pod, uid types.UID, group string, hosts int32) map[string]map[string]string {
	multiHost := hosts > 1
	reps, unlabeled := replicasOf(pods, uid, multiHost)
	used := map[int]bool{}
	for _, r := range reps {
		used[r.index] = true
	}
	next := 0
	nextIndex := func() int {
		for used[next] {
			next++
		}
		used[next] = true
		return next
	}
	out := map[string]map[string]string{}
	if !multiHost {
		for _, p := range unlabeled {
			out[p.Name] = map[string]string{constants.LabelReplicaIndex: strconv.Itoa(nextIndex())}
		}
		return out
	}
	for n := int(hosts); len(unlabeled) >= n; unlabeled = unlabeled[n:] {
		members := unlabeled[:n]
		name := group + "-" + suffix(members[0].Name)
		idx := strconv.Itoa(nextIndex())
		for host, p := range members {
			out[p.Name] = map[string]string{constants.LabelReplicaIndex: idx, constants.LabelReplicaName: name, constants.LabelHostIndex: strconv.Itoa(host)}
		}
	}
	return out
}

// suffix is the last five characters of a CloneSet pod name (its random instance id).
func suffix(name string) string {
	if len(name) <= 5 {
		return name
	}
	return name[len(name)-5:]
}

// brokenReplicaMembers lists the active members of multi-host replicas that lost a host (fewer than hosts
// active members): KubeRay deletes such a replica whole, and its hosts are recreated together.
func brokenReplicaMembers(reps map[string]*replica, hosts int32) []string {
	var out []string
	for _, r := range reps {
		if len(r.members) < int(hosts) {
			for _, p := range r.members {
				out = append(out, p.Name)
			}
		}
	}
	sort.Strings(out)
	return out
}

// expandToReplicas adds to names every active member of the multi-host replicas that the named pods belong to.
func expandToReplicas(names []string, reps map[string]*replica) []string {
	byPod := map[string]*replica{}
	for _, r := range reps {
		for _, p := range r.members {
			byPod[p.Name] = r
		}
	}
	out := append([]string(nil), names...)
	seen := map[string]bool{}
	for _, n := range names {
		seen[n] = true
	}
	for _, n := range names {
		if r := byPod[n]; r != nil {
			for _, p := range r.members {
				if !seen[p.Name] {
					seen[p.Name] = true
					out = append(out, p.Name)
				}
			}
		}
	}
	return out
}

// wholeReplicaVictims picks at least count pods to remove from a multi-host group without splitting a
// replica: unlabelled pods first, then whole replicas, the highest index first. listed pods are skipped.
func wholeReplicaVictims(reps map[string]*replica, unlabeled []*corev1.Pod, count int, listed map[string]bool) []string {
	var out []string
	for _, p := range unlabeled {
		if len(out) >= count {
			return out
		}
		if !listed[p.Name] {
			out = append(out, p.Name)
		}
	}
	ordered := make([]*replica, 0, len(reps))
	for _, r := range reps {
		ordered = append(ordered, r)
	}
	sort.Slice(ordered, func(i, j int) bool { return ordered[i].index > ordered[j].index })
	for _, r := range ordered {
		if len(out) >= count {
			break
		}
		for _, p := range r.members {
			if !listed[p.Name] {
				out = append(out, p.Name)
			}
		}
	}
	return out
}

// ReplicasNeedWork reports whether a multi-host group's pods, as last seen, call for the planner: a replica
// lost a host, or the group holds more active pods than desired. The planner itself re-reads the pods; this
// only spares that read when the cache shows nothing to do.
func ReplicasNeedWork(pods []corev1.Pod, uid types.UID, hosts, desired int32) bool {
	reps, unlabeled := replicasOf(pods, uid, true)
	active := len(unlabeled)
	for _, r := range reps {
		active += len(r.members)
	}
	return len(brokenReplicaMembers(reps, hosts)) > 0 || active > int(desired)
}
