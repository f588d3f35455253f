"""Read one vLLM release's facts from its own code; prints one JSON document on stdout.

Run by scripts/gen_vllm_release.py (never by hand, never in CI) with an interpreter that has torch on
the CPU, and `PYTHONPATH` pointing at the release's unpacked wheel (its `vllm/` Python files):

    VLLM_TARGET_DEVICE=cpu python scripts/vllm_release/extract.py [--stub torch,transformers]

What it reads, all from the release's own modules:

* the `vllm serve` parser, built by the release's own code: `ServeSubcommand.subparser_init`
  (`vllm/entrypoints/cli/serve.py`, 0.8 on), else what `vllm/scripts.py::main` did (0.6, 0.7: a
  `serve` sub-parser with `model_tag` and `--config`, then `make_arg_parser`). Every option: all
  spellings (the hidden `--no-`/`--disable-` forms `BooleanOptionalAction` registers), dest, nargs,
  value kind, choices, default, help of deprecated options, and the registration order;
* quantization methods (`vllm/model_executor/layers/quantization/__init__.py::QUANTIZATION_METHODS`);
* the model registry (`_*_MODELS` tables of `vllm/model_executor/models/registry.py`, or of
  `models/__init__.py` before it) and `_PREVIOUSLY_SUPPORTED_MODELS`;
* attention backend names (`AttentionBackendEnum`, or `_Backend` in older releases);
* the config defaults that feed a plan (`CacheConfig`, `SchedulerConfig`, `EngineArgs` fields).

A third-party module the release imports but this interpreter lacks (or names it lacks, e.g. a
transformers class renamed since) is replaced by an inert stub, and so are vLLM's compiled
extensions; the stubs are listed in the output (`stubbed_modules`). They never define an option:
every option row comes from the release's own `add_argument` calls. `--stub a,b` stubs modules even
where they exist, which is how the generator checks that stubbing does not change the table.
"""
from __future__ import annotations

import argparse
import builtins
import contextlib
import dataclasses
import enum
import importlib
import importlib.abc
import importlib.machinery
import io
import json
import os
import re
import sys
import types
from typing import Any

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
os.environ.setdefault("VLLM_CONFIGURE_LOGGING", "0")

STUBBED: set[str] = set()
FORCED: set[str] = set()


