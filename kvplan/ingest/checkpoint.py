"""A config.json path or a checkpoint folder -> (ModelArch, QuantMetadata)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from kvplan.errors import KvplanInputError
from kvplan.ingest.hf_config import load_json, parse_hf_config
from kvplan.ingest.quant import load_hf_quant_config, parse_quant_metadata
from kvplan.ingest.safetensors import find_scales
from kvplan.model.arch import ModelArch
from kvplan.model.quant import QuantMetadata


@dataclass(frozen=True)
class ModelInputs:
    """Everything read from disk about one model."""

    arch: ModelArch
    quant: QuantMetadata
    config_path: Path
    raw_config: dict[str, Any]
    weight_bytes: Optional[int] = None


def load_model_inputs(path: str | Path, quantization_flag: Optional[str] = None,
                      read_safetensors: bool = True) -> ModelInputs:
    """Read config.json (+ hf_quant_config.json, + safetensors headers for a folder)."""
    p = Path(path)
    if not p.exists():
        raise KvplanInputError(f"path not found: {p}.",
                               "Pass a config.json file or a checkpoint folder that contains one.")
    if p.is_dir():
        folder, cfg_path = p, p / "config.json"
        if not cfg_path.is_file():
            raise KvplanInputError(f"no config.json in folder {p}.",
                                   "Pass the checkpoint folder that holds config.json, or the file itself.")
    else:
        folder, cfg_path = p.parent, p
    raw = load_json(cfg_path, "config")
    arch = parse_hf_config(raw, cfg_path)
    hq = load_hf_quant_config(folder)
    scales, files, weight_bytes = (), (), None
    if read_safetensors and (p.is_dir() or any(folder.glob("*.safetensors"))):
        scales, files, weight_bytes = find_scales(folder)
    quant = parse_quant_metadata(raw, hq, scales, files, quantization_flag)
    return ModelInputs(arch=arch, quant=quant, config_path=cfg_path, raw_config=raw,
                       weight_bytes=weight_bytes or None)
