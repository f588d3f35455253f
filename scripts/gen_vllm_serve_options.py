"""Generate kvplan's table of `vllm serve` options from vLLM's own argument parser.

Run by hand with a Python environment that has the target vLLM installed (never in CI):

    VLLM_TARGET_DEVICE=cpu <venv>/bin/python scripts/gen_vllm_serve_options.py

It builds the parser exactly as `vllm serve` does (a top-level `FlexibleArgumentParser` named
`vllm`, a `serve` sub-parser filled by `vllm.entrypoints.common.cli_args.make_arg_parser`) and writes:

* `kvplan/data/vllm/serve_options-<version>.json`: every option (all spellings, including the hidden
  `--no-<name>` forms that `BooleanOptionalAction` registers but leaves out of `option_strings`), its
  dest, nargs, value kind, choices, and whether it is an engine, frontend or `serve` option. The
  spellings are also listed in registration order, which is the order argparse names the candidates of
  an ambiguous prefix in.
* `tests/data/vllm_serve_argv_cases-<version>.json`: what the real parser does with ~50 argv cases
  (the namespace values that differ from the defaults, or the exit-2 message), for kvplan's tests.
* `tests/data/vllm_attention_backend_enum-<version>.json`: the names of vLLM's AttentionBackendEnum,
  which a plan's per-layer `backend` must be one of.

`vllm.entrypoints.cli.serve` itself is not imported (it pulls the HTTP server stack); the sub-parser is
built the way its `subparser_init` builds it.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import enum
import io
import json
import platform
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def build_parsers() -> tuple[Any, Any]:
    from vllm.entrypoints.common.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    top = FlexibleArgumentParser(prog="vllm", description="vLLM CLI")
    top.add_argument("-v", "--version", action="version", version="0")
    sub = top.add_subparsers(required=False, dest="subparser")
    serve = sub.add_parser("serve", usage="vllm serve [model_tag] [options]")
    serve = make_arg_parser(serve)
    return top, serve


def _groups() -> tuple[set[str], set[str]]:
    """dests added by AsyncEngineArgs (engine) and FrontendArgs (frontend)."""
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.entrypoints.common.cli_args import FrontendArgs
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    eng = AsyncEngineArgs.add_cli_args(FlexibleArgumentParser())
    fe = FrontendArgs.add_cli_args(FlexibleArgumentParser())
    return ({a.dest for a in eng._actions if a.option_strings},
            {a.dest for a in fe._actions if a.option_strings})


def _inner(fn: Any) -> Any:
    """The function a vLLM type wrapper (optional_type / parse_type) calls."""
    for cell in fn.__closure__ or ():
        v = cell.cell_contents
        if callable(v):
            return _inner(v) if getattr(v, "__name__", "") in ("_parse_type", "_optional_type") else v
    return None


def value_kind(action: argparse.Action) -> dict[str, Any]:
    """How the option's values are typed: kind, argparse's type name, and the wrapper vLLM put on it."""
    from vllm.utils.argparse_utils import human_readable_int, human_readable_int_or_auto

    t = action.type
    name = getattr(t, "__name__", repr(t)) if t is not None else None
    wrapper = None
    base = t
    if name in ("_optional_type", "_parse_type"):
        wrapper = "optional" if name == "_optional_type" else "parse_type"
        base = _inner(t)
    if action.nargs == 0:
        kind = "flag"
    elif base is None or base is str:
        kind = "str"
    elif base is int:
        kind = "int"
    elif base is float:
        kind = "float"
    elif base is human_readable_int:
        kind = "human_readable_int"
    elif base is human_readable_int_or_auto:
        kind = "human_readable_int_or_auto"
    elif getattr(base, "__name__", "") in ("loads", "parse_dataclass"):
        kind = "json"
    elif getattr(base, "__name__", "") == "union_dict_and_str":
        kind = "json_or_str"
    elif getattr(base, "__name__", "") == "parse_reasoning_parser":
        kind = "str"
    elif getattr(base, "__name__", "") == "<lambda>":
        probe = base("FLASH-Attn")
        if probe == "flash_attn":
            kind = "str_lower"  # s.lower().replace('-', '_')
        elif base("2,a") == [2, "a"]:
            kind = "csv_int_or_str"  # --device-ids
        else:
            raise SystemExit(f"unclassified lambda type on {action.option_strings}")
    else:
        raise SystemExit(f"unclassified type {t!r} ({base!r}) on {action.option_strings}")
    base_name = getattr(base, "__name__", None) if base is not None else None
    # A function's repr carries its address, which changes per run (vLLM prints it too): drop it.
    type_repr = re.sub(r" at 0x[0-9a-f]+", "", repr(base)) if wrapper else None
    return {"kind": kind, "type_name": name, "type_wrapper": wrapper,
            "type_repr": type_repr, "base_type_name": base_name}


def _jsonable(v: Any) -> Any:
    if isinstance(v, enum.Enum):
        # Backend enums carry a class path as value; the CLI spelling is the name.
        return v.name if isinstance(v.value, str) and "." in v.value else _jsonable(v.value)
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, set):
        return sorted(_jsonable(x) for x in v)
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in sorted(v.items(), key=lambda kv: str(kv[0]))}
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    if dataclasses.is_dataclass(v):
        return {f.name: _jsonable(getattr(v, f.name)) for f in dataclasses.fields(v)}
    return repr(v)


def _action_name(action: argparse.Action) -> str:
    if isinstance(action, argparse.BooleanOptionalAction):
        return "boolean_optional"
    return {argparse._StoreAction: "store", argparse._StoreTrueAction: "store_true",
            argparse._StoreFalseAction: "store_false", argparse._AppendAction: "append",
            argparse._HelpAction: "help"}.get(type(action), "custom:" + type(action).__name__)


def options_table(serve: Any) -> dict[str, Any]:
    import vllm

    engine, frontend = _groups()
    by_action: dict[int, list[str]] = {}
    for s, a in serve._option_string_actions.items():
        by_action.setdefault(id(a), []).append(s)
    rows = []
    for a in serve._actions:
        if not a.option_strings:
            continue
        strings = by_action[id(a)]
        hidden = sorted(s for s in strings if s not in a.option_strings)
        negative: list[str] = []
        if a.nargs == 0 and isinstance(a, argparse.BooleanOptionalAction):
            # Which spellings set False: ask the parser itself.
            for s in strings:
                ns = serve.parse_args([s])
                if getattr(ns, a.dest) is False:
                    negative.append(s)
        kind = value_kind(a)
        # argparse names the choices in this order in its "invalid choice" message: keep it.
        choices = _jsonable(list(a.choices)) if a.choices is not None else None
        metavar_choices = a.metavar if isinstance(a.metavar, (list, tuple)) else None
        default = a.default if isinstance(a.default, (str, int, float, bool, type(None))) else None
        if isinstance(a.default, (list, tuple)) and all(isinstance(x, (str, int, float)) for x in a.default):
            default = list(a.default)
        rows.append({
            "option_strings": list(a.option_strings),
            "hidden_option_strings": hidden,
            "negative_option_strings": sorted(negative),
            "dest": a.dest,
            "action": _action_name(a),
            "nargs": a.nargs,
            "const": _jsonable(a.const) if a.nargs == "?" else None,
            **kind,
            "choices": choices,
            "metavar_choices": sorted(metavar_choices) if metavar_choices else None,
            "default": _jsonable(default),
            "group": ("serve" if a.dest == "help" else "engine" if a.dest in engine
                      else "frontend" if a.dest in frontend else "serve"),
            "deprecated": a in getattr(serve, "_deprecated", set()) or bool(getattr(a, "deprecated", False)),
        })
    rows.sort(key=lambda r: r["option_strings"][0])
    return {
        "engine": "vllm",
        "engine_version": vllm.__version__,
        "generator": "scripts/gen_vllm_serve_options.py",
        "parser": "vllm.entrypoints.common.cli_args.make_arg_parser on the `serve` sub-parser of "
                  "vllm.utils.argparse_utils.FlexibleArgumentParser (prog 'vllm serve')",
        "python": platform.python_version(),
        "prog": serve.prog,
        "allow_abbrev": serve.allow_abbrev,
        "num_options": len(rows),
        "registration_order": list(serve._option_string_actions),
        "options": rows,
    }


CASES: list[list[str]] = [
    ["m", "--kv-cache-dtype", "fp8"],
    ["m", "--kv-cache-dtype-s", "sliding_window"],
    ["m", "--max-model", "4096"],
    ["m", "--tensor-parallel", "4"],
    ["m", "-tp", "4"],
    ["m", "--gpu-memory-util", "0.8"],
    ["m", "--kv-cache-dtyp", "fp8"],
    ["m", "--kv-cache", "fp8"],
    ["m", "--kv-cache-type", "fp8"],
    ["m", "--tensor_paralel_size", "8"],
    ["m", "--kv-cache-dtype-skip-layers", "0,1"],
    ["m", "--kv-cache-dtype-skip-layers", "0", "1", "sliding_window"],
    ["m", "--kv-cache-dtype-skip-layers", "0", "--kv-cache-dtype", "fp8"],
    ["m", "--kv-cache-dtype-skip-layers"],
    ["m", "--max-model-len", "32k"],
    ["m", "--max-model-len", "1M"],
    ["m", "--max-model-len", "auto"],
    ["m", "--max-model-len", "1.5K"],
    ["m", "--max-model-len", "abc"],
    ["m", "--tensor_parallel_size", "2"],
    ["m", "--kv_cache_dtype=fp8_e5m2"],
    ["m", "--kv-cache-dtype", "fp8", "--kv-cache-dtype", "auto"],
    ["m", "--pipeline-parallel-size", "2", "-pp", "3"],
    ["m", "--dtype", "half"],
    ["m", "--dtype", "bogus"],
    ["m", "--block-size", "16"],
    ["m", "--tensor-parallel-size", "two"],
    ["m", "--gpu-memory-utilization", "abc"],
    ["m", "--kv-cache-dtype"],
    ["m", "--kv-cache-dtype", "fp9"],
    ["m", "--attention-backend", "FLASHINFER"],
    ["m", "--attention-config", '{"backend": "FLASHINFER"}'],
    ["m", "--attention-config.use_prefill_query_quantization", "true"],
    ["m", "-ac", '{"use_prefill_query_quantization": true}'],
    ["m", "--enable-prefix-caching"],
    ["m", "--no-enable-prefix-caching"],
    ["m", "--disable-prefix-caching"],
    ["m", "--enable-prefix"],
    ["m", "--enable-prefix-caching=true"],
    ["m", "--chat-template", "t.jinja", "--code-revision", "main"],
    ["m", "--media-io-kwargs", '{"video": {"num_frames": 8}}'],
    ["m", "-q", "fp8"],
    ["m", "--quantization", "fp8"],
    ["m", "--calculate-kv-scales"],
    ["--model", "m", "-tp", "2"],
    ["m", "-O3"],
    ["m", "--tokenizer-mode", "bogus"],
    ["m", "--max-num-batched-tokens", "8k"],
    ["m", "--max-num-seqs", "256"],
    ["m", "--port", "8000", "--host", "0.0.0.0"],
    ["--port", "8000", "m"],
    ["m", "extra"],
    ["m", "--trust-remote-code", "--enforce-eager", "--max-model-len=8192"],
    ["m", "--served-model-name", "a", "b"],
    ["m", "--gpu-memory-utilization", "0.95", "--swap", "4"],
    # unique among engine options, ambiguous among all serve options (frontend ones included)
    ["m", "--trust-re"],
    ["m", "--max-log", "10"],
    ["m", "--trust-rem"],
    ["m", "-tp=2"],
    ["m", "--no-enable-prefix"],
    ["m", "--kv-cache-dtype-skip-layers=0", "1"],
    ["m", "-O", "3"],
    ["m", "--compilation-config.cudagraph_capture_sizes+", "1,2"],
    ["m", "--max-model-len", "-1"],
]


def run_case(top: Any, serve: Any, argv: list[str]) -> dict[str, Any]:
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            ns = top.parse_args(["serve", *argv])
    except SystemExit as e:
        lines = [ln for ln in err.getvalue().splitlines() if ": error: " in ln]
        prog, _, msg = lines[-1].partition(": error: ") if lines else ("", "", err.getvalue().strip())
        return {"argv": argv, "exit": int(e.code or 0), "prog": prog, "error": msg}
    defaults = vars(top.parse_args(["serve"]))
    values = {}
    for k, v in sorted(vars(ns).items()):
        if k in ("dispatch_function",):
            continue
        d = defaults.get(k)
        if dataclasses.is_dataclass(v) and dataclasses.is_dataclass(d):
            diff = {f.name: _jsonable(getattr(v, f.name)) for f in dataclasses.fields(v)
                    if getattr(v, f.name) != getattr(d, f.name)}
            if diff:
                values[k] = diff
        elif v != d:
            values[k] = _jsonable(v)
    return {"argv": argv, "exit": 0, "namespace": values}


def main() -> None:
    top, serve = build_parsers()
    table = options_table(serve)
    version = table["engine_version"]
    out = ROOT / "kvplan" / "data" / "vllm" / f"serve_options-{version}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
    cases = {"engine": "vllm", "engine_version": version, "generator": table["generator"],
             "python": table["python"], "cases": [run_case(top, serve, c) for c in CASES]}
    tout = ROOT / "tests" / "data" / f"vllm_serve_argv_cases-{version}.json"
    tout.write_text(json.dumps(cases, indent=1, sort_keys=True) + "\n")
    from vllm.v1.attention.backends.registry import AttentionBackendEnum
    eout = ROOT / "tests" / "data" / f"vllm_attention_backend_enum-{version}.json"
    enum_doc = {"engine": "vllm", "engine_version": version, "generator": table["generator"],
                "source": "vllm.v1.attention.backends.registry.AttentionBackendEnum",
                "names": sorted(e.name for e in AttentionBackendEnum)}
    eout.write_text(json.dumps(enum_doc, indent=1, sort_keys=True) + "\n")
    print(f"wrote {out.relative_to(ROOT)} ({table['num_options']} options) and "
          f"{tout.relative_to(ROOT)} ({len(CASES)} cases)", file=sys.stderr)


if __name__ == "__main__":
    main()
