"""Shared fixtures: repository paths and the corpus/flag matrix used across tests."""
from __future__ import annotations

import atexit
import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

# The Triton kernels run on the CPU through Triton's interpreter when the machine has no NVIDIA
# GPU, so a plain `pytest` (the README's test command, CI) runs them. It must be set before
# triton is first imported; set TRITON_INTERPRET=0 explicitly to skip them instead.
if "TRITON_INTERPRET" not in os.environ and not (os.path.exists("/dev/nvidiactl") or shutil.which("nvidia-smi")):
    os.environ["TRITON_INTERPRET"] = "1"

# No test reaches the real Hugging Face Hub or reads the developer's cache or token: Hub ids
# resolve offline against an empty cache, unless a test serves repos with tests/hubserver.py
# (the `fake_hub` fixture in tests/hubserver.py). Set before huggingface_hub is imported.
os.environ["HF_HOME"] = tempfile.mkdtemp(prefix="kvplan-tests-hf-")
atexit.register(shutil.rmtree, os.environ["HF_HOME"], ignore_errors=True)
os.environ.pop("HF_HUB_CACHE", None)
os.environ.pop("HF_TOKEN", None)
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_ENDPOINT"] = "http://127.0.0.1:9"  # the discard port: refused at once
os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
CORPUS = DATA / "corpus"
ORACLE = DATA / "vllm_oracle"
GOLDEN = ROOT / "tests" / "golden"
EXAMPLES = ROOT / "examples"
ARCH_CONFIGS = DATA / "vllm_oracle_arch" / "configs"


def arch_config(tmp_path: Path, name: str, **over: object) -> Path:
    """An oracle architecture config (tests/data/vllm_oracle_arch/configs/<name>.json) written to
    tmp_path with keys replaced (a None value removes the key)."""
    cfg = json.loads((ARCH_CONFIGS / f"{name}.json").read_text())
    for k, v in over.items():
        if v is None:
            cfg.pop(k, None)
        else:
            cfg[k] = v
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    return p

# The standard flag matrix (the same six cases the vLLM oracle answered).
CASES: dict[str, list[str]] = {
    "auto": ["--kv-cache-dtype", "auto"],
    "fp8": ["--kv-cache-dtype", "fp8"],
    "fp8-skip-sw": ["--kv-cache-dtype", "fp8", "--kv-cache-dtype-skip-layers", "sliding_window"],
    "fp8-skip-0-2": ["--kv-cache-dtype", "fp8", "--kv-cache-dtype-skip-layers", "0", "2"],
    "int8pth": ["--kv-cache-dtype", "int8_per_token_head"],
    "bf16": ["--kv-cache-dtype", "bfloat16"],
}


def _vllm_refuses(model: str) -> bool:
    """The corpus model's architecture is one vLLM 0.33 refuses (kvplan/data/vllm_arch_coverage.json)."""
    import json

    arch = (json.loads((CORPUS / model / "config.json").read_text()).get("architectures") or [""])[0]
    cov = json.loads((ROOT / "kvplan" / "data" / "vllm_arch_coverage.json").read_text())
    return bool(cov["architectures"].get(arch, {}).get("status") == "refused, as vLLM refuses it")


_CORPUS_MODELS = sorted(p.name for p in CORPUS.iterdir() if (p / "config.json").is_file())
# Corpus models kvplan plans; the ones whose architecture vLLM 0.33 refuses are refused by kvplan too.
MODELS = [m for m in _CORPUS_MODELS if not _vllm_refuses(m)]
REFUSED_MODELS = [m for m in _CORPUS_MODELS if _vllm_refuses(m)]


@pytest.fixture
def corpus() -> Path:
    return CORPUS


def pytest_report_header(config: pytest.Config) -> str:
    mode = os.environ.get("TRITON_INTERPRET", "0")
    return ("triton kernels: CPU interpreter (TRITON_INTERPRET=1)" if mode not in ("", "0")
            else "triton kernels: CUDA when available, else skipped")
