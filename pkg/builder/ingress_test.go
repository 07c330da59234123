package builder

import "testing"

func TestIngressAnnotationCopied(t *testing.T) {
	custom := []string{"example.com/", "nginx.ingress.kubernetes.io/server-snippet"}
	for _, tc := range []struct {
		key      string
		prefixes []string
		want     bool
	}{
		{"nginx.ingress.kubernetes.io/rewrite-target", nil, true},
		{"cert-manager.io/cluster-issuer", nil, true},
		{"nginx.ingress.kubernetes.io/configuration-snippet", nil, false},
		{"nginx.ingress.kubernetes.io/server-snippet", nil, false},
		{"nginx.org/server-snippets", nil, false},
		{"haproxy.org/backend-config-snippet", nil, false},
		{"ray.io/enable-serve-service", nil, false},
		{"example.com/team", nil, false},
		{"example.com/team", custom, true},
		{"nginx.ingress.kubernetes.io/rewrite-target", custom, false},
		{"nginx.ingress.kubernetes.io/server-snippet", custom, true},
		{"example.com/SNIPPET", custom, false},
		{"anything", []string{""}, false},
		{"nginx.ingress.kubernetes.io/rewrite-target", []string{}, false},
	} {
		if got := IngressAnnotationCopied(tc.key, tc.prefixes); got != tc.want {
			t.Errorf("IngressAnnotationCopied(%q, %q) = %t, want %t", tc.key, tc.prefixes, got, tc.want)
		}
	}
}
