"""Which config.json a launch's model means, and which GPU a node label means.

Model order: the lint config's `models` mapping (exact key, then glob keys in file order), a local
path (next to the linted file, or the working directory), the configs bundled under
kvplan/data/models keyed by Hugging Face id, then any other Hugging Face id through the Hugging
Face cache and Hub (kvplan.ingest.hub: once per id and revision per run; off with
`kvplan lint --offline` or `hub = false`). GPU: node-selector labels such as
`nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3` or `cloud.google.com/gke-accelerator: nvidia-l4`.
"""
from __future__ import annotations

import fnmatch
import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from kvplan.errors import KvplanInputError
from kvplan.lint.config import LoadedConfig, ModelEntry

BUNDLED = Path(__file__).resolve().parents[1] / "data" / "models"


@dataclass(frozen=True)
class ModelSource:
    """A model config the planner can read, and what the report calls it."""

    path: Any
    """A config.json / checkpoint folder (Path), or a resolved Hub id (kvplan.ingest.hub.HubModel,
    which `load_model_inputs` reads and whose str() is its hf://id@commit)."""
    label: str
    weight_bytes: int | None = None


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
        raise KvplanInputError(f"the lint config maps {key!r} to {e.config!r}, which is not a config.json or a folder"
                               f" holding one (looked at {p}).", f"Fix [tool.kvplan.lint.models] in {cfg.path}.")
    wb = int(e.weight_gib * 2**30) if e.weight_gib is not None else None
    return ModelSource(p, str(e.config), wb)


def hub_enabled(cfg: LoadedConfig) -> bool:
    """Hub ids resolve unless `hub = false` or `kvplan lint --offline` turned it off."""
    return cfg.config.hub and not cfg.offline


def hub_candidate(model: str, lint_file: Path | None, cfg: LoadedConfig) -> str | None:
    """The Hub id `model` would be resolved as (not mapped, not a local path, not bundled), else None."""
    try:
        src = _resolve_local(model, lint_file, cfg)
    except KvplanInputError:
        return None
    return None if src is not None else _hub_id(model)


def _hub_id(model: str) -> str | None:
    from kvplan.ingest.hub import hub_id
    try:
        return hub_id(model)
    except KvplanInputError:
        return None  # not an id: "no config.json kvplan can find"


def resolve_model(model: str, lint_file: Path | None, cfg: LoadedConfig,
                  revision: str | None = None) -> ModelSource | None:
    """The config for a served model string, or None when kvplan cannot find one.

    A Hub id that cannot be resolved (not found, gated, network down, resolution off) raises
    KvplanInputError with the reason (reported as KV804)."""
    src = _resolve_local(model, lint_file, cfg)
    if src is not None:
        return src
    repo = _hub_id(model)
    if repo is None:
        return None
    if not hub_enabled(cfg):
        why = "kvplan lint --offline" if cfg.offline else f"hub = false in {cfg.path}"
        raise KvplanInputError(f"model {model!r} is a Hugging Face id and Hub resolution is off ({why}), so its "
                               "config.json was not read and the rules that need the model were skipped.",
                               "Map the id to a config.json in [tool.kvplan.lint.models], or lint with the Hub on.")
    from kvplan.ingest.hub import resolve
    m = resolve(repo, revision)
    return ModelSource(m, f"hf:{repo}@{m.commit[:12]}")


def prefetch_hub_models(items: list[tuple[Path | None, LoadedConfig, Any]]) -> None:
    """Resolve the Hub ids that the launch sites (file, configuration, Site) name, concurrently, so
    that linting them later finds each one resolved; problems are reported when a launch is linted."""
    from kvplan.ingest.flags import parse_flags
    from kvplan.lint.engine import _argv, index_flags
    want: set[tuple[str, str | None]] = set()
    seen: dict[tuple[str, Path | None, Path | None], str | None] = {}
    for path, cfg, site in items:
        if not hub_enabled(cfg):
            continue
        try:
            uses, positionals = index_flags(site.launch.args)
            sf = parse_flags(_argv(uses, positionals))
            model, revision = sf.model, sf.revision
        except Exception:
            model, revision = None, None
        if model is None and getattr(site, "model_hint", None) is not None:
            model = site.model_hint.value
        if not model:
            continue
        key = (model, path.parent if path else None, cfg.path)
        if key not in seen:
            seen[key] = hub_candidate(model, path, cfg)
        repo = seen[key]
        if repo is not None:
            want.add((repo, revision))
    if want:
        from kvplan.ingest.hub import prefetch
        prefetch(sorted(want, key=lambda w: (w[0], w[1] or "")))


def _resolve_local(model: str, lint_file: Path | None, cfg: LoadedConfig) -> ModelSource | None:
    """Mapping, local path or bundled config, without touching the Hub."""
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


# GKE accelerator label values whose names do not say the GPU profile (cloud.google.com/gke-accelerator;
# GKE's GPU table: nvidia-tesla-a100 is the A100 40GB, nvidia-h100-mega-80gb the H100 Mega SXM,
# https://cloud.google.com/kubernetes-engine/docs/how-to/gpus).
_GKE_ACCELERATORS = {"nvidia-tesla-a100": "a100-40gb", "nvidia-h100-mega-80gb": "h100-sxm"}


def gpu_from_label(label: str) -> str | None:
    """A kvplan GPU name for a node label value, or None (unknown, or no GPU table available)."""
    try:
        from kvplan.backends.gpus import resolve_gpu
    except ImportError:  # pragma: no cover - the GPU table is optional
        return None
    s = label.strip().lower()
    s = _GKE_ACCELERATORS.get(s, s).replace("_", "-").replace(" ", "-")
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
