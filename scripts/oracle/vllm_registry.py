#!/usr/bin/env python3
"""Write kvplan/data/vllm_architectures.json from the installed vLLM's model registry.

Run by hand with an interpreter that has vLLM 0.33.0 installed (never in CI):

    VLLM_TARGET_DEVICE=cpu <venv>/bin/python scripts/oracle/vllm_registry.py

It reads, from vLLM's own `vllm.model_executor.models.registry` module:
  * the text-generation architectures and the multimodal architectures (architecture -> vLLM
    module and class), which are the ones whose language models hold a KV cache;
  * the architectures vLLM refuses (no longer supported since a given version, or moved out of
    tree to a plugin), with the reason vLLM prints;
  * for each architecture, the model_type(s) whose transformers or vLLM config class names it
    (transformers' auto-model name tables and vLLM's own config registry), so that kvplan can
    find the architecture of a config.json that has no `architectures` list;
  * `config_defaults`: for every such model_type (and the text model types of multimodal ones, and
    the model_type of every config class vLLM ships, registered or not: a sub-config's class),
    the defaults its config class declares for the layer-geometry keys kvplan reads (constructor
    signature defaults; a None default means "derived" and is left out). With them kvplan plans a
    config that omits a key without importing transformers.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "kvplan" / "data" / "vllm_architectures.json"


def vcfg_types() -> list[str]:
    from vllm.transformers_utils import config as vcfg

    return list(vcfg._CONFIG_REGISTRY)


def _transformers_arch_to_types() -> dict[str, list[str]]:
    from transformers.models.auto import modeling_auto

    inv: dict[str, set[str]] = {}
    for name in dir(modeling_auto):
        if not (name.startswith("MODEL") and name.endswith("_MAPPING_NAMES")):
            continue
        for mt, cls in getattr(modeling_auto, name).items():
            for c in (cls if isinstance(cls, (list, tuple)) else [cls]):
                inv.setdefault(c, set()).add(mt)
    return {k: sorted(v) for k, v in inv.items()}


DEFAULT_KEYS = (
    "num_hidden_layers", "num_layers", "n_layer", "n_layers", "num_decoder_layers", "decoder_layers",
    "num_attention_heads", "num_heads", "n_head", "n_heads", "decoder_attention_heads",
    "num_key_value_heads", "head_dim", "d_kv", "hidden_size", "d_model", "n_embd", "dim",
    "sliding_window", "sliding_window_pattern", "max_position_embeddings", "n_positions",
    "attention_chunk_size", "no_rope_layer_interval", "global_head_dim", "num_global_key_value_heads",
    "kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim", "index_head_dim",
    "index_topk", "attn_layer_period", "attn_layer_offset", "use_sliding_window", "max_window_layers",
    "attention_head_dim", "hybrid_override_pattern", "full_attention_interval", "num_kv_shared_layers",
    "max_source_positions",
)


def _vllm_config_class(mt: str):
    """The config class vLLM ships for a model_type (its registry names them lazily)."""
    import importlib

    from vllm.transformers_utils import config as vcfg

    cls = vcfg._CONFIG_REGISTRY.get(mt)
    if isinstance(cls, str):
        try:
            cls = getattr(importlib.import_module("vllm.transformers_utils.configs"), cls)
        except Exception:
            return None
    return cls


def _shipped_config_classes() -> dict:
    """model_type -> the config class vLLM ships for it (vllm.transformers_utils.configs' exports), registered
    or not: a sub-config's class such as MiniMaxM3TextConfig, the text_config class of minimax_m3_vl, is the
    one that reads minimax_m3_text text configs."""
    import importlib

    mod = importlib.import_module("vllm.transformers_utils.configs")
    out = {}
    for name in getattr(mod, "__all__", []):
        try:
            cls = getattr(mod, name)
        except Exception:
            continue
        mt = getattr(cls, "model_type", None)
        if isinstance(mt, str) and mt:
            out.setdefault(mt, cls)
    return out


SECTION_KEYS = ("sparse_attention_config",)
"""Geometry sections whose signature default is None and that the constructor fills in (vLLM 0.33's
MiniMaxM3TextConfig: the default sparse-attention section); read from an instance built without arguments."""


def _signature_defaults(cls) -> dict:
    import inspect

    out = {}
    try:
        params = inspect.signature(cls.__init__).parameters
    except (TypeError, ValueError):
        return out
    for k in DEFAULT_KEYS:
        p = params.get(k)
        if p is None or p.default is inspect.Parameter.empty or p.default is None:
            continue
        if isinstance(p.default, (bool, int, float, str)):
            out[k] = p.default
    sections = [k for k in SECTION_KEYS if k in params and params[k].default is None]
    if sections:
        try:
            made = cls()
        except Exception:
            return out
        out |= {k: v for k in sections if isinstance(v := getattr(made, k, None), dict)}
    return out


def _config_defaults(model_types: set[str]) -> dict[str, dict]:
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    out: dict[str, dict] = {}
    todo = sorted(model_types)
    seen: set[str] = set()
    while todo:
        mt = todo.pop()
        if mt in seen:
            continue
        seen.add(mt)
        cls = _vllm_config_class(mt)
        if cls is None:
            cls = CONFIG_MAPPING[mt] if mt in CONFIG_MAPPING else None  # noqa: SIM401 (lazy mapping: .get skips loading)
        if cls is None:  # neither registered nor transformers': a sub-config class vLLM ships
            cls = _shipped_config_classes().get(mt)
        if cls is None:
            continue
        out[mt] = _signature_defaults(cls)
        for sub in (getattr(cls, "sub_configs", None) or {}).values():
            st = getattr(sub, "model_type", None)
            if isinstance(st, str) and st and st not in seen:
                todo.append(st)
    return dict(sorted(out.items()))


def main() -> int:
    import transformers
    import vllm
    from vllm.model_executor.models import registry as reg

    t2m = _transformers_arch_to_types()
    archs: dict[str, dict] = {}
    for group, table in (("text", reg._TEXT_GENERATION_MODELS),
                         ("multimodal", reg._MULTIMODAL_MODELS)):
        for arch, (module, cls) in table.items():
            archs[arch] = {
                "category": group,
                "vllm_module": module if "." in module else f"vllm.model_executor.models.{module}",
                "vllm_class": cls,
                "transformers_model_types": t2m.get(arch, []),
            }
    refused: dict[str, dict] = {}
    for arch, version in reg._PREVIOUSLY_SUPPORTED_MODELS.items():
        refused[arch] = {
            "reason": (f"Model architecture {arch} was supported in vLLM until v{version}, and is "
                       "not supported anymore."),
            "transformers_model_types": t2m.get(arch, []),
        }
    for arch, url in reg._OOT_SUPPORTED_MODELS.items():
        refused[arch] = {
            "reason": (f"Model architecture {arch} is not supported in-tree anymore (vLLM plugin: "
                       f"{url})."),
            "transformers_model_types": t2m.get(arch, []),
        }
    other = sorted(a for a in reg._VLLM_MODELS if a not in archs)
    types = {t for a in (*archs.values(), *refused.values()) for t in a["transformers_model_types"]}
    types |= set(vcfg_types()) | set(_shipped_config_classes())
    doc = {
        "kind": "kvplan.vllm_architectures",
        "vllm_version": vllm.__version__,
        "transformers_version": transformers.__version__,
        "generated_by": "scripts/oracle/vllm_registry.py",
        "counts": {"text": sum(1 for a in archs.values() if a["category"] == "text"),
                   "multimodal": sum(1 for a in archs.values() if a["category"] == "multimodal")},
        "architectures": dict(sorted(archs.items())),
        "refused": dict(sorted(refused.items())),
        "other_registered": other,
        "config_defaults": _config_defaults(types),
    }
    OUT.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    print(f"wrote {OUT.relative_to(ROOT)}: {doc['counts']}, {len(refused)} refused", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