# ----------------------------------------------------------------------------- stubs
class _StubMeta(type):
    def __getattr__(cls, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _stub_class(name)

    def __getitem__(cls, item: Any) -> Any:
        return cls

    def __or__(cls, other: Any) -> Any:
        return cls

    def __ror__(cls, other: Any) -> Any:
        return cls

    def __iter__(cls) -> Any:
        return iter(())


class _Stub(metaclass=_StubMeta):
    def __init__(self, *a: Any, **k: Any) -> None:
        pass

    def __call__(self, *a: Any, **k: Any) -> Any:
        # Used as a decorator (`@stub(...)` then `@stub_instance`): hand the function back.
        if len(a) == 1 and callable(a[0]) and not k:
            return a[0]
        return _Stub()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _Stub()

    def __iter__(self) -> Any:
        return iter(())

    def __bool__(self) -> bool:
        return False


def _stub_class(name: str) -> type:
    return _StubMeta(name, (_Stub,), {"__module__": "kvplan_stub"})


class _StubModule(types.ModuleType):
    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.__path__: list[str] = []
        self.__file__ = f"<stub {name}>"

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        value = _stub_class(name)
        setattr(self, name, value)
        return value


class _StubLoader(importlib.abc.Loader):
    def create_module(self, spec: Any) -> types.ModuleType:
        STUBBED.add(spec.name.split(".")[0] if not spec.name.startswith("vllm.") else spec.name)
        mod = _StubModule(spec.name)
        mod.__spec__ = spec
        return mod

    def exec_module(self, module: types.ModuleType) -> None:
        pass


class _Forced(importlib.abc.MetaPathFinder):
    """First on the path: the modules named with --stub."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name in FORCED or name.split(".")[0] in FORCED:
            return importlib.machinery.ModuleSpec(name, _StubLoader(), is_package=True)
        return None


class _Missing(importlib.abc.MetaPathFinder):
    """Last on the path: a module nothing else finds and the generator allowed to stub (`--stub-missing`)."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name in ALLOW_MISSING or name.split(".")[0] in ALLOW_MISSING:
            return importlib.machinery.ModuleSpec(name, _StubLoader(), is_package=True)
        return None


ALLOW_MISSING: set[str] = set()
ALLOW_NAMES: set[str] = set()  # "module:name" pairs a `from module import name` may get a stub for
_real_import = builtins.__import__


def _import(name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0) -> Any:
    mod = _real_import(name, globals, locals, fromlist, level)
    for attr in fromlist or ():
        if f"{getattr(mod, '__name__', '')}:{attr}" in ALLOW_NAMES and not hasattr(mod, attr):
            STUBBED.add(f"{mod.__name__}:{attr}")
            setattr(mod, attr, _stub_class(attr))
    return mod


def _tolerate_config_reregistration() -> None:
    """Older releases register their own config classes for model types the installed transformers now has
    (0.9: 'aimv2'); transformers refuses a second registration. Tolerated (exist_ok): the registry only matters
    for loading models, never for the parser."""
    with contextlib.suppress(Exception):
        from transformers import AutoConfig

        orig = AutoConfig.register

        def register(model_type: Any, config: Any, exist_ok: bool = False) -> Any:
            return orig(model_type, config, exist_ok=True)

        AutoConfig.register = staticmethod(register)  # type: ignore[method-assign]


def _torch_cpu_probes() -> None:
    """CPU feature probes older vLLM CPU platforms call (`torch._C._cpu._is_avx512_supported`, 0.17) that this
    torch no longer has: answered False (no such CPU feature), which only steers CPU kernels, never an option."""
    with contextlib.suppress(Exception):
        import torch

        cpu = torch._C._cpu
        for name in ("_is_avx512_supported", "_is_avx512_bf16_supported", "_is_avx512_vnni_supported",
                     "_is_amx_tile_supported", "_is_amx_fp16_supported", "_is_avx2_supported"):
            if not hasattr(cpu, name):
                setattr(cpu, name, lambda: False)


def install_stubs(forced: set[str], missing: set[str]) -> None:
    # The big dependencies probe their own optional packages: import them before any stub exists.
    for dep in ("torch", "transformers", "pydantic", "fastapi", "openai"):
        if dep not in forced:
            with contextlib.suppress(Exception):
                importlib.import_module(dep)
    FORCED.update(forced)
    _torch_cpu_probes()
    _tolerate_config_reregistration()
    for m in missing:
        (ALLOW_NAMES if ":" in m else ALLOW_MISSING).add(m)
    sys.meta_path.insert(0, _Forced())
    sys.meta_path.append(_Missing())
    builtins.__import__ = _import


# ----------------------------------------------------------------------------- the serve parser
def _first(*paths: str) -> Any:
    """The first `module:attr` that imports."""
    errors = []
    last: BaseException | None = None
    for p in paths:
        mod, _, attr = p.partition(":")
        try:
            return getattr(importlib.import_module(mod), attr)
        except (ImportError, AttributeError) as e:
            errors.append(f"{p}: {e}")
            last = e
    raise ImportError("; ".join(errors)) from last


def flexible_parser_class() -> Any:
    return _first("vllm.utils.argparse_utils:FlexibleArgumentParser", "vllm.utils:FlexibleArgumentParser")


def build_serve_parser() -> tuple[Any, Any, str]:
    """(top parser, serve sub-parser, how it was built)."""
    fap = flexible_parser_class()
    top = fap(prog="vllm", description="vLLM CLI")
    sub = top.add_subparsers(required=False, dest="subparser")
    import importlib.util

    try:
        has_serve_cmd = importlib.util.find_spec("vllm.entrypoints.cli.serve") is not None
    except ModuleNotFoundError as e:  # no vllm.entrypoints.cli package (0.6, 0.7)
        if not (e.name or "").startswith("vllm.entrypoints"):
            raise  # the package exists; something it imports is missing (stub it and retry)
        has_serve_cmd = False
    if has_serve_cmd:
        # the release has a `vllm serve` sub-command module: its import errors are real (stub and retry)
        serve_cmd = importlib.import_module("vllm.entrypoints.cli.serve").ServeSubcommand
        return top, serve_cmd().subparser_init(sub), "vllm.entrypoints.cli.serve:ServeSubcommand.subparser_init"
    make_arg_parser = _first("vllm.entrypoints.openai.cli_args:make_arg_parser")
    serve = sub.add_parser("serve", usage="vllm serve <model_tag> [options]")
    serve.add_argument("model_tag", type=str, help="The model tag to serve")
    serve.add_argument("--config", type=str, default="", required=False, help="Read CLI options from a config file.")
    return top, make_arg_parser(serve), "vllm/scripts.py::main (serve sub-parser, model_tag, --config, make_arg_parser)"


def _groups() -> tuple[set[str], set[str]]:
    """dests added by AsyncEngineArgs (engine) and by the frontend (everything else of serve)."""
    fap = flexible_parser_class()
    eng_cls = _first("vllm.engine.arg_utils:AsyncEngineArgs")
    eng = eng_cls.add_cli_args(fap())
    frontend: set[str] = set()
    with contextlib.suppress(ImportError, AttributeError):
        fe_cls = _first("vllm.entrypoints.common.cli_args:FrontendArgs",
                        "vllm.entrypoints.openai.cli_args:FrontendArgs")
        frontend = {a.dest for a in fe_cls.add_cli_args(fap())._actions if a.option_strings}
    return {a.dest for a in eng._actions if a.option_strings}, frontend


def _inner(fn: Any, depth: int = 0) -> Any:
    for cell in getattr(fn, "__closure__", None) or ():
        v = cell.cell_contents
        if callable(v):
            if getattr(v, "__name__", "") in ("_parse_type", "_optional_type") and depth < 4:
                return _inner(v, depth + 1)
            return v
    return None


def value_kind(action: argparse.Action) -> dict[str, Any]:
    t = action.type
    name = getattr(t, "__name__", None) if t is not None else None
    wrapper = None
    base = t
    if name in ("_optional_type", "_parse_type"):
        wrapper = "optional" if name == "_optional_type" else "parse_type"
        base = _inner(t)
    bname = getattr(base, "__name__", "") if base is not None else ""
    if action.nargs == 0:
        kind = "flag"
    elif base is None or base is str:
        kind = "str"
    elif base is int:
        kind = "int"
    elif base is float:
        kind = "float"
    elif bname in ("human_readable_int", "human_readable_int_or_auto", "nullable_str", "parse_reasoning_parser"):
        kind = {"nullable_str": "nullable_str", "parse_reasoning_parser": "str"}.get(bname, bname)
    elif bname in ("loads", "parse_dataclass", "nullable_kvs"):
        kind = "json" if bname != "nullable_kvs" else "kvs"
    elif bname == "union_dict_and_str":
        kind = "json_or_str"
    elif bname == "<lambda>":
        kind = _lambda_kind(base)
    else:
        kind = "other"
    if kind == "json" and t is not None:
        # what the type itself takes besides JSON objects: `image=2` (0.8: nullable_kvs fallback), a bare
        # `3` (0.10: -O 3 is a compilation level)
        if isinstance(_probe(t, "image=2"), dict):
            kind = "json_or_kvs"
        elif _probe(t, "3") is not None:
            kind = "json_or_int"
    type_repr = re.sub(r" at 0x[0-9a-f]+", "", repr(base)) if wrapper else None
    return {"kind": kind, "type_name": name if t is not None else None, "type_wrapper": wrapper,
            "type_repr": type_repr}


def _probe(t: Any, value: str) -> Any:
    """What the option's type makes of `value` (None when it raises)."""
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            return t(value)
    except BaseException:  # argparse errors, SystemExit, pydantic errors alike
        return None


def _lambda_kind(base: Any) -> str:
    with contextlib.suppress(Exception):
        if base("FLASH-Attn") == "flash_attn":
            return "str_lower"
    with contextlib.suppress(Exception):
        if base("2,a") == [2, "a"]:
            return "csv_int_or_str"
    with contextlib.suppress(Exception):
        if base("2") == 2:
            return "int"
    return "other"


def _jsonable(v: Any) -> Any:
    if isinstance(v, enum.Enum):
        return v.name if isinstance(v.value, str) and "." in v.value else _jsonable(v.value)
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, (set, frozenset)):
        return sorted((_jsonable(x) for x in v), key=str)
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in sorted(v.items(), key=lambda kv: str(kv[0]))}
    if isinstance(v, bool) or v is None or isinstance(v, (str, int)):
        return v
    if isinstance(v, float):
        return v if v == v and v not in (float("inf"), float("-inf")) else repr(v)
    return repr(v) if not isinstance(v, _Stub) else "<stub>"


