#!/usr/bin/env bash
# Answer the attention-backend grid with a vLLM release's own selector (run by hand, never in CI; CPU only):
#
#   scripts/oracle/backend_oracle.sh 0.34.0
#
# Uses the 0.33 oracle interpreter of setup_venv.sh ($ORACLE_VENV, default /tmp/vllm-oracle-venv). For a release
# other than the venv's own, the release's wheel is imported in front of it from $ORACLE_WORK/vllm-<version>
# (installed by `release_oracle.sh VERSION --install-only`, which this calls: atomic, no dependencies). Answers go to
# tests/data/vllm_oracle_backends/<version>/ (tests/backends/test_backend_oracle.py reads them).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
version="${1:?usage: backend_oracle.sh VERSION}"; shift
venv="${ORACLE_VENV:-${TMPDIR:-/tmp}/vllm-oracle-venv}"
work="${ORACLE_WORK:-${TMPDIR:-/tmp}/kvplan-oracle-releases}"
py="$venv/bin/python"
[ -x "$py" ] || { echo "no oracle interpreter at $venv: run scripts/oracle/setup_venv.sh first" >&2; exit 2; }
out="$root/tests/data/vllm_oracle_backends/$version"
own="$("$py" -c 'import importlib.metadata as m; print(m.version("vllm"))')"
pp=""
if [ "$own" != "$version" ]; then
  ORACLE_VENV="$venv" ORACLE_WORK="$work" "$here/release_oracle.sh" "$version" --install-only >/dev/null
  pp="$work/vllm-$version:$work/deps"
fi
rm -rf "$out"; mkdir -p "$out"
PYTHONPATH="$pp" VLLM_TARGET_DEVICE=cpu "$py" "$here/backend_oracle.py" --out "$out" "$@"
