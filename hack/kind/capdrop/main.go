// Command capdrop is an OCI runtime for dockerd that removes capabilities the host withholds from every
// container's spec, then hands the call to runc unchanged.
//
// Docker grants a --privileged container every capability it knows, and runc fails with "unable to apply caps"
// when one of them is missing from its own bounding set, as CAP_SYS_RESOURCE is on some VMs. kind's nodes are
// privileged containers, so on such a host they only start when dockerd runs them through this wrapper:
//
//	dockerd --add-runtime capdrop=/path/to/capdrop --default-runtime capdrop
//
// The runtime it calls is $CAPDROP_RUNC (default "runc" on PATH); the capabilities it removes are those absent
// from its own bounding set, so the wrapper changes nothing on a host that withholds none.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
)

func main() {
	runc := os.Getenv("CAPDROP_RUNC")
	if runc == "" {
		runc = "runc"
	}
	path, err := exec.LookPath(runc)
	if err != nil {
		fail(err)
	}
	if file := specFile(os.Args[1:]); file != "" {
		missing, err := missingCapabilities()
		if err != nil {
			fail(err)
		}
		if err := dropFromFile(file, missing); err != nil {
			fail(err)
		}
	}
	args := append([]string{runc}, os.Args[1:]...)
	fail(syscall.Exec(path, args, os.Environ()))
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "capdrop: %v\n", err)
	os.Exit(1)
}

// specFile returns the JSON file carrying the capabilities of the process runc is asked to start: the bundle's
// config.json for create and run, the --process file for exec, and "" for every other command.
func specFile(args []string) string {
	command, bundle, process := "", ".", ""
	for i := 0; i < len(args); i++ {
		a := args[i]
		value := func() string {
			if i+1 < len(args) {
				i++
				return args[i]
			}
			return ""
		}
		switch {
		case a == "--bundle" || a == "-b":
			bundle = value()
		case len(a) > 9 && a[:9] == "--bundle=":
			bundle = a[9:]
		case a == "--process" || a == "-p":
			process = value()
		case len(a) > 10 && a[:10] == "--process=":
			process = a[10:]
		case command == "" && len(a) > 0 && a[0] != '-':
			command = a
		case command == "" && takesValue[a]:
			value()
		}
	}
	switch command {
	case "create", "run":
		return filepath.Join(bundle, "config.json")
	case "exec":
		return process
	}
	return ""
}

// takesValue lists runc's global flags that take a separate value, so that value is not read as the command.
var takesValue = map[string]bool{"--root": true, "--log": true, "--log-format": true, "--criu": true}

// missingCapabilities returns the names ("CAP_...") of the capabilities this kernel knows but this process's
// bounding set lacks.
func missingCapabilities() (map[string]bool, error) {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return nil, err
	}
	bounding, err := boundingSet(string(status))
	if err != nil {
		return nil, err
	}
	lastCap, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	if err != nil {
		return nil, err
	}
	var last int
	if _, err := fmt.Sscanf(string(lastCap), "%d", &last); err != nil {
		return nil, fmt.Errorf("reading cap_last_cap: %w", err)
	}
	missing := map[string]bool{}
	for bit := 0; bit <= last && bit < len(capabilityNames); bit++ {
		if bounding&(1<<uint(bit)) == 0 {
			missing[capabilityNames[bit]] = true
		}
	}
	return missing, nil
}

// boundingSet parses the CapBnd line of /proc/<pid>/status.
func boundingSet(status string) (uint64, error) {
	var set uint64
	for _, line := range splitLines(status) {
		if n, _ := fmt.Sscanf(line, "CapBnd:\t%x", &set); n == 1 {
			return set, nil
		}
	}
	return 0, fmt.Errorf("no CapBnd line in /proc/self/status")
}

func splitLines(s string) []string {
	var lines []string
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			lines = append(lines, s[start:i])
			start = i + 1
		}
	}
	return append(lines, s[start:])
}

// dropFromFile removes the missing capabilities from every capability list of the spec or process file, keeping
// every other field as it was.
func dropFromFile(file string, missing map[string]bool) error {
	if len(missing) == 0 {
		return nil
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	out, changed, err := drop(data, missing)
	if err != nil || !changed {
		return err
	}
	info, err := os.Stat(file)
	if err != nil {
		return err
	}
	return os.WriteFile(file, out, info.Mode().Perm())
}

// drop returns the spec (a config.json, or a process.json for exec) without the missing capabilities, and
// whether anything was removed.
func drop(data []byte, missing map[string]bool) ([]byte, bool, error) {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, false, err
	}
	// A config.json nests the process; a process.json is one.
	if raw, ok := doc["process"]; ok {
		var process map[string]json.RawMessage
		if err := json.Unmarshal(raw, &process); err != nil {
			return nil, false, err
		}
		changed, err := dropCapabilities(process, missing)
		if err != nil || !changed {
			return data, false, err
		}
		if doc["process"], err = json.Marshal(process); err != nil {
			return nil, false, err
		}
	} else {
		changed, err := dropCapabilities(doc, missing)
		if err != nil || !changed {
			return data, false, err
		}
	}
	out, err := json.Marshal(doc)
	return out, true, err
}

func dropCapabilities(process map[string]json.RawMessage, missing map[string]bool) (bool, error) {
	raw, ok := process["capabilities"]
	if !ok {
		return false, nil
	}
	var sets map[string][]string
	if err := json.Unmarshal(raw, &sets); err != nil {
		return false, err
	}
	changed := false
	for name, caps := range sets {
		kept := caps[:0:0]
		for _, c := range caps {
			if missing[c] {
				changed = true
				continue
			}
			kept = append(kept, c)
		}
		sets[name] = kept
	}
	if !changed {
		return false, nil
	}
	var err error
	process["capabilities"], err = json.Marshal(sets)
	return true, err
}

// capabilityNames are Linux's capabilities by bit number (linux/capability.h).
var capabilityNames = []string{
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL", "CAP_SETGID",
	"CAP_SETUID", "CAP_SETPCAP", "CAP_LINUX_IMMUTABLE", "CAP_NET_BIND_SERVICE", "CAP_NET_BROADCAST",
	"CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_IPC_LOCK", "CAP_IPC_OWNER", "CAP_SYS_MODULE", "CAP_SYS_RAWIO",
	"CAP_SYS_CHROOT", "CAP_SYS_PTRACE", "CAP_SYS_PACCT", "CAP_SYS_ADMIN", "CAP_SYS_BOOT", "CAP_SYS_NICE",
	"CAP_SYS_RESOURCE", "CAP_SYS_TIME", "CAP_SYS_TTY_CONFIG", "CAP_MKNOD", "CAP_LEASE", "CAP_AUDIT_WRITE",
	"CAP_AUDIT_CONTROL", "CAP_SETFCAP", "CAP_MAC_OVERRIDE", "CAP_MAC_ADMIN", "CAP_SYSLOG", "CAP_WAKE_ALARM",
	"CAP_BLOCK_SUSPEND", "CAP_AUDIT_READ", "CAP_PERFMON", "CAP_BPF", "CAP_CHECKPOINT_RESTORE",
}
