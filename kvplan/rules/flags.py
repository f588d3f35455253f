"""Launch-line problems: unknown and removed flags."""
from __future__ import annotations

from kvplan.ingest.flags import REMOVED_FLAGS, suggest_flag
from kvplan.rules.base import Emit, declare


@declare(code="KV001", name="unknown-flag", severity="warning", family="flags",
         summary="A flag that vLLM 0.33 does not know (often a typo of a KV flag).",
         why="vLLM's argument parser rejects unknown flags at startup; a typo such as "
             "--kv-cache-type never reaches the KV cache.",
         fix="Use the flag's exact vLLM spelling (the message suggests the closest one).",
         references=("vllm/engine/arg_utils.py::EngineArgs.add_cli_args",))
def unknown_flag(ctx):
    for flag in ctx.flags.unknown_flags:
        s = suggest_flag(flag)
        yield Emit(f"unknown flag {flag}" + (f"; did you mean {s}?" if s else "."),
                   fix=f"Replace it with {s}." if s else "Remove it or check `vllm serve --help`.")


@declare(code="KV002", name="removed-flag", severity="error", family="flags",
         summary="A flag removed from vLLM before the target version (e.g. --calculate-kv-scales).",
         why="vLLM 0.33 rejects removed flags at startup. --calculate-kv-scales was removed in "
             "PR #49389; scales now come from the checkpoint, else 1.0.",
         fix="Drop the flag; use a checkpoint with calibrated k/v scales, `kvplan calibrate`, or a "
             "per-token-head KV dtype.",
         references=("https://github.com/vllm-project/vllm/pull/49389",), versions=">=0.27")
def removed_flag(ctx):
    if ctx.flags.calculate_kv_scales and not ctx.engine_has("calculate_kv_scales"):
        note, _ = REMOVED_FLAGS["--calculate-kv-scales"]
        if ctx.engine.version is not None and ctx.engine.version[:2] == (0, 33):
            yield Emit(f"--calculate-kv-scales was {note}.")
        else:  # releases between the removal (0.27 by kvplan's mapping) and 0.33
            yield Emit(f"--calculate-kv-scales does not exist in vLLM {ctx.engine.version_str}: it was "
                       "removed by PR #49389 (first absent in 0.27 by kvplan's mapping); scales now come "
                       "from the checkpoint, else 1.0.")
