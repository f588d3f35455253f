"""Shared fixtures: repository paths and the corpus/flag matrix used across tests."""
from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
CORPUS = DATA / "corpus"
ORACLE = DATA / "vllm_oracle"
GOLDEN = ROOT / "tests" / "golden"
EXAMPLES = ROOT / "examples"

# The standard flag matrix (the same six cases the vLLM oracle answered).
CASES: dict[str, list[str]] = {
    "auto": ["--kv-cache-dtype", "auto"],
    "fp8": ["--kv-cache-dtype", "fp8"],
    "fp8-skip-sw": ["--kv-cache-dtype", "fp8", "--kv-cache-dtype-skip-layers", "sliding_window"],
    "fp8-skip-0-2": ["--kv-cache-dtype", "fp8", "--kv-cache-dtype-skip-layers", "0", "2"],
    "int8pth": ["--kv-cache-dtype", "int8_per_token_head"],
    "bf16": ["--kv-cache-dtype", "bfloat16"],
}
MODELS = sorted(p.name for p in CORPUS.iterdir() if (p / "config.json").is_file())


@pytest.fixture
def corpus() -> Path:
    return CORPUS
