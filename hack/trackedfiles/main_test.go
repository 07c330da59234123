package main

import (
	"encoding/binary"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestTodaysTreePasses holds the repository itself to the rule.
func TestTodaysTreePasses(t *testing.T) {
	problems, err := check("../..")
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) > 0 {
		t.Fatalf("the repository tracks refused files:\n%s", strings.Join(problems, "\n"))
	}
}

func TestPlantedFilesAreNamed(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	exe, err := os.Open(self)
	if err != nil {
		t.Fatal(err)
	}
	defer exe.Close()
	compiled := make([]byte, 64<<10)
	if _, err := io.ReadFull(exe, compiled); err != nil {
		t.Fatal(err)
	}
	pe := make([]byte, 512)
	copy(pe, "MZ")
	binary.LittleEndian.PutUint32(pe[0x3c:], 0x80)
	copy(pe[0x80:], "PE\x00\x00")
	big := []byte(strings.Repeat("a line of text\n", (2<<20)/15))

	tests := []struct {
		name    string
		path    string
		content []byte
		want    string // a substring of the one problem; "" for none
	}{
		{"the test binary itself", "kray-operator", compiled, "kray-operator is a compiled executable"},
		{"a PE in a folder", "tools/x.exe", pe, "tools/x.exe is a compiled executable (PE"},
		{"a thin Mach-O", "bench", []byte{0xcf, 0xfa, 0xed, 0xfe, 7, 0, 0, 1}, "bench is a compiled executable (Mach-O"},
		{"a 2 MiB text file", "docs/big.txt", big, "docs/big.txt is 2"},
		{"a 2 MiB generated CRD", "config/crd/bases/ray.io_rayjobs.yaml", big, ""},
		{"a 2 MiB file beside the CRDs", "config/crd/big.yaml", big, "config/crd/big.yaml is"},
		{"a small text file starting with MZ", "notes.txt", []byte("MZ is a postcode area\n"), ""},
		{"a file of exactly 1 MiB", "data.bin", make([]byte, maxSize), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := gitRepo(t)
			plant(t, dir, "README.md", []byte("hello\n"))
			plant(t, dir, tt.path, tt.content)
			problems, err := check(dir)
			if err != nil {
				t.Fatal(err)
			}
			if tt.want == "" {
				if len(problems) != 0 {
					t.Fatalf("want no problem, got %q", problems)
				}
				return
			}
			if len(problems) != 1 || !strings.Contains(problems[0], tt.want) {
				t.Fatalf("want one problem containing %q, got %q", tt.want, problems)
			}
		})
	}
}

func TestUntrackedFilesAreNotChecked(t *testing.T) {
	dir := gitRepo(t)
	plant(t, dir, "README.md", []byte("hello\n"))
	if err := os.WriteFile(filepath.Join(dir, "kray-operator"), []byte("\x7fELF rest"), 0o755); err != nil {
		t.Fatal(err)
	}
	problems, err := check(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) != 0 {
		t.Fatalf("an untracked file was checked: %q", problems)
	}
}

func gitRepo(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	run(t, dir, "init", "-q")
	return dir
}

// plant writes content to rel under dir and adds it to git's index.
func plant(t *testing.T, dir, rel string, content []byte) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, content, 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, dir, "add", "--", rel)
}

func run(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
}
