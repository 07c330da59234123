# shellcheck shell=bash
# hack/lib/slowest.sh: print_slowest FILE [N] prints the N (default 15) slowest top-level tests of the
# `go test -v` output in FILE, slowest first, so every run shows where its time goes.
print_slowest() {
  local file="$1" n="${2:-15}"
  [[ -s "${file}" ]] || return 0
  printf '\n===== the %d slowest tests =====\n' "${n}"
  # awk reads to the end: `head` would close the pipe early and, under pipefail, fail the run with sort's SIGPIPE.
  sed -nE 's/^--- (PASS|FAIL|SKIP): ([^ ]+) \(([0-9.]+)s\)$/\3 \1 \2/p' "${file}" | sort -rn |
    awk -v n="${n}" 'NR <= n { printf "%8.1f s  %s  %s\n", $1, $2, $3 }'
}
