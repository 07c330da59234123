// Package imageref names a container image the way Kruise's NodeImage status does: the repository in Docker's
// familiar form, and the tag or digest.
package imageref

import "strings"

// dockerHub is the registry an image name without one refers to.
const dockerHub = "docker.io"

// NameTag splits image into the repository, in Docker's familiar form (Docker Hub's host and its "library/"
// dropped), and the tag ("latest" when there is none) or, for an image named by digest, the digest: the keys of
// a Kruise NodeImage's status. ok is false for an empty name.
func NameTag(image string) (name, tag string, ok bool) {
	if image == "" {
		return "", "", false
	}
	name, tag = image, "latest"
	if at := strings.Index(name, "@"); at >= 0 {
		name, tag = name[:at], name[at+1:]
		// A digest wins over a tag beside it.
		if colon := strings.LastIndex(name, ":"); colon > strings.LastIndex(name, "/") {
			name = name[:colon]
		}
	} else if colon := strings.LastIndex(name, ":"); colon > strings.LastIndex(name, "/") {
		name, tag = name[:colon], name[colon+1:]
	}
	if name == "" || tag == "" {
		return "", "", false
	}
	// Docker Hub's legacy host index.docker.io is Docker Hub; its registry-1.docker.io is a host of its own to
	// Kruise, which keeps it in the name (distribution's reference.FamiliarName).
	for _, host := range []string{dockerHub + "/", "index." + dockerHub + "/"} {
		if strings.HasPrefix(name, host) {
			name = strings.TrimPrefix(name, host)
			break
		}
	}
	if first, _, _ := strings.Cut(name, "/"); first == "library" && strings.Count(name, "/") == 1 && !hostLike(first) {
		name = strings.TrimPrefix(name, "library/")
	}
	return name, tag, true
}

// hostLike reports whether the first part of an image name names a registry host, as Docker reads it: it has a
// dot or a port, or is localhost.
func hostLike(part string) bool {
	return strings.ContainsAny(part, ".:") || part == "localhost"
}