def _action_name(action: argparse.Action) -> str:
    if isinstance(action, getattr(argparse, "BooleanOptionalAction", ())):
        return "boolean_optional"
    return {argparse._StoreAction: "store", argparse._StoreTrueAction: "store_true",
            argparse._StoreFalseAction: "store_false", argparse._AppendAction: "append",
            argparse._StoreConstAction: "store_const", argparse._HelpAction: "help",
            argparse._VersionAction: "version"}.get(type(action), "custom:" + type(action).__name__)


_DEPRECATION = re.compile(r"deprecat|removed|no longer|will be removed|use `?--", re.I)


def options_table(serve: Any) -> dict[str, Any]:
    engine, frontend = _groups()
    by_action: dict[int, list[str]] = {}
    for s, a in serve._option_string_actions.items():
        by_action.setdefault(id(a), []).append(s)
    deprecated = getattr(serve, "_deprecated", set())
    rows = []
    for a in serve._actions:
        if not a.option_strings:
            continue
        strings = by_action[id(a)]
        hidden = sorted(s for s in strings if s not in a.option_strings)
        negative: list[str] = []
        if a.nargs == 0 and _action_name(a) == "boolean_optional":
            for s in strings:
                with contextlib.suppress(SystemExit, Exception), contextlib.redirect_stderr(io.StringIO()):
                    ns = serve.parse_args(["m", s] if _has_required_positional(serve) else [s])
                    if getattr(ns, a.dest) is False:
                        negative.append(s)
        choices = _jsonable(list(a.choices)) if a.choices is not None else None
        default = a.default if isinstance(a.default, (str, int, float, bool, type(None), enum.Enum)) else None
        if isinstance(a.default, (list, tuple)) and all(isinstance(x, (str, int, float)) for x in a.default):
            default = list(a.default)
        help_text = a.help if isinstance(a.help, str) else None
        is_dep = a in deprecated or bool(getattr(a, "deprecated", False))
        rows.append({
            "option_strings": list(a.option_strings),
            "hidden_option_strings": hidden,
            "negative_option_strings": sorted(negative),
            "dest": a.dest,
            "action": _action_name(a),
            "nargs": a.nargs,
            "const": _jsonable(a.const) if a.nargs == "?" else None,
            **value_kind(a),
            "choices": choices,
            "metavar_choices": sorted(map(str, a.metavar)) if isinstance(a.metavar, (list, tuple)) else None,
            "default": _jsonable(default),
            "group": ("serve" if a.dest == "help" else "engine" if a.dest in engine
                      else "frontend" if a.dest in frontend or not frontend else "serve"),
            "deprecated": is_dep,
            "suppressed": a.help == argparse.SUPPRESS,
            # kept only where it speaks of deprecation: it names a successor, if vLLM names one
            "deprecation_help": " ".join(help_text.split()) if help_text and help_text != argparse.SUPPRESS and (
                is_dep or _DEPRECATION.search(help_text)) else None,
        })
    rows.sort(key=lambda r: r["option_strings"][0])
    positionals = [{"dest": a.dest, "nargs": a.nargs, "required": bool(a.required)}
                   for a in serve._actions if not a.option_strings]
    return {
        "prog": serve.prog,
        "allow_abbrev": serve.allow_abbrev,
        "positionals": positionals,
        "num_options": len(rows),
        "registration_order": list(serve._option_string_actions),
        "options": rows,
    }


