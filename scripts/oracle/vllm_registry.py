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
    find the architecture of a config.json that has no `architectures` list.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "kvplan" / "data" / "vllm_architectures.json"


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
    }
    OUT.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    print(f"wrote {OUT.relative_to(ROOT)}: {doc['counts']}, {len(refused)} refused", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
