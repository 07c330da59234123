#!/usr/bin/env bash
# hack/tools-background.sh WATCH_PID TARGET... starts hack/tools.sh TARGET... in the background at the lowest
# CPU and I/O priority and returns at once, so that a long run (make test) builds its later stages' tools in
# the time its earlier stages leave a core idle (module downloads, links, tests waiting on a cluster).
#
# Contract:
#   - The build leaves bin/'s symlinks alone (KRAY_TOOLS_NO_LINK): a stage running meanwhile keeps the
#     binaries it started with. The stage that needs a tool runs hack/tools.sh itself, which links it.
#   - It never races a foreground build: hack/tools.sh uses each tool's wrapper under a lock, so a stage that
#     needs a tool being built here waits for it, and one this build has not reached yet is built by the stage.
#   - It stops when WATCH_PID (the caller, e.g. make) exits, and it is never a reason for the caller to fail:
#     a tool it could not build is built, or reported, by the stage that needs it.
#   - Its output goes to bin/tools-background.log.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN_DIR="${KRAY_BIN_DIR:-${ROOT}/bin}"

[[ $# -ge 2 ]] || { echo "usage: $0 WATCH_PID TARGET..." >&2; exit 2; }
watch="$1"
shift
kill -0 "${watch}" 2>/dev/null || { echo "$0: no process ${watch} to watch" >&2; exit 2; }

mkdir -p "${BIN_DIR}"
log="${BIN_DIR}/tools-background.log"
# setsid makes the build the leader of its own process group, so the watchdog stops go and its compilers too.
# It also starts a new session, and with the kernel's autogroup scheduling (sched_autogroup_enabled) a new
# session is a new CPU group that weighs as much as the caller's whole session, whatever its processes' nice
# values: only the group's own nice value (/proc/self/autogroup) puts the build below the tests' clusters.
KRAY_TOOLS_NO_LINK=1 setsid sh -c 'echo 19 >/proc/self/autogroup 2>/dev/null; exec nice -n 19 ionice -c 3 "$@"' \
  tools-background "${ROOT}/hack/tools.sh" "$@" >"${log}" 2>&1 </dev/null &
build=$!
# The watchdog outlives an interrupt of the caller's process group, to stop the build after the caller.
(
  trap '' INT HUP TERM
  while kill -0 "${watch}" 2>/dev/null && kill -0 "${build}" 2>/dev/null; do
    sleep 2
  done
  kill -TERM -- "-${build}" 2>/dev/null || true
) >/dev/null 2>&1 </dev/null &
printf '[tools] building %s in the background while process %s runs (log: %s)\n' "$*" "${watch}" \
  "${log#"${ROOT}"/}" >&2
