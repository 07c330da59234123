package main

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestSpecFile(t *testing.T) {
	cases := map[string]struct {
		args []string
		want string
	}{
		"create with bundle": {[]string{"--root", "/run/runc", "--log", "l.json", "--log-format", "json", "create", "--bundle", "/b", "--pid-file", "p", "id"}, "/b/config.json"},
		"run in cwd":         {[]string{"run", "id"}, "config.json"},
		"bundle with =":      {[]string{"create", "--bundle=/x", "id"}, "/x/config.json"},
		"exec process file":  {[]string{"--root", "/r", "exec", "--process", "/tmp/p.json", "--detach", "id"}, "/tmp/p.json"},
		"start":              {[]string{"--root", "/r", "start", "id"}, ""},
		"delete":             {[]string{"delete", "--force", "id"}, ""},
	}
	for name, tc := range cases {
		if got := specFile(tc.args); got != tc.want {
			t.Errorf("%s: specFile = %q, want %q", name, got, tc.want)
		}
	}
}

func TestDrop(t *testing.T) {
	missing := map[string]bool{"CAP_SYS_RESOURCE": true}
	all := []string{"CAP_CHOWN", "CAP_SYS_RESOURCE", "CAP_SYS_ADMIN"}
	kept := []string{"CAP_CHOWN", "CAP_SYS_ADMIN"}
	sets := func(c []string) map[string]any {
		return map[string]any{"bounding": c, "effective": c, "permitted": c}
	}
	config, _ := json.Marshal(map[string]any{"ociVersion": "1.0.2", "process": map[string]any{"args": []string{"sh"}, "capabilities": sets(all)}})
	process, _ := json.Marshal(map[string]any{"args": []string{"sh"}, "capabilities": sets(all)})
	unprivileged, _ := json.Marshal(map[string]any{"process": map[string]any{"capabilities": sets(kept)}})

	for name, in := range map[string][]byte{"config.json": config, "process.json": process} {
		out, changed, err := drop(in, missing)
		if err != nil || !changed {
			t.Fatalf("%s: changed %v, err %v", name, changed, err)
		}
		var doc map[string]any
		_ = json.Unmarshal(out, &doc)
		p := doc
		if inner, ok := doc["process"].(map[string]any); ok {
			p = inner
		}
		for set, caps := range p["capabilities"].(map[string]any) {
			var got []string
			for _, c := range caps.([]any) {
				got = append(got, c.(string))
			}
			if !reflect.DeepEqual(got, kept) {
				t.Errorf("%s: %s = %v, want %v", name, set, got, kept)
			}
		}
		if args := p["args"].([]any); len(args) != 1 || args[0] != "sh" {
			t.Errorf("%s: other fields changed: args %v", name, args)
		}
	}
	if _, changed, err := drop(unprivileged, missing); err != nil || changed {
		t.Errorf("a spec without the capability: changed %v, err %v; want unchanged", changed, err)
	}
}

func TestBoundingSet(t *testing.T) {
	set, err := boundingSet("Name:\tx\nCapBnd:\t000001fffeffffff\nCapAmb:\t0\n")
	if err != nil || set != 0x1fffeffffff {
		t.Fatalf("boundingSet = %x, %v", set, err)
	}
	if set&(1<<24) != 0 {
		t.Errorf("bit 24 (CAP_SYS_RESOURCE) should be clear")
	}
	if capabilityNames[24] != "CAP_SYS_RESOURCE" {
		t.Errorf("capabilityNames[24] = %s", capabilityNames[24])
	}
}
