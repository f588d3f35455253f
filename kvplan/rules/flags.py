"""Launch-line problems: flags vLLM's parser stops on (unknown, ambiguous, invalid) and removed flags.

The parsing itself lives in `kvplan.ingest.flags` (the release's own option table, `kvplan.releases`);
these rules turn what it recorded into findings that carry vLLM's wording.
"""
from __future__ import annotations

from collections.abc import Iterator

from kvplan.ingest.flags import REMOVED_FLAGS, suggest_flag
from kvplan.rules.base import Emit, Subject, declare
from kvplan.rules.context import FlagsContext

_PARSER_REF = "vllm/utils/argparse_utils.py::FlexibleArgumentParser"
_OPTIONS_REF = "kvplan/data/vllm/options/*.json, one table per release (scripts/gen_vllm_release.py)"


def _exits(message: str) -> str:
    return f'vLLM exits with "{message}"'


@declare(code="KV001", name="unknown-flag", severity="error", family="flags",
         summary="An option the release's `vllm serve` parser does not know (a typo, or a flag another release has).",
         why="vLLM's argument parser rejects unrecognized arguments and exits with status 2 before "
             "loading anything: a typo such as --kv-cache-type or --tensor_paralel_size stops the launch, and "
             "so does a flag an older release removed (--num-scheduler-steps) or a newer one added. kvplan "
             "checks every flag against the option table of the release that runs (engine and frontend "
             "options, generated from that release's own parser) and its history: a removed flag is named "
             "with the release that removed it and the successor vLLM's own deprecation text names, never "
             "a spelling neighbour.",
         fix="Use the flag's exact vLLM spelling (the message suggests the closest one, or the successor).",
         references=("vllm/engine/arg_utils.py::EngineArgs.add_cli_args", _PARSER_REF, _OPTIONS_REF))
def unknown_flag(ctx: FlagsContext) -> Iterator[Emit]:
    seen = set()
    for e in ctx.flags.flag_errors:
        if e.kind != "unknown":
            continue
        seen.add(e.flag)
        if e.added_in is not None:
            continue  # a flag a later release added: KV004
        if e.removed_in is not None:
            yield _other_release_flag(e.flag, e.message, e.removed_in, e.added_in, e.suggestion)
            continue
        what = f"unknown flag {e.flag}" if e.flag.startswith("-") else f"unexpected argument {e.flag!r}"
        hint = f"; did you mean {e.suggestion}?" if e.suggestion else "."
        yield Emit(f"{what}: {_exits(e.message)}{hint}",
                   fix=f"Replace it with {e.suggestion}." if e.suggestion else
                   ("Remove it or check `vllm serve --help=all`." if e.flag.startswith("-") else
                    "Remove it: `vllm serve` takes one positional argument, the model."),
                   subject=Subject(flag=e.flag) if e.flag.startswith("-") else Subject(argument=e.flag))
    for flag in ctx.flags.unknown_flags:  # ServingFlags built directly (library callers)
        if flag in seen:
            continue
        s = suggest_flag(flag)
        yield Emit(f"unknown flag {flag}: {_exits('unrecognized arguments: ' + flag)}"
                   + (f"; did you mean {s}?" if s else "."),
                   fix=f"Replace it with {s}." if s else "Remove it or check `vllm serve --help=all`.",
                   subject=Subject(flag=flag))


def _other_release_flag(flag: str, message: str, removed_in: str | None, added_in: str | None,
                        successor: str | None) -> Emit:
    """A flag the release lacks that another release has: when it went (and what replaced it) or came."""
    if removed_in is not None:
        if successor:
            return Emit(f"unknown flag {flag}: {_exits(message)}; it was removed in vLLM {removed_in}, whose "
                        f"deprecation note names {successor} instead.",
                        fix=f"Replace it with {successor} (check the value: the successor may take another form).",
                        subject=Subject(flag=flag))
        return Emit(f"unknown flag {flag}: {_exits(message)}; it was removed in vLLM {removed_in} (vLLM names no "
                    "successor).", fix=f"Remove it: vLLM {removed_in} and later have no such option.",
                    subject=Subject(flag=flag))
    return Emit(f"unknown flag {flag}: {_exits(message)}; vLLM {added_in} added it.",
                fix=f"Remove it, or run vLLM {added_in} or later (and lint against that release).",
                subject=Subject(flag=flag))


@declare(code="KV006", name="ambiguous-flag", severity="error", family="flags",
         summary="A flag that is a prefix of several vLLM options (e.g. --kv-cache, --kv-cache-dtyp).",
         why="vLLM's parser accepts unambiguous prefixes of its options (argparse allow_abbrev: "
             "--max-model 4096 is --max-model-len 4096), but a prefix of two or more options makes it exit "
             "with status 2 ('ambiguous option'); a prefix unique among the engine options can still be "
             "ambiguous among all `vllm serve` options.",
         fix="Spell the option out in full (the message lists the candidates).",
         references=(_PARSER_REF, _OPTIONS_REF))
def ambiguous_flag(ctx: FlagsContext) -> Iterator[Emit]:
    for e in ctx.flags.flag_errors:
        if e.kind == "ambiguous":
            hint = f"; did you mean {e.suggestion}?" if e.suggestion else "."
            yield Emit(f"ambiguous flag {e.flag}: {_exits(e.message)}{hint}",
                       fix=f"Write the full option, e.g. {e.suggestion}." if e.suggestion else
                       "Write the full option name.", subject=Subject(flag=e.flag))


@declare(code="KV007", name="flag-value-rejected", severity="error", family="flags",
         summary="A flag value vLLM's parser rejects: wrong type, not one of the choices, or missing.",
         why="vLLM's parser converts every value with the option's type (int, float, human-readable "
             "integers such as 32k, JSON) and checks its choices; a value it cannot convert, an invalid "
             "choice, a missing value or a value given to a flag that takes none makes it exit with status 2. "
             "kvplan plans without that value.",
         fix="Pass a value of the option's type (the message quotes vLLM's reason and the choices).",
         references=(_PARSER_REF, _OPTIONS_REF))
def invalid_flag_value(ctx: FlagsContext) -> Iterator[Emit]:
    for e in ctx.flags.flag_errors:
        if e.kind == "invalid_value":
            yield Emit(f"invalid value for {e.flag}: {_exits(e.message)}.", subject=Subject(flag=e.flag))


@declare(code="KV002", name="removed-flag", severity="error", family="flags",
         summary="A flag removed from vLLM before the target version (e.g. --calculate-kv-scales).",
         why="vLLM 0.33 rejects removed flags at startup. --calculate-kv-scales was removed in "
             "PR #49389; scales now come from the checkpoint, else 1.0.",
         fix="Drop the flag; use a checkpoint with calibrated k/v scales, `kvplan calibrate`, or a "
             "per-token-head KV dtype.",
         references=("https://github.com/vllm-project/vllm/pull/49389",), versions=">=0.28")
def removed_flag(ctx: FlagsContext) -> Iterator[Emit]:
    if ctx.flags.calculate_kv_scales and not ctx.engine_has("calculate_kv_scales"):
        note, _ = REMOVED_FLAGS["--calculate-kv-scales"]
        if ctx.engine.version is not None and ctx.engine.version[:2] == (0, 33):
            yield Emit(f"--calculate-kv-scales was {note}.")
        else:  # releases between the removal (0.28: the first wheel without the flag) and 0.33
            yield Emit(f"--calculate-kv-scales does not exist in vLLM {ctx.engine.version_str}: it was "
                       "removed by PR #49389 (first absent in vLLM 0.28.0); scales now come "
                       "from the checkpoint, else 1.0.")
