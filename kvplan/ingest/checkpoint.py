"""A config.json path, a checkpoint folder, a Hugging Face model id or an inline config.json object
-> ModelInputs (ModelArch, QuantMetadata, where they came from)."""
from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kvplan.errors import KvplanInputError
from kvplan.ingest.hf_config import load_json, parse_hf_config
from kvplan.ingest.mistral_params import PARAMS, config_file, hf_config_from_params
from kvplan.ingest.quant import load_hf_quant_config, parse_quant_metadata
from kvplan.ingest.safetensors import find_scales, scales_from_sources
from kvplan.model.arch import ModelArch
from kvplan.model.flags import ServingFlags
from kvplan.model.plan import HubSource
from kvplan.model.quant import QuantMetadata, ScaleTensor

if TYPE_CHECKING:
    from kvplan.ingest.hub import HubModel


@dataclass(frozen=True)
class ModelInputs:
    """Everything read about one model."""

    arch: ModelArch
    quant: QuantMetadata
    config_path: Path
    raw_config: dict[str, Any]
    weight_bytes: int | None = None
    hub: HubSource | None = None
    """Where a Hub id's files came from (repo, commit, files read); None for a local path."""
    source: str | None = None
    """What the plan calls the model: the path as given, or the Hub id."""


# Sub-configs transformers builds as nested config objects: vLLM merges a dict override into them
# key by key; any other dict-valued key (rope_scaling, quantization_config, ...) is replaced whole.
_NESTED_CONFIGS = frozenset({"text_config", "vision_config", "audio_config", "language_config", "llm_config",
                             "thinker_config", "talker_config", "decoder", "encoder"})


