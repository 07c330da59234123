# shellcheck shell=bash
# hack/lib/processes.sh: Processes: start, wait for and stop the local cluster's components by PID file.
# Sourced by hack/cluster.sh, whose settings (ports, directories, BINARY, COMPONENTS) and helpers (log, die,
# k) it uses.

pid_file() { printf '%s/%s.pid' "${RUN_DIR}" "$1"; }

# is_running NAME succeeds when NAME's PID file names a live (non-zombie) process running NAME's binary.
# Checking the executable guards against a recycled PID.
is_running() {
  local file pid argv argv0 state
  file="$(pid_file "$1")"
  [[ -f "${file}" ]] || return 1
  pid="$(<"${file}")"
  [[ "${pid}" =~ ^[0-9]+$ && -r "/proc/${pid}/cmdline" ]] || return 1
  # Between the PID file and the exec, the process is still the launching shell or the LAUNCHER (a script, so
  # its interpreter, and whatever it execs on the way: Kueue's runs unshare and sh), with the binary among
  # its arguments; that counts as running too.
  argv="$(tr '\0' '\n' <"/proc/${pid}/cmdline" 2>/dev/null)" || return 1
  argv0="$(basename -- "${argv%%$'\n'*}")"
  if [[ "${argv0}" != "$(basename -- "${BINARY[$1]}")" ]]; then
    [[ "${argv0}" =~ ^(bash|env|sh|unshare|$(basename -- "${LAUNCHER[$1]:-bash}"))$ ]] && grep -qxF -- "${BINARY[$1]}" <<<"${argv}" || return 1
  fi
  state="$(awk '{print $3}' "/proc/${pid}/stat" 2>/dev/null)" || return 1
  [[ "${state}" != "Z" ]]
}

# log_tail NAME prints the end of NAME's log to stderr.
log_tail() {
  printf -- '----- last lines of %s -----\n' "${LOG_DIR}/$1.log" >&2
  tail -n "${2:-30}" "${LOG_DIR}/$1.log" >&2 2>/dev/null || true
  printf -- '-----\n' >&2
}

# port_in_use PORT succeeds when something listens on TCP PORT (any address).
port_in_use() {
  [[ -n "$(ss -Hltn "sport = :$1" 2>/dev/null)" ]]
}

# require_free_ports NAME PORT... aborts when one of NAME's ports is taken by someone else.
require_free_ports() {
  local name="$1" port
  shift
  for port in "$@"; do
    if port_in_use "${port}"; then
      ss -Hltnp "sport = :${port}" >&2 || true
      die "${name}: port ${port} is already in use (override it with its KRAY_*_PORT variable)"
    fi
  done
}

# start_process NAME [VAR=value...] -- ARGS... starts NAME's binary detached in its own session, with its
# output appended to logs/NAME.log, and records the PID of the binary itself in run/NAME.pid.
start_process() {
  local name="$1" file
  shift
  local envs=()
  while [[ $# -gt 0 && "$1" != "--" ]]; do
    envs+=("$1")
    shift
  done
  shift
  file="$(pid_file "${name}")"
  rm -f "${file}"
  printf '===== %s: %s %s\n' "$(date -u +%FT%TZ)" "${BINARY[${name}]}" "$*" >>"${LOG_DIR}/${name}.log"
  # The inner shell writes its own PID, then execs the binary, so the PID file names the binary whether or
  # not setsid had to fork.
  # shellcheck disable=SC2016 # expanded by the inner shell
  # fd 9 (the state lock) is closed so the long-running process does not hold the lock.
  # A LAUNCHER entry (an executable that ends by exec'ing its arguments) runs before the binary, in the
  # same process.
  local cmd=("${BINARY[${name}]}" "$@")
  [[ -n "${LAUNCHER[${name}]:-}" ]] && cmd=("${LAUNCHER[${name}]}" "${cmd[@]}")
  setsid env "${envs[@]}" bash -c 'echo $$ >"$0.tmp" && mv "$0.tmp" "$0" && exec "$@"' \
    "${file}" "${cmd[@]}" >>"${LOG_DIR}/${name}.log" 2>&1 </dev/null 9>&- &
  local i
  for ((i = 0; i < 50; i++)); do
    [[ -f "${file}" ]] && break
    sleep 0.02
  done
  [[ -f "${file}" ]] || die "${name}: no PID file after start"
  log "${name}: started (pid $(<"${file}"))"
}

# wait_until NAME DESCRIPTION COMMAND... polls COMMAND until it succeeds. It aborts, with NAME's log tail,
# when NAME's process has died or KRAY_WAIT_TIMEOUT has passed.
wait_until() {
  local name="$1" what="$2"
  shift 2
  local deadline=$((SECONDS + WAIT_TIMEOUT))
  until "$@" >/dev/null 2>&1; do
    if ! is_running "${name}"; then
      log_tail "${name}"
      die "${name} exited while waiting for: ${what}"
    fi
    if ((SECONDS >= deadline)); then
      log_tail "${name}"
      die "${name}: timed out after ${WAIT_TIMEOUT}s waiting for: ${what}"
    fi
    sleep 0.1
  done
}

# stop_processes NAME... sends SIGTERM to those of NAME... that run, waits up to KRAY_STOP_TIMEOUT for all
# of them, sends SIGKILL to the rest, and removes their PID files. Processes without a valid PID file are
# never touched.
stop_processes() {
  local name pids=() names=()
  for name in "$@"; do
    if is_running "${name}"; then
      pids+=("$(<"$(pid_file "${name}")")")
      names+=("${name}")
      kill -TERM "${pids[-1]}" 2>/dev/null || true
    fi
  done
  local deadline=$((SECONDS + STOP_TIMEOUT)) i alive
  while true; do
    alive=0
    for i in "${!names[@]}"; do
      if is_running "${names[$i]}"; then
        alive=1
      fi
    done
    ((alive == 0)) && break
    if ((SECONDS >= deadline)); then
      for i in "${!names[@]}"; do
        if is_running "${names[$i]}"; then
          log "${names[$i]}: still running after ${STOP_TIMEOUT}s, sending SIGKILL"
          kill -KILL "${pids[$i]}" 2>/dev/null || true
        fi
      done
      deadline=$((SECONDS + 5))
    fi
    sleep 0.1
  done
  for name in "$@"; do
    rm -f "$(pid_file "${name}")"
  done
  for name in "${names[@]}"; do
    log "${name}: stopped"
  done
}
