// Package nodeimage reads what a Kruise NodeImage says of one image tag on its node: whether a pull of it
// there is still worth waiting for.
package nodeimage

import (
	"time"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
)

// Unanswered is how long a tag queued in a NodeImage's spec may go without a status of its version before the
// node is taken to have no kruise-daemon: a running daemon reports a queued tag Waiting or Pulling within
// seconds, while kruise-manager keeps a NodeImage for every Ready node, daemon or not, and marks an unanswered
// tag Failed only after 10 minutes.
const Unanswered = 15 * time.Second

// Awaited reports whether, at now, a pull of name:tag onto the node of ni is under way or about to start:
//   - no NodeImage (no kruise-daemon on the node, or it may not be read): no;
//   - the tag queued in the spec: yes while the daemon reports that version Waiting or Pulling, no once it
//     reports it Succeeded or Failed, and no when no status of that version came within Unanswered of the
//     queueing;
//   - the tag not queued: no when the node already reports it Succeeded, else queued says whether an
//     ImagePullJob that may still queue it on the node runs.
func Awaited(ni *kruisev1alpha1.NodeImage, name, tag string, now time.Time, queued bool) bool {
	if ni == nil {
		return false
	}
	var status *kruisev1alpha1.ImageTagStatus
	for i, t := range ni.Status.ImageStatuses[name].Tags {
		if t.Tag == tag {
			status = &ni.Status.ImageStatuses[name].Tags[i]
			break
		}
	}
	for _, t := range ni.Spec.Images[name].Tags {
		if t.Tag != tag {
			continue
		}
		if status != nil && status.Version == t.Version {
			return status.Phase != kruisev1alpha1.ImagePhaseSucceeded && status.Phase != kruisev1alpha1.ImagePhaseFailed
		}
		return t.CreatedAt != nil && now.Before(t.CreatedAt.Add(Unanswered))
	}
	if status != nil && status.Phase == kruisev1alpha1.ImagePhaseSucceeded {
		return false
	}
	return queued
}
