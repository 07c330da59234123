package imageref

import "testing"

func TestNameTag(t *testing.T) {
	cases := []struct {
		image, name, tag string
		ok               bool
	}{
		{"rayproject/ray:2.46.0", "rayproject/ray", "2.46.0", true},
		{"docker.io/rayproject/ray:2.46.0", "rayproject/ray", "2.46.0", true},
		{"index.docker.io/rayproject/ray:2.46.0", "rayproject/ray", "2.46.0", true},
		{"registry-1.docker.io/rayproject/ray:2.46.0", "registry-1.docker.io/rayproject/ray", "2.46.0", true},
		{"registry-1.docker.io/library/nginx:1.27", "registry-1.docker.io/library/nginx", "1.27", true},
		{"rayproject/ray", "rayproject/ray", "latest", true},
		{"nginx", "nginx", "latest", true},
		{"library/nginx:1.27", "nginx", "1.27", true},
		{"docker.io/library/nginx:1.27", "nginx", "1.27", true},
		{"kray-registry:5000/ray:2.52.0-big", "kray-registry:5000/ray", "2.52.0-big", true},
		{"kray-registry:5000/ray", "kray-registry:5000/ray", "latest", true},
		{"localhost:5000/library/ray:1", "localhost:5000/library/ray", "1", true},
		{"us-docker.pkg.dev/p/r/ray:2.46.0-py310-gpu", "us-docker.pkg.dev/p/r/ray", "2.46.0-py310-gpu", true},
		{"rayproject/ray@sha256:abc", "rayproject/ray", "sha256:abc", true},
		{"rayproject/ray:2.46.0@sha256:abc", "rayproject/ray", "sha256:abc", true},
		{"", "", "", false},
		{"rayproject/ray:", "", "", false},
	}
	for _, tc := range cases {
		name, tag, ok := NameTag(tc.image)
		if name != tc.name || tag != tc.tag || ok != tc.ok {
			t.Errorf("NameTag(%q) = %q, %q, %v; want %q, %q, %v", tc.image, name, tag, ok, tc.name, tc.tag, tc.ok)
		}
	}
}
