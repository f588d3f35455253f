"""Read k/v/q scale tensors from safetensors files without loading any weights.

A safetensors file starts with an 8-byte little-endian header length N, then N bytes of JSON
mapping tensor names to {dtype, shape, data_offsets}; tensor data follows, at offsets relative
to byte 8 + N. kvplan reads the header, and the data of the scale tensors only (a few bytes each;
at most 4096 elements), so their values can be checked before launch.
"""
from __future__ import annotations

import math
import re
import struct
from pathlib import Path
from typing import Any, cast

from kvplan.errors import KvplanInputError
from kvplan.ingest.limits import InputLimitError, input_boundary, loads_json
from kvplan.model.quant import ScaleKind, ScaleTensor

_MAX_HEADER = 100 * 1024 * 1024  # the format's own limit is 100 MB

# vLLM `maybe_remap_kv_scale_name` spellings: .self_attn.{k,v}_proj.{k,v}_scale (ModelOpt),
# .self_attn.attn.{k,v,q}_scale, .mixer.{k,v}_proj (NemotronH), qkv_proj, .kv_scale (deprecated).
_SCALE_RE = re.compile(r"(?:^|\.)(k_scale|v_scale|q_scale|kv_scale|prob_scale)$")
_LAYER_RE = re.compile(r"\.(?:layers|h|blocks|block)\.(\d+)\.")


_MAX_VALUES = 4096  # per-tensor or per-head scales are tiny; anything larger is not read
_DECODE = {"F32": ("f", 4), "F64": ("d", 8), "F16": ("e", 2), "BF16": ("H", 2)}


class ByteSource:
    """One safetensors file to read byte ranges of: a local file here; kvplan.ingest.hub reads a Hub
    file through HTTP range requests with the same interface."""

    def __init__(self, path: Path):
        self.path = path
        self.name = path.name
        self.label = str(path)

    def read(self, offset: int, n: int) -> bytes:
        """Up to `n` bytes from `offset` (fewer at the end of the file)."""
        try:
            with self.path.open("rb") as f:
                f.seek(offset)
                return f.read(n)
        except OSError as e:
            raise KvplanInputError(f"cannot read {self.path}: {e.__class__.__name__}.",
                                   "Check the file permissions.") from None

    def prefetch(self, ranges: list[tuple[int, int]]) -> None:
        """Hint: these (offset, length) ranges are about to be read (a remote source batches them)."""


def read_header(path: Path) -> dict[str, Any]:
    """The JSON header of one .safetensors file; corrupt files are one clear input error."""
    return _read_header(ByteSource(path))[0]


def _read_header(src: ByteSource) -> tuple[dict[str, Any], int]:
    """(header, byte offset where tensor data starts)."""
    path = src.label
    head = src.read(0, 8)
    if len(head) < 8:
        raise KvplanInputError(f"corrupt safetensors file {path}: shorter than the 8-byte header length.",
                               "Re-download the file or remove it from the folder.")
    (n,) = struct.unpack("<Q", head)
    if n == 0 or n > _MAX_HEADER:
        raise KvplanInputError(f"corrupt safetensors header in {path}: header length {n} is not plausible.",
                               "Re-download the file or remove it from the folder.")
    raw = src.read(8, n)
    if len(raw) < n:
        raise KvplanInputError(f"corrupt safetensors header in {path}: truncated ({len(raw)} of {n} bytes).",
                               "Re-download the file (it was cut short).")
    try:
        header = loads_json(raw.decode("utf-8"), f"the safetensors header of {path}")
    except InputLimitError:
        raise
    except (UnicodeDecodeError, KvplanInputError):
        raise KvplanInputError(f"corrupt safetensors header in {path}: not valid JSON.",
                               "Re-download the file or remove it from the folder.") from None
    if not isinstance(header, dict):
        raise KvplanInputError(f"corrupt safetensors header in {path}: not a JSON object.",
                               "Re-download the file or remove it from the folder.")
    return header, 8 + n


def _scale_spec(meta: dict[str, Any], numel: int) -> tuple[str, int, list[int]] | None:
    """(struct code, element size, data_offsets) of a scale tensor kvplan reads, else None."""
    dec = _DECODE.get(str(meta.get("dtype")))
    offs = meta.get("data_offsets")
    if dec is None or numel == 0 or numel > _MAX_VALUES or not (
            isinstance(offs, list) and len(offs) == 2 and all(isinstance(o, int) for o in offs)):
        return None
    return dec[0], dec[1], offs


