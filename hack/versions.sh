# shellcheck shell=bash
# hack/versions.sh is sourced by the hack scripts: it sets each KEY=value of hack/versions.env as a shell
# variable, unless the environment already sets it, so a one-off version bump needs no edit.
# Requires ROOT (the repository root) to be set by the caller.
while IFS='=' read -r key value; do
  [[ -z "${key}" || "${key}" == \#* ]] && continue
  if [[ -z "${!key:-}" ]]; then
    printf -v "${key}" '%s' "${value}"
  fi
done <"${ROOT}/hack/versions.env"