def _has_required_positional(parser: Any) -> bool:
    return any(not a.option_strings and a.nargs is None and a.required for a in parser._actions)


# ----------------------------------------------------------------------------- the other facts
def quantization_methods() -> list[str] | None:
    with contextlib.suppress(Exception):
        return list(_first("vllm.model_executor.layers.quantization:QUANTIZATION_METHODS"))
    return None


def kv_cache_dtypes() -> list[str] | None:
    """`--kv-cache-dtype` values in vLLM's order: the CacheDType Literal (argparse lists them only as a
    metavar in recent releases; the config validates them), else the option's argparse choices."""
    import typing

    for p in ("vllm.config.cache:CacheDType", "vllm.config:CacheDType"):
        with contextlib.suppress(Exception):
            args = typing.get_args(_first(p))
            if args and all(isinstance(a, str) for a in args):
                return list(args)
    return None


def registry() -> dict[str, Any]:
    mod = None
    for name in ("vllm.model_executor.models.registry", "vllm.model_executor.models"):
        try:
            mod = importlib.import_module(name)
        except Exception:
            continue
        if any(k.endswith("_MODELS") for k in vars(mod)):
            break
    if mod is None:
        return {"source": None, "tables": {}, "previously_supported": {}}
    tables = {k.strip("_").lower(): sorted(v) for k, v in vars(mod).items()
              if k.startswith("_") and k.endswith("_MODELS") and isinstance(v, dict)
              and k not in ("_PREVIOUSLY_SUPPORTED_MODELS",)}
    prev = getattr(mod, "_PREVIOUSLY_SUPPORTED_MODELS", {})
    return {"source": mod.__name__, "tables": tables,
            "previously_supported": {k: _jsonable(v) for k, v in sorted(prev.items())}}


