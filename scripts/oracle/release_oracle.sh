#!/usr/bin/env bash
# Answer the corpus with another vLLM release's own code (run by hand, never in CI; CPU only):
#
#   scripts/oracle/release_oracle.sh 0.34.0 [release_corpus.py options, e.g. --cases auto fp8 --only Qwen3-8B]
#
# Needs the 0.33 oracle interpreter of setup_venv.sh ($ORACLE_VENV, default /tmp/vllm-oracle-venv): the
# release's wheel goes, without its dependencies, into $ORACLE_WORK/vllm-<version> (pip --target, ~1 GB,
# the venv itself is not changed) and is imported in front of the venv's vLLM; older releases (0.18, 0.22) also
# import gguf at module level, installed next to it. The single-case oracle (vllm_oracle.py) is copied to
# $ORACLE_WORK/oracle-<version> and that release's harness patch (releases/README.md) applied there.
# Answers go to tests/data/vllm_oracle_releases/<version>/ (tests/planner/test_vllm_parity.py reads them).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
version="${1:?usage: release_oracle.sh VERSION [release_corpus.py options]}"; shift
venv="${ORACLE_VENV:-${TMPDIR:-/tmp}/vllm-oracle-venv}"
work="${ORACLE_WORK:-${TMPDIR:-/tmp}/kvplan-oracle-releases}"
py="$venv/bin/python"
[ -x "$py" ] || { echo "no oracle interpreter at $venv: run scripts/oracle/setup_venv.sh first" >&2; exit 2; }
mkdir -p "$work"
site="$work/vllm-$version"
if [ ! -d "$site/vllm" ]; then
  "$py" -m pip install -q --no-deps --target "$site" "vllm==$version"
fi
deps="$work/deps"
[ -d "$deps/gguf" ] || "$py" -m pip install -q --no-deps --target "$deps" gguf
oracle="$work/oracle-$version"
rm -rf "$oracle"; mkdir -p "$oracle"; cp "$here/vllm_oracle.py" "$oracle/"
patch_file="$here/releases/vllm_oracle-$version.patch"
minor="$(echo "$version" | cut -d. -f2)"
if [ ! -f "$patch_file" ] && [ "$minor" -lt 33 ]; then patch_file="$here/releases/vllm_oracle-pre-0.33.patch"; fi
if [ -f "$patch_file" ]; then (cd "$oracle" && patch -s -p0 < "$patch_file"); fi
PYTHONPATH="$site:$deps" VLLM_TARGET_DEVICE=cpu "$py" "$here/release_corpus.py" --oracle-dir "$oracle" \
  --out "$root/tests/data/vllm_oracle_releases/$version" "$@"
