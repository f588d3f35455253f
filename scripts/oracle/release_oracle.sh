#!/usr/bin/env bash
# Answer the corpus with another vLLM release's own code (run by hand, never in CI; CPU only):
#
#   scripts/oracle/release_oracle.sh 0.34.0 [release_corpus.py options, e.g. --cases auto fp8 --only Qwen3-8B]
#   scripts/oracle/release_oracle.sh 0.34.0 --install-only     # only install the release; prints its folder
#
# scripts/add_vllm_release.py VERSION runs this as one step of adding a release.
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
# A site is complete once it holds DONE: it is filled in a private folder and moved into place, so a run
# never imports (or installs into) a half-filled one.
if [ ! -f "$site/DONE" ]; then
  [ ! -e "$site" ] || { echo "$site exists without DONE (being filled, or an interrupted install): wait, or remove it" >&2; exit 2; }
  partial="$(mktemp -d "$work/.vllm-$version.XXXXXX")"
  "$py" -m pip install -q --no-deps --target "$partial" "vllm==$version"
  touch "$partial/DONE"
  mv -T "$partial" "$site"
fi
deps="$work/deps"
if [ ! -d "$deps/gguf" ]; then
  partial="$(mktemp -d "$work/.deps.XXXXXX")"
  "$py" -m pip install -q --no-deps --target "$partial" gguf
  [ -d "$deps/gguf" ] || mv -T "$partial" "$deps"
fi
if [ "${1:-}" = "--install-only" ]; then echo "$site"; exit 0; fi
oracle="$work/oracle-$version"
rm -rf "$oracle"; mkdir -p "$oracle"; cp "$here/vllm_oracle.py" "$oracle/"
patch_file="$here/releases/vllm_oracle-$version.patch"
minor="$(echo "$version" | cut -d. -f2)"
if [ ! -f "$patch_file" ] && [ "$minor" -lt 33 ]; then patch_file="$here/releases/vllm_oracle-pre-0.33.patch"; fi
if [ -f "$patch_file" ]; then (cd "$oracle" && patch -s -p0 < "$patch_file"); fi
PYTHONPATH="$site:$deps" VLLM_TARGET_DEVICE=cpu "$py" "$here/release_corpus.py" --oracle-dir "$oracle" \
  --out "$root/tests/data/vllm_oracle_releases/$version" "$@"
