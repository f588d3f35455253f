"""Read a `kvplan calibrate` k/v scales file (--kv-scales) into planner facts."""
from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from kvplan.errors import KvplanInputError
from kvplan.ingest.limits import InputLimitError, loads_json, read_bounded
from kvplan.model.kv_scales import KvScales
from kvplan.model.quant import QuantMetadata

FIX = "Write one with `kvplan calibrate CONFIG --kv-source smollm2|synthetic|CAPTURE.npz --out scales.json`."


def load_kv_scales(path: str | Path) -> KvScales:
    """Parse and validate a scales file; KvplanInputError (one line) when it is not one."""
    p = Path(path)
    if not p.is_file():
        raise KvplanInputError(f"--kv-scales {path}: no such file.", FIX)
    try:
        data = loads_json(read_bounded(p, "--kv-scales file").decode("utf-8"), f"--kv-scales {path}")
    except InputLimitError:
        raise
    except KvplanInputError as e:
        raise KvplanInputError(f"--kv-scales {path}: not JSON ({e.problem.rstrip('.')}).", FIX) from None
    except (OSError, UnicodeDecodeError) as e:
        raise KvplanInputError(f"--kv-scales {path}: not JSON ({e}).", FIX) from None
    if not isinstance(data, dict) or data.get("kind") != "kvplan.kv-scales":
        raise KvplanInputError(
            f'--kv-scales {path}: not a kvplan k/v scales file (no "kind": "kvplan.kv-scales").', FIX)
    try:
        scales = KvScales.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(x) for x in err["loc"]) or "(document)"
        raise KvplanInputError(f"--kv-scales {path}: {where}: {err['msg']}.", FIX) from None
    bad = [ls.index for ls in scales.layers if not (ls.k_scale > 0 and ls.v_scale > 0)]
    if bad:
        raise KvplanInputError(f"--kv-scales {path}: layer {bad[0]} has a scale <= 0 (vLLM asserts k_scale > 0).", FIX)
    return scales


def with_kv_scales(quant: QuantMetadata, path: str | Path) -> QuantMetadata:
    """The checkpoint's quant facts plus the layers a scales file calibrates."""
    scales = load_kv_scales(path)
    return quant.model_copy(update={"kv_scales_file": str(path),
                                    "calibrated_layers": tuple(sorted(ls.index for ls in scales.layers))})
