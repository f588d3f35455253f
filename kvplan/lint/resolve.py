"""Which config.json a launch's model means, and which GPU a node label means.

Model order: the lint config's `models` mapping (exact key, then glob keys in file order), a local
path (next to the linted file, or the working directory), then the configs bundled under
kvplan/data/models keyed by Hugging Face id. GPU: node-selector labels such as
`nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3` or `cloud.google.com/gke-accelerator: nvidia-l4`.
"""
from __future__ import annotations

import fnmatch
import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Optional

from kvplan.errors import KvplanInputError
from kvplan.lint.config import LoadedConfig, ModelEntry

BUNDLED = Path(__file__).resolve().parents[1] / "data" / "models"


@dataclass(frozen=True)
class ModelSource:
    """A model config the planner can read, and what the report calls it."""

    path: Path
    label: str
    weight_bytes: Optional[int] = None


@lru_cache(maxsize=1)
def bundled_index() -> dict[str, dict[str, Any]]:
    """Lower-cased model id or alias -> index entry (with its canonical `id`)."""
    doc = json.loads((BUNDLED / "index.json").read_text(encoding="utf-8"))
    out: dict[str, dict[str, Any]] = {}
    for mid, entry in doc["models"].items():
        e = {**entry, "id": mid}
        for name in (mid, *entry.get("aliases", ())):
            out[name.lower()] = e
    return out


def bundled_ids() -> list[str]:
    return sorted({e["id"] for e in bundled_index().values()})


def _has_config(p: Path) -> bool:
    return (p.is_file() and p.suffix == ".json") or (p.is_dir() and (p / "config.json").is_file())


def _mapped(entry: str | ModelEntry, cfg: LoadedConfig, key: str) -> ModelSource:
    e = entry if isinstance(entry, ModelEntry) else ModelEntry(config=entry)
    p = Path(e.config).expanduser()
    p = p if p.is_absolute() else cfg.root / p
    if not _has_config(p):
        raise KvplanInputError(f"the lint config maps {key!r} to {e.config!r}, which is not a config.json or a folder holding one"
                               f" (looked at {p}).", f"Fix [tool.kvplan.lint.models] in {cfg.path}.")
    wb = int(e.weight_gib * 2**30) if e.weight_gib is not None else None
    return ModelSource(p, str(e.config), wb)


def resolve_model(model: str, lint_file: Optional[Path], cfg: LoadedConfig) -> Optional[ModelSource]:
    """The config for a served model string, or None when kvplan cannot find one."""
    models = cfg.config.models
    if model in models:
        return _mapped(models[model], cfg, model)
    for key, entry in models.items():
        if any(c in key for c in "*?[") and fnmatch.fnmatchcase(model, key):
            return _mapped(entry, cfg, key)
    p = Path(model).expanduser()
    for cand in ([p] if p.is_absolute() else [*([lint_file.parent / p] if lint_file else []), Path.cwd() / p]):
        try:
            if _has_config(cand):
                return ModelSource(cand, model)
        except OSError:
            continue
    hf_id = re.sub(r"^hf://", "", model).split(":")[0].rstrip("/")
    e = bundled_index().get(hf_id.lower())
    if e is not None:
        return ModelSource(BUNDLED / e["dir"], f"bundled:{e['id']}", e.get("weight_bytes"))
    return None


def gpu_from_label(label: str) -> Optional[str]:
    """A kvplan GPU name for a node label value, or None (unknown, or no GPU table available)."""
    try:
        from kvplan.backends.gpus import resolve_gpu  # noqa: PLC0415
    except ImportError:  # pragma: no cover - the GPU table is optional
        return None
    s = label.strip().lower().replace("_", "-").replace(" ", "-")
    s = re.sub(r"^(nvidia-|amd-instinct-|amd-)", "", s)
    parts = s.split("-")
    for n in range(len(parts), 0, -1):
        cand = "-".join(parts[:n])
        if not cand or cand.isdigit():
            continue
        try:
            return resolve_gpu(cand).name
        except KvplanInputError:
            continue
    return None
