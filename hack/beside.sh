#!/usr/bin/env bash
# hack/beside.sh TARGET -- COMMAND... runs `make TARGET` in the background while COMMAND runs in the
# foreground, so that a stage that mostly waits (the kind suite waits on real kubelets and Ray's timeouts) uses
# the CPU the other stages leave idle.
#
# Contract:
#   - TARGET's output goes to bin/TARGET.log, and is printed whole, between two marked lines, once it ends.
#   - It succeeds only when both succeed. When COMMAND fails, TARGET is stopped (its process group), so a
#     failed run ends as soon as its own stages do.
#   - An interrupt or termination stops TARGET too: nothing is left running.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN_DIR="${KRAY_BIN_DIR:-${ROOT}/bin}"

[[ $# -ge 3 && "$2" == "--" ]] || { echo "usage: $0 TARGET -- COMMAND..." >&2; exit 2; }
target="$1"
shift 2

mkdir -p "${BIN_DIR}"
log="${BIN_DIR}/${target}.log"
start="$(date +%s)"
# setsid makes TARGET the leader of its own process group, so stopping it stops its children too.
setsid make --no-print-directory -C "${ROOT}" "${target}" >"${log}" 2>&1 </dev/null &
bg=$!
printf '[beside] make %s runs in the background (pid %s, log: %s)\n' "${target}" "${bg}" "${log#"${ROOT}"/}" >&2

stop_bg() {
  kill -0 "${bg}" 2>/dev/null || return 0
  kill -TERM -- "-${bg}" 2>/dev/null || true
  wait "${bg}" 2>/dev/null || true
}
trap 'stop_bg; exit 130' INT
trap 'stop_bg; exit 143' TERM

fg=0
"$@" || fg=$?
if ((fg != 0)); then
  printf '[beside] the foreground stages failed (exit %d): stopping make %s\n' "${fg}" "${target}" >&2
  stop_bg
  printf '[beside] ===== make %s (stopped) =====\n' "${target}" >&2
  cat "${log}" >&2
  exit "${fg}"
fi
printf '[beside] the foreground stages passed; waiting for make %s\n' "${target}" >&2
rc=0
wait "${bg}" || rc=$?
printf '[beside] ===== make %s: exit %d after %d s =====\n' "${target}" "${rc}" "$(($(date +%s) - start))" >&2
cat "${log}" >&2
printf '[beside] ===== end of make %s =====\n' "${target}" >&2
exit "${rc}"
