package builder

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// setPullPolicies gives every container and init container of tmpl that names no imagePullPolicy the policy
// the API server gives such a container of a bare pod, as KubeRay's pods get it: Kruise's defaulting would
// give it Always, so every start of a kray pod would ask the registry. A container that the workload's live
// template (nil: none yet) already has keeps the policy it has there, so that an operator upgrade changes no
// workload created with Kruise's Always (the change would restart or recreate pods under an upgrade
// strategy that updates them); a Deployment updated by `kubectl apply` keeps its defaulted policy the same
// way. It does not modify live.
func setPullPolicies(tmpl, live *corev1.PodTemplateSpec) {
	var liveInit, liveMain []corev1.Container
	if live != nil {
		liveInit, liveMain = live.Spec.InitContainers, live.Spec.Containers
	}
	setPullPoliciesOf(tmpl.Spec.InitContainers, liveInit)
	setPullPoliciesOf(tmpl.Spec.Containers, liveMain)
}

// setPullPoliciesOf sets the policy of each container of cs that names none: that of the container of the
// same name in live, else the API server's default.
func setPullPoliciesOf(cs, live []corev1.Container) {
	for i := range cs {
		c := &cs[i]
		if c.ImagePullPolicy != "" {
			continue
		}
		c.ImagePullPolicy = defaultPullPolicy(c.Image)
		for _, l := range live {
			if l.Name == c.Name && l.ImagePullPolicy != "" {
				c.ImagePullPolicy = l.ImagePullPolicy
			}
		}
	}
}

// defaultPullPolicy is the imagePullPolicy the API server gives a container of image that names none: Always
// for an image with neither tag nor digest or with the tag "latest", else IfNotPresent.
func defaultPullPolicy(image string) corev1.PullPolicy {
	if image == "" {
		return corev1.PullIfNotPresent
	}
	name, digest, _ := strings.Cut(image, "@")
	tag := ""
	if i := strings.LastIndexByte(name, ':'); i > strings.LastIndexByte(name, '/') {
		tag = name[i+1:]
	}
	if tag == "latest" || (tag == "" && digest == "") {
		return corev1.PullAlways
	}
	return corev1.PullIfNotPresent
}