def attention_backends() -> dict[str, Any]:
    for p in ("vllm.v1.attention.backends.registry:AttentionBackendEnum",
              "vllm.attention.backends.registry:AttentionBackendEnum",
              "vllm.attention.backends.registry:_Backend",
              "vllm.platforms.interface:_Backend",
              "vllm.attention.selector:_Backend"):
        with contextlib.suppress(Exception):
            e = _first(p)
            return {"source": p.replace(":", "."), "names": sorted(m.name for m in e)}
    return {"source": None, "names": []}


_DEFAULT_FIELDS = {
    "vllm.config.cache:CacheConfig": ("block_size", "gpu_memory_utilization", "cache_dtype", "enable_prefix_caching",
                                      "swap_space"),
    "vllm.config:CacheConfig": ("block_size", "gpu_memory_utilization", "cache_dtype", "enable_prefix_caching"),
    "vllm.config.scheduler:SchedulerConfig": ("max_num_batched_tokens", "max_num_seqs", "max_model_len"),
    "vllm.engine.arg_utils:EngineArgs": ("block_size", "gpu_memory_utilization", "max_num_batched_tokens",
                                         "max_num_seqs", "max_model_len", "kv_cache_dtype", "enable_prefix_caching",
                                         "swap_space"),
}


def config_defaults() -> dict[str, Any]:
    """Dataclass field defaults (a default_factory is left out); None where the field has no default."""
    out: dict[str, Any] = {}
    for path, names in _DEFAULT_FIELDS.items():
        try:
            cls = _first(path)
        except ImportError:
            continue
        short = path.rsplit(":", 1)[1]
        if short in out:
            continue
        if dataclasses.is_dataclass(cls):
            fields = {f.name: f for f in dataclasses.fields(cls)}
            got = {}
            for n in names:
                f = fields.get(n)
                if f is not None and f.default is not dataclasses.MISSING:
                    d = f.default
                    if type(d).__name__ == "FieldInfo":  # pydantic Field(default=..., gt=0)
                        d = getattr(d, "default", None)
                    got[n] = _jsonable(d)
            out[short] = got
        else:  # a plain class (0.6 CacheConfig): its __init__ defaults
            import inspect

            with contextlib.suppress(Exception):
                sig = inspect.signature(cls.__init__)
                out[short] = {n: _jsonable(p.default) for n, p in sig.parameters.items()
                              if n in names and p.default is not inspect.Parameter.empty}
    return out


def _cpu_platform() -> str:
    """The platform the parser is built on: vLLM's CPU platform (VLLM_TARGET_DEVICE=cpu). A release that
    detects the CPU platform only in a CPU build (0.27: from its version string) gets it set explicitly,
    as the config defaults some options take (DeviceConfig) need a platform."""
    import vllm.platforms as platforms

    try:
        current = platforms.current_platform
        name = type(current).__name__
    except Exception:
        current, name = None, "none"
    if current is None or getattr(current, "device_type", "") in ("", None):
        try:
            from vllm.platforms.cpu import CpuPlatform
        except ImportError:  # a release without a CPU platform class (0.6)
            return f"{name} (no CPU platform class in this release)"

        if hasattr(platforms, "_current_platform"):
            platforms._current_platform = CpuPlatform()
        platforms.current_platform = CpuPlatform()
        return f"CpuPlatform (set; detected {name})"
    return name


def _missing_of(e: ImportError) -> str | None:
    cause = e
    while isinstance(cause.__cause__ or cause.__context__, ImportError):
        cause = cause.__cause__ or cause.__context__  # type: ignore[assignment]
    e = cause
    m = re.search(r"cannot import name '([^']+)' from '([^']+)'", str(e))
    if m:
        return f"{m.group(2)}:{m.group(1)}"
    name = e.name if isinstance(e, ModuleNotFoundError) else None
    if name and (name == "vllm" or name.startswith("vllm.")) and not name.split(".")[-1].startswith("_"):
        return None  # a module of the release itself: never stubbed (its compiled extensions aside)
    return name


