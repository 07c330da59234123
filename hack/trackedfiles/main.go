// Command trackedfiles fails when a file tracked by git is a compiled executable (ELF, Mach-O, PE) or is
// larger than 1 MiB, naming each such file; `make test` runs it first, beside fmt and vet.
//
// A clone downloads every version of every tracked file for good, so a binary left at the root by a
// `go build` and committed by mistake costs every later clone its size; the check stops it before it lands.
//
// Usage: go run ./hack/trackedfiles [DIR]   (DIR defaults to the current directory)
package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
)

// maxSize is the largest tracked file allowed outside allowLarge.
const maxSize = 1 << 20

// allowLarge holds path patterns (path.Match syntax) of files that may exceed maxSize: each is
// generated, reviewed as a diff of its generator, and cannot be made smaller without losing schema.
var allowLarge = []string{
	// The CRDs controller-gen writes from api/ (KubeRay's schema embeds full pod templates).
	"config/crd/bases/*.yaml",
	// The same CRDs as the Helm chart ships them (a copy made by `make manifests`).
	"charts/kray/crds/*.yaml",
}

func main() {
	dir := "."
	if len(os.Args) > 1 {
		dir = os.Args[1]
	}
	problems, err := check(dir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "trackedfiles: %v\n", err)
		os.Exit(2)
	}
	for _, p := range problems {
		fmt.Fprintf(os.Stderr, "trackedfiles: %s\n", p)
	}
	if len(problems) > 0 {
		fmt.Fprintln(os.Stderr, "trackedfiles: remove these files from git (git rm --cached FILE) and ignore them in .gitignore")
		os.Exit(1)
	}
}

// check returns one message per tracked file under dir that is an executable or too large.
func check(dir string) ([]string, error) {
	out, err := exec.Command("git", "-C", dir, "ls-files", "-z").Output()
	if err != nil {
		return nil, fmt.Errorf("git ls-files: %w", err)
	}
	var problems []string
	for _, name := range bytes.Split(bytes.TrimSuffix(out, []byte{0}), []byte{0}) {
		if len(name) == 0 {
			continue
		}
		p, err := checkFile(dir, string(name))
		if err != nil {
			return nil, err
		}
		if p != "" {
			problems = append(problems, p)
		}
	}
	return problems, nil
}

// checkFile returns why the tracked file rel (relative to dir) is refused, or "" when it is not.
func checkFile(dir, rel string) (string, error) {
	f, err := os.Open(filepath.Join(dir, filepath.FromSlash(rel)))
	if errors.Is(err, os.ErrNotExist) {
		return "", nil // deleted in the work tree; git status shows it
	}
	if err != nil {
		return "", err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return "", err
	}
	if !info.Mode().IsRegular() {
		return "", nil
	}
	head := make([]byte, 4096)
	n, err := io.ReadFull(f, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return "", err
	}
	if kind := executableKind(head[:n]); kind != "" {
		return fmt.Sprintf("%s is a compiled executable (%s, %d bytes)", rel, kind, info.Size()), nil
	}
	if info.Size() > maxSize && !allowed(rel) {
		return fmt.Sprintf("%s is %d bytes, over the %d-byte limit for tracked files", rel, info.Size(), maxSize), nil
	}
	return "", nil
}

// executableKind names the executable format whose header starts head, or returns "".
func executableKind(head []byte) string {
	switch {
	case bytes.HasPrefix(head, []byte("\x7fELF")):
		return "ELF"
	case len(head) >= 4 && isMachO(binary.BigEndian.Uint32(head)):
		return "Mach-O"
	case isPE(head):
		return "PE"
	}
	return ""
}

// isMachO reports whether magic, read big-endian, is a thin Mach-O magic of either byte order or a
// universal (fat) header.
func isMachO(magic uint32) bool {
	switch magic {
	case 0xfeedface, 0xfeedfacf, 0xcefaedfe, 0xcffaedfe, 0xcafebabe:
		return true
	}
	return false
}

// isPE reports whether head is a DOS header whose e_lfanew points at a "PE\0\0" signature.
func isPE(head []byte) bool {
	if len(head) < 0x40 || !bytes.HasPrefix(head, []byte("MZ")) {
		return false
	}
	off := int(binary.LittleEndian.Uint32(head[0x3c:]))
	return off >= 0x40 && off+4 <= len(head) && bytes.Equal(head[off:off+4], []byte("PE\x00\x00"))
}

// allowed reports whether rel may exceed maxSize.
func allowed(rel string) bool {
	for _, pattern := range allowLarge {
		if ok, _ := path.Match(pattern, rel); ok {
			return true
		}
	}
	return false
}