def _scale_values(src: ByteSource, base: int, name: str, meta: dict[str, Any],
                  numel: int) -> tuple[float | None, float | None]:
    """(min, max) of a small scale tensor's data; (None, None) when kvplan does not read it.
    min is NaN when any element is NaN. Data past the end of the file is an input error."""
    spec = _scale_spec(meta, numel)
    if spec is None:
        return None, None
    code, size, offs = spec
    path = src.label
    if offs[1] - offs[0] != numel * size or offs[0] < 0:
        raise KvplanInputError(f"corrupt safetensors header in {path}: {name} has data_offsets {offs} "
                               f"for {numel} {meta.get('dtype')} element(s).",
                               "Re-download the file.")
    raw = src.read(base + offs[0], offs[1] - offs[0])
    if len(raw) != numel * size:
        raise KvplanInputError(f"corrupt safetensors file {path}: the data of {name} lies past the end "
                               "of the file (truncated download?).", "Re-download the file.")
    vals = struct.unpack(f"<{numel}{code}", raw)
    if code == "H":  # bfloat16: the high half of an fp32
        vals = struct.unpack(f"<{numel}f", struct.pack(f"<{numel}I", *(v << 16 for v in vals)))
    if any(math.isnan(v) for v in vals):
        return math.nan, math.nan
    return float(min(vals)), float(max(vals))


@input_boundary(source_arg="folder", what="safetensors header: ", fix="Re-download the checkpoint.")
def find_scales(folder: Path) -> tuple[tuple[ScaleTensor, ...], tuple[str, ...], int]:
    """k/v/q scale tensors, files read, and total tensor bytes (the weights' size) of a folder."""
    files = sorted(p for p in folder.glob("*.safetensors") if p.is_file())
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        from kvplan.ingest.hf_config import load_json
        weight_map = load_json(index, "safetensors index").get("weight_map", {})
        if not isinstance(weight_map, dict):
            raise KvplanInputError(f"{index}: weight_map is not an object.", "Re-download the index file.")
        named = {folder / str(v) for v in weight_map.values()}
        missing = sorted(str(p.name) for p in named if not p.is_file())
        if missing:
            raise KvplanInputError(f"{index} names missing shard(s): {', '.join(missing[:3])}.",
                                   "Download every shard, or remove the index to plan from config only.")
        files = sorted(set(files) | named)
    return _scales_from_sources([ByteSource(p) for p in files])


def _numel(shape: Any) -> int | None:
    if not isinstance(shape, list) or not all(isinstance(s, int) for s in shape):
        return None
    return math.prod(shape)


@input_boundary(what="safetensors header: ", fix="Re-download the checkpoint.")
def scales_from_sources(sources: list[ByteSource]) -> tuple[tuple[ScaleTensor, ...], tuple[str, ...], int]:
    """find_scales over byte sources (local files, or Hub files read by range requests)."""
    return _scales_from_sources(sources)


def _scales_from_sources(sources: list[ByteSource]) -> tuple[tuple[ScaleTensor, ...], tuple[str, ...], int]:
    out: list[ScaleTensor] = []
    total = 0
    for src in sources:
        p = src.label
        header, base = _read_header(src)
        wanted = []
        for name, meta in header.items():
            if isinstance(meta, dict) and _SCALE_RE.search(name) and _LAYER_RE.search("." + name):
                n = _numel(meta.get("shape", []))
                spec = _scale_spec(meta, n) if n is not None else None
                if spec is not None and spec[2][1] > spec[2][0] >= 0:
                    wanted.append((base + spec[2][0], spec[2][1] - spec[2][0]))
        src.prefetch(sorted(wanted))
        for name, meta in header.items():
            if name == "__metadata__" or not isinstance(meta, dict):
                continue
            offs = meta.get("data_offsets")
            if isinstance(offs, list) and len(offs) == 2 and all(isinstance(o, int) for o in offs):
                total += max(0, offs[1] - offs[0])
            m = _SCALE_RE.search(name)
            lm = _LAYER_RE.search("." + name)
            if not m or not lm:
                continue
            shape = meta.get("shape", [])
            if not isinstance(shape, list) or not all(isinstance(s, int) for s in shape):
                raise KvplanInputError(f"corrupt safetensors header in {p}: bad shape for {name}.",
                                       "Re-download the file.")
            numel = math.prod(shape)
            vmin, vmax = _scale_values(src, base, name, meta, numel)
            kind = cast(ScaleKind, m.group(1))  # _SCALE_RE matches exactly these names
            out.append(ScaleTensor(name=name, kind=kind, layer=int(lm.group(1)),
                                   shape=tuple(shape), dtype=str(meta.get("dtype", "?")), file=src.name,
                                   vmin=vmin, vmax=vmax))
    out.sort(key=lambda s: (s.layer, s.kind, s.name))
    return tuple(out), tuple(src.name for src in sources), total