PROBES = {
    "dotted": ["serve", "m", "--a_b.c_d", "1"],
    "dotted_list": ["serve", "m", "--a_b.c_d+", "1,2"],
    "equals": ["serve", "m", "--x_y=1"],
    "opt_level": ["serve", "m", "-O3"],
    "opt_level_eq": ["serve", "m", "-O=3"],
    "opt_level_split": ["serve", "m", "-O", "3"],
    "model_flag": ["serve", "-tp", "2", "--model", "m"],
    "model_flag_eq": ["serve", "-tp", "2", "--model=m"],
}


class _Captured(Exception):
    pass


def preprocess_probes(top: Any) -> dict[str, list[str]]:
    """What the release's FlexibleArgumentParser hands argparse for a few argv shapes (dashes for underscores,
    dotted JSON keys, `-O3`, `--model M`): kvplan repeats exactly that rewriting for this release."""
    out = {}
    orig = argparse.ArgumentParser.parse_known_args

    def spy(self: Any, args: Any = None, namespace: Any = None) -> Any:
        if self is top:
            raise _Captured(list(args or []))
        return orig(self, args, namespace)

    argparse.ArgumentParser.parse_known_args = spy  # type: ignore[method-assign]
    try:
        for name, argv in PROBES.items():
            try:
                with contextlib.redirect_stderr(io.StringIO()):
                    top.parse_args(list(argv))
                out[name] = ["<parsed without argparse>"]
            except _Captured as c:
                out[name] = [str(x) for x in c.args[0]]
            except BaseException as e:
                out[name] = [f"<{type(e).__name__}>"]
    finally:
        argparse.ArgumentParser.parse_known_args = orig  # type: ignore[method-assign]
    return out


def run_cases(top: Any, cases: list[list[str]]) -> list[dict[str, Any]]:
    """What the release's parser does with each argv: the namespace values that differ from the defaults,
    or the exit status and argparse's message."""
    out = []
    defaults = vars(top.parse_args(["serve", "m"]))
    for argv in cases:
        err = io.StringIO()
        try:
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
                ns = top.parse_args(["serve", *argv])
        except SystemExit as e:
            lines = [ln for ln in err.getvalue().splitlines() if ": error: " in ln]
            _, _, msg = lines[-1].partition(": error: ") if lines else ("", "", err.getvalue().strip()[-300:])
            out.append({"argv": argv, "exit": int(e.code or 0), "error": re.sub(r" at 0x[0-9a-f]+", "", msg)})
            continue
        except Exception as e:
            out.append({"argv": argv, "exit": 1, "error": f"{type(e).__name__}: {e}"[:300]})
            continue
        values = {}
        for k, v in sorted(vars(ns).items()):
            d = defaults.get(k)
            if k == "dispatch_function" or v == d:
                continue
            if dataclasses.is_dataclass(v) and dataclasses.is_dataclass(d):
                diff = {f.name: _jsonable(getattr(v, f.name)) for f in dataclasses.fields(v)
                        if getattr(v, f.name) != getattr(d, f.name)}
                if diff:
                    values[k] = diff
            else:
                values[k] = _jsonable(v)
        out.append({"argv": argv, "exit": 0, "namespace": values})
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--stub", default="", help="comma-separated modules to stub even where installed")
    ap.add_argument("--stub-missing", default="", help="comma-separated modules (or module:name) to stub if missing")
    ap.add_argument("--cases", help="a JSON file of argv lists to run through the parser (`cases` in the output)")
    a = ap.parse_args()
    install_stubs({m for m in a.stub.split(",") if m}, {m for m in a.stub_missing.split(",") if m})
    try:
        import vllm

        platform = _cpu_platform()
        top, serve, how = build_serve_parser()
    except ImportError as e:  # the generator adds this one to --stub-missing and runs again
        import traceback

        traceback.print_exc()
        sys.stdout.write(json.dumps({"missing": _missing_of(e), "error": str(e)}) + "\n")
        raise SystemExit(3) from e
    doc = {
        "engine_version": getattr(vllm, "__version__", None),
        "serve_parser": how,
        "platform": platform,
        "options": {**options_table(serve), "preprocess": preprocess_probes(top)},
        "quantization_methods": quantization_methods(),
        "kv_cache_dtypes": kv_cache_dtypes(),
        "registry": registry(),
        "attention_backends": attention_backends(),
        "config_defaults": config_defaults(),
    }
    if a.cases:
        with open(a.cases) as f:
            doc["cases"] = run_cases(top, json.load(f))
    doc["stubbed_modules"] = sorted(STUBBED)
    sys.stdout.write(json.dumps(doc, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