def apply_hf_overrides(config: dict[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """config.json with vLLM's --hf-overrides applied (vllm ModelConfig: flat keys via
    `config.update`, dict values merged recursively into nested sub-configs, else set whole)."""
    if not overrides:
        return config
    out = copy.deepcopy(config)

    def merge(target: dict[str, Any], updates: Mapping[str, Any]) -> None:
        for k, v in updates.items():
            if isinstance(v, dict) and isinstance(target.get(k), dict):
                merge(target[k], v)
            else:
                target[k] = copy.deepcopy(v)

    for key, value in overrides.items():
        cur = out.get(key)
        if isinstance(value, dict) and isinstance(cur, dict) and (key in _NESTED_CONFIGS or "model_type" in cur):
            merge(cur, value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def load_model_inputs(path: str | Path | HubModel, quantization_flag: str | None = None,
                      read_safetensors: bool = True, *, revision: str | None = None,
                      hf_overrides: Mapping[str, Any] | None = None,
                      offline: bool | None = None, release: str | None = None) -> ModelInputs:
    """Read config.json (+ hf_quant_config.json, + safetensors headers for a folder).

    `path` is a config.json, a checkpoint folder, or (when no such path exists) a Hugging Face
    model id resolved at `revision` through kvplan.ingest.hub (headers and scales by range
    requests, never the weights). `hf_overrides` is vLLM's --hf-overrides, applied to config.json
    before anything is read from it. `release`: the vLLM release planned (None: the default), whose tables
    decide whether it can load the config at all.
    """
    if not isinstance(path, (str, Path)):
        return _load_hub(path, quantization_flag, read_safetensors, hf_overrides, release)
    p = Path(path)
    if not p.exists():
        from kvplan.ingest.hub import hub_id
        repo = hub_id(str(path)) if isinstance(path, str) else None
        if repo is not None:
            from kvplan.ingest.hub import resolve
            return _load_hub(resolve(repo, revision, offline=offline), quantization_flag, read_safetensors,
                             hf_overrides, release)
        raise KvplanInputError(f"path not found: {p}.",
                               "Pass a config.json file, a checkpoint folder that contains one, "
                               "or a Hugging Face model id (org/name).")
    if p.is_dir():
        folder, cfg_path = p, config_file(p)
        if not cfg_path.is_file():
            raise KvplanInputError(f"no config.json (or Mistral-format {PARAMS}) in folder {p}.",
                                   "Pass the checkpoint folder that holds config.json, or the file itself.")
    else:
        folder, cfg_path = p.parent, p
    raw, arch = _read_config(cfg_path, hf_overrides, release)
    hq = load_hf_quant_config(folder)
    scales: tuple[ScaleTensor, ...] = ()
    files: tuple[str, ...] = ()
    weight_bytes: int | None = None
    if read_safetensors and (p.is_dir() or any(folder.glob("*.safetensors"))):
        scales, files, weight_bytes = find_scales(folder)
    quant = parse_quant_metadata(raw, hq, scales, files, quantization_flag)
    return ModelInputs(arch=arch, quant=quant, config_path=cfg_path, raw_config=raw,
                       weight_bytes=weight_bytes or None, source=str(path))


def _read_config(cfg_path: Path, hf_overrides: Mapping[str, Any] | None,
                 release: str | None = None) -> tuple[dict[str, Any], ModelArch]:
    """config.json, or a Mistral-format params.json as vLLM converts it; --hf-overrides applied after."""
    loaded = load_json(cfg_path, "config")
    mistral = cfg_path.name == PARAMS
    if mistral:
        hf_path = cfg_path.parent / "config.json"
        loaded = hf_config_from_params(loaded, cfg_path, load_json(hf_path, "config") if hf_path.is_file() else None)
    raw = apply_hf_overrides(loaded, hf_overrides or {})
    arch = parse_hf_config(raw, cfg_path, release)
    if mistral:
        arch = arch.model_copy(update={"notes": (*arch.notes, f"Mistral-format {PARAMS} read as vLLM's Mistral "
                                                               "config parser converts it")})
    return raw, arch


def _load_hub(m: HubModel, quantization_flag: str | None, read_safetensors: bool,
              hf_overrides: Mapping[str, Any] | None, release: str | None = None) -> ModelInputs:
    """The same reading as for a local checkpoint folder, from the cache and range requests."""
    # vLLM's --config-format auto: params.json when the repository has consolidated*.safetensors.
    mistral = PARAMS in m.small_files and ("config.json" not in m.small_files
                                           or any(n.startswith("consolidated") for n in m.safetensors))
    cfg_path = m.folder / (PARAMS if mistral else "config.json")
    raw, arch = _read_config(cfg_path, hf_overrides, release)
    hq = load_hf_quant_config(m.folder)
    scales: tuple[ScaleTensor, ...] = ()
    files: tuple[str, ...] = ()
    weight_bytes: int | None = None
    if read_safetensors and m.safetensors:
        scales, files, weight_bytes = scales_from_sources(m.sources())
    quant = parse_quant_metadata(raw, hq, scales, files, quantization_flag)
    hub = HubSource(repo_id=m.repo_id, revision=m.revision, commit=m.commit,
                    files=m.files_read(read_safetensors))
    return ModelInputs(arch=arch, quant=quant, config_path=cfg_path, raw_config=raw,
                       weight_bytes=weight_bytes or None, hub=hub, source=m.repo_id)


def model_inputs(source: str | Path | Mapping[str, Any], flags: ServingFlags | None = None, *,
                 hf_quant_config: Mapping[str, Any] | None = None, read_safetensors: bool = True,
                 offline: bool | None = None, label: str | None = None, release: str | None = None) -> ModelInputs:
    """What the planner needs about one model, from any source `kvplan.compile` takes.

    `source` is a config.json path, a checkpoint folder, a Hugging Face id, or a config.json object
    (with `hf_quant_config`, the hf_quant_config.json object, beside it). `flags` supplies
    --quantization, --revision and --hf-overrides. `label` is what the plan calls the model
    (default: the path as given, the Hub id, or nothing for an inline object). `release`: the vLLM release
    planned (None: the default).
    """
    sf = flags if flags is not None else ServingFlags()
    if isinstance(source, Mapping):
        return _inline_inputs(source, hf_quant_config, sf, label, release)
    if hf_quant_config is not None:
        raise KvplanInputError("hf_quant_config is only taken with an inline config object.",
                               "Put hf_quant_config.json next to config.json instead.")
    mi = load_model_inputs(source, quantization_flag=sf.quantization, read_safetensors=read_safetensors,
                           revision=sf.revision, hf_overrides=sf.hf_overrides, offline=offline,
                           release=release)
    return replace(mi, source=label or mi.source or str(source))


def _inline_inputs(config: Mapping[str, Any], hf_quant_config: Any, flags: ServingFlags,
                   label: str | None, release: str | None = None) -> ModelInputs:
    where = label or "<request>"
    if hf_quant_config is not None and not isinstance(hf_quant_config, Mapping):
        raise KvplanInputError(f"{where}: hf_quant_config must be a JSON object.",
                               "Pass the hf_quant_config.json object, or leave it out.")
    raw = apply_hf_overrides(dict(config), flags.hf_overrides)
    arch = parse_hf_config(raw, Path(where), release)
    hq = dict(hf_quant_config) if hf_quant_config is not None else None
    quant = parse_quant_metadata(raw, hq, quantization_flag=flags.quantization)
    return ModelInputs(arch=arch, quant=quant, config_path=Path(where), raw_config=raw, source=label)
