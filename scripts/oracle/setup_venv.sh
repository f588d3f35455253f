#!/usr/bin/env bash
# Build the interpreter the scripts in scripts/ run with: vLLM 0.33.0 on the CPU (about 3 GB, a few
# minutes). Run by hand, never in CI:
#
#   ORACLE_VENV=/path/to/venv scripts/oracle/setup_venv.sh       # default: ${TMPDIR:-/tmp}/vllm-oracle-venv
#
# vLLM's own dependency set cannot be installed on a CPU machine (it pins a CUDA torch and
# CUDA-only packages), so vLLM goes in with --no-deps, next to a CPU torch and the pinned
# import-time dependencies of requirements.txt. Set ORACLE_TORCH_SPEC for another torch (e.g. with
# PIP_EXTRA_INDEX_URL pointing at PyTorch's CPU index).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="${ORACLE_VENV:-${TMPDIR:-/tmp}/vllm-oracle-venv}"
torch_spec="${ORACLE_TORCH_SPEC:-torch==2.13.0}"
python="${PYTHON:-python3}"
[ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
pip=("$venv/bin/python" -m pip)
"${pip[@]}" install -q --upgrade pip
cons="$(mktemp)"; trap 'rm -f "$cons"' EXIT
printf '%s\n' "$torch_spec" "vllm==0.33.0" > "$cons"
export PIP_CONSTRAINT="$cons"   # no dependency may move torch to a CUDA build or vLLM to another release
"${pip[@]}" install -q "$torch_spec"
"${pip[@]}" install -q --no-deps "vllm==0.33.0"
"${pip[@]}" install -q -r "$here/requirements.txt" 2>&1 | grep -v "^vllm 0.33.0 requires\|dependency resolver" || true
VLLM_TARGET_DEVICE=cpu "$venv/bin/python" -c "import vllm, vllm.config, vllm.engine.arg_utils; assert vllm.__version__ == '0.33.0'; print('oracle venv ready:', '$venv')"
