"""Shared by the emit / policy / service tests: the copied corpus and plan comparisons."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kvplan.model.plan import Plan
from tests.conftest import REFUSED_MODELS

ROOT = Path(__file__).resolve().parents[2]
# Copies of published configs (config + hf_quant_config; provenance: tests/data/corpus/PROVENANCE.md).
CORPUS = Path(__file__).resolve().parent / "corpus"
# (Models whose architecture vLLM 0.33 refuses are refused by kvplan too: nothing to emit.)
MODELS = sorted(p.name for p in CORPUS.iterdir() if (p / "config.json").is_file() and p.name not in REFUSED_MODELS)
SYNTHETIC_DIR = Path(__file__).resolve().parent / "synthetic"
SYNTHETIC = sorted(p.name for p in SYNTHETIC_DIR.iterdir() if (p / "config.json").is_file())
EXAMPLES = ROOT / "examples"

# What a serving stack acts on per layer; `skipped` is compared separately (a no-op skip may drop).
LAYER_FIELDS = ("index", "kind", "kv_cache_dtype", "dtype", "quant_mode", "scale_source", "num_kv_heads",
                "bytes_per_token", "max_bytes_per_request")


def per_layer(plan: Plan) -> list[tuple[Any, ...]]:
    return [tuple(getattr(lp, f) for f in LAYER_FIELDS) for lp in plan.layers]


def folder(model: str) -> Path:
    return SYNTHETIC_DIR / model if model in SYNTHETIC else CORPUS / model


def config(model: str) -> Path:
    return folder(model) / "config.json"


def load_config(model: str) -> dict[str, Any]:
    return json.loads(config(model).read_text())


def vllm_config_argv(cfg: dict[str, Any]) -> list[str]:
    """vLLM's own --config YAML -> argv conversion, restated
    (vllm/utils/argparse_utils.py::FlexibleArgumentParser.load_config_file)."""
    out: list[str] = []
    for key, value in cfg.items():
        if isinstance(value, bool):
            if value:
                out.append("--" + key)
        elif isinstance(value, list):
            if value:
                out.append("--" + key)
                out.extend(str(v) for v in value)
        elif isinstance(value, dict):
            out += ["--" + key, json.dumps(value)]
        else:
            out += ["--" + key, str(value)]
    return out
