"""Bounded readers for everything kvplan takes from outside, and the one place input limits live.

Every reader here refuses input that would drive kvplan into unbounded time or memory, with one
KvplanInputError line naming the input, the value and the limit (docs/limits.md):

- files are refused by size before they are read (`read_bounded`), and read at most limit + 1 bytes;
- JSON is refused by nesting depth (`loads_json`, `check_json_depth`);
- YAML is scanned event by event before it is composed (`check_yaml`, `compose_all`): document
  size, nesting depth, and an alias-expansion budget (PyYAML shares aliased nodes, so composing
  is cheap, but every walk over the composed graph pays for each alias again: nine levels of nine
  aliases are 387 million nodes);
- shell sources and launch lines are refused by line, word and argument counts;
- config.json is refused at the boundary only by what protects the process (depth, layer counts:
  `check_config_values`); the type and range of a value are checked by the code that reads it,
  when it reads it (`check_config_value`), with the types vLLM and transformers accept there, and
  pydantic constraint errors on the model types become the same one-line errors (`input_boundary`).

`active_limits(...)` narrows the limits for one call (the service's `--max-layers`), so the CLI,
`kvplan lint` and `kvplan serve` run the same checks. `time_budget(s)` bounds the wall time of a
block (a per-file lint budget): a watchdog thread raises `TimeBudgetExceeded` in the guarded
thread, which works in any thread (signals only reach the main one); the YAML scan also checks the
deadline itself.
"""
from __future__ import annotations

import contextlib
import contextvars
import ctypes
import errno
import functools
import json
import stat
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import ValidationError
from yaml.events import (
    AliasEvent,
    CollectionEndEvent,
    CollectionStartEvent,
    DocumentStartEvent,
    ScalarEvent,
)

from kvplan.errors import KvplanInputError
from kvplan.model import limits as L
from kvplan.model.limits import json_depth

DOCS = "docs/limits.md"
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass(frozen=True)
class Limits:
    """The limits in force (defaults: kvplan.model.limits; see docs/limits.md)."""

    max_layers: int = L.MAX_LAYERS
    max_config_bytes: int = L.MAX_CONFIG_BYTES
    max_json_depth: int = L.MAX_JSON_DEPTH
    max_lint_file_bytes: int = L.MAX_LINT_FILE_BYTES
    max_yaml_depth: int = L.MAX_YAML_DEPTH
    max_yaml_nodes: int = L.MAX_YAML_NODES
    max_yaml_alias_nodes: int = L.MAX_YAML_ALIAS_NODES
    max_text_lines: int = L.MAX_TEXT_LINES
    max_text_tokens: int = L.MAX_TEXT_TOKENS
    max_argv_tokens: int = L.MAX_ARGV_TOKENS
    max_arg_bytes: int = L.MAX_ARG_BYTES
    max_launch_line_bytes: int = L.MAX_LAUNCH_LINE_BYTES


# Limits is a frozen dataclass: the shared default cannot be mutated.
_LIMITS: contextvars.ContextVar[Limits] = contextvars.ContextVar("kvplan_limits", default=Limits())  # noqa: B039
_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar("kvplan_deadline", default=None)


def limits() -> Limits:
    """The limits in force in this context."""
    return _LIMITS.get()


@contextmanager
def active_limits(**changes: int) -> Iterator[Limits]:
    """Run a block under changed limits (e.g. `active_limits(max_layers=1024)` for the service)."""
    token = _LIMITS.set(replace(_LIMITS.get(), **changes))
    try:
        yield _LIMITS.get()
    finally:
        _LIMITS.reset(token)


class InputLimitError(KvplanInputError):
    """Input refused by a size/depth/count limit; `code` is the lint finding it becomes, with its position."""

    def __init__(self, problem: str, fix: str | None = None, *, code: str = "KV820", line: int = 1,
                 column: int = 1, detail: str | None = None):
        super().__init__(problem, fix)
        self.code, self.line, self.column = code, line, column
        self.detail = detail or problem
        """The problem without the input's name (a lint finding's message; its location names the file)."""


def _mib(n: int) -> str:
    return f"{n / (1 << 20):g} MiB" if n >= 1 << 20 else f"{n:,} bytes"


# ----------------------------------------------------------------------------- files and JSON
def read_bounded(path: Path, what: str, max_bytes: int | None = None, name: str | None = None) -> bytes:
    """The bytes of a file, refused by size before reading (and read at most limit + 1 bytes,
    so a growing file or a device cannot stream forever). OSErrors propagate to the caller."""
    limit = max_bytes if max_bytes is not None else limits().max_config_bytes
    label = f"{what} {name or path}"
    st = path.stat()
    if stat.S_ISFIFO(st.st_mode) or stat.S_ISSOCK(st.st_mode):  # reading would wait for a writer forever
        raise OSError(errno.EINVAL, "not a regular file")
    size = st.st_size
    if size > limit:
        raise InputLimitError(f"{label} is {size:,} bytes, over kvplan's limit of {_mib(limit)}.",
                              f"Pass the real file (limits: {DOCS}).")
    with path.open("rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise InputLimitError(f"{label} is over kvplan's limit of {_mib(limit)}.",
                              f"Pass a regular file (limits: {DOCS}).")
    return data


def check_json_depth(value: Any, source: str, max_depth: int | None = None) -> None:
    """Refuse parsed JSON that nests deeper than the limit (before anything recurses over it)."""
    limit = max_depth if max_depth is not None else limits().max_json_depth
    if json_depth(value) > limit:
        raise InputLimitError(f"{source} nests deeper than kvplan's limit of {limit} levels.",
                              f"Pass the real file (limits: {DOCS}).")


def loads_json(text: str | bytes, source: str, max_depth: int | None = None) -> Any:
    """json.loads with a depth limit; malformed JSON is one KvplanInputError line."""
    limit = max_depth if max_depth is not None else limits().max_json_depth
    try:
        data = json.loads(text)
    except RecursionError:  # the C decoder guards its recursion: deeper than the interpreter allows
        raise InputLimitError(f"{source} nests deeper than kvplan's limit of {limit} levels.",
                              f"Pass the real file (limits: {DOCS}).") from None
    except json.JSONDecodeError as e:
        raise KvplanInputError(f"malformed JSON in {source} at line {e.lineno} column {e.colno}: {e.msg}.",
                               "Fix the JSON syntax (a config.json from the model repository parses as-is).") from None
    except UnicodeDecodeError:
        raise KvplanInputError(f"{source} is not UTF-8 text.", "Save the file as UTF-8 JSON.") from None
    check_json_depth(data, source, limit)
    return data


def load_json_file(path: Path, what: str, max_bytes: int | None = None) -> Any:
    """Read a JSON file under the size and depth limits; every failure is one KvplanInputError."""
    try:
        raw = read_bounded(path, f"{what} file", max_bytes)
    except FileNotFoundError:
        raise KvplanInputError(f"{what} file not found: {path}.",
                               "Pass the path of a config.json or a checkpoint folder.") from None
    except IsADirectoryError:
        raise KvplanInputError(f"{path} is a directory, not a {what} file.",
                               "Pass the folder itself or the config.json inside it.") from None
    except OSError as e:
        raise KvplanInputError(f"cannot read {what} file {path}: {e.__class__.__name__}.",
                               "Check the file exists, is readable and is UTF-8 JSON.") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise KvplanInputError(f"cannot read {what} file {path}: UnicodeDecodeError.",
                               "Check the file exists, is readable and is UTF-8 JSON.") from None
    return loads_json(text, str(path))


def read_toml(path: Path, what: str = "configuration file") -> dict[str, Any]:
    """A TOML file (kvplan.toml, pyproject.toml) under the size limit; nesting too deep for the
    parser is an InputLimitError. OSError, UnicodeDecodeError and TOMLDecodeError propagate."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    text = read_bounded(path, what).decode("utf-8")
    try:
        return tomllib.loads(text)
    except RecursionError:
        raise InputLimitError(f"{what} {path} nests too deeply to read.", f"Fix the file (limits: {DOCS}).") from None


# ----------------------------------------------------------------------------- config.json values
_SUBCONFIGS = ("text_config", "llm_config", "language_config")
_LAYER_KEYS = ("num_hidden_layers", "n_layer", "num_layers", "n_layers", "num_decoder_layers", "decoder_layers")


def check_config_values(cfg: Mapping[str, Any], source: str) -> None:
    """The protective limits of a config.json at the boundary: nesting depth, and layer counts
    over the limit in force (a billion layers would be planned one by one), at the top level and
    in the language model's sub-config. Types and ranges of the keys kvplan reads are checked
    where they are read (`check_config_value`), never here: a key nobody reads is no error."""
    check_json_depth(cfg, source)
    objs: list[tuple[str, Mapping[str, Any]]] = [("", cfg)]
    objs += [(f"{k}.", cfg[k]) for k in _SUBCONFIGS if isinstance(cfg.get(k), dict)]
    layers_hi = limits().max_layers
    for prefix, obj in objs:
        for key in _LAYER_KEYS:
            v = obj.get(key)
            if isinstance(v, int) and not isinstance(v, bool) and v > layers_hi:
                check_count(source, prefix + key, v, layers_hi)


def check_config_value(source: str, key: str, value: Any, siblings: Mapping[str, Any]) -> None:
    """Type, sign and plausibility range of one config.json value the planner reads
    (kvplan.model.limits.CONFIG_INT_KEYS / CONFIG_WINDOW_KEYS; `key` may carry its sub-config
    prefix, e.g. `text_config.head_dim`); keys outside those tables are the reader's to check.
    `siblings`: the object the key sits in (head_dim 0 beside a kv_lora_rank is MLA)."""
    name = key.rsplit(".", 1)[-1]
    if name in L.CONFIG_INT_KEYS:
        if name == "head_dim" and value == 0 and siblings.get("kv_lora_rank"):
            return  # MLA (GLM-5 Next publishes head_dim 0): the latent's sizes are its own keys
        lo, hi = L.CONFIG_INT_KEYS[name]
        _check_int(source, key, value, lo, hi)
    elif name in L.CONFIG_WINDOW_KEYS:
        _check_int(source, key, value, None, L.CONFIG_WINDOW_KEYS[name])


# Keys vLLM reads as numbers, which transformers' config classes may write as an integral float
# (MusicFlamingoConfig: max_position_embeddings 1200.0).
_INTEGRAL_FLOAT_OK = frozenset({"max_position_embeddings"})


def _check_int(source: str, key: str, v: Any, lo: int | None, hi: int) -> None:
    if v is None:
        return
    if isinstance(v, float) and v.is_integer() and key.rsplit(".", 1)[-1] in _INTEGRAL_FLOAT_OK:
        v = int(v)
    if isinstance(v, bool) or not isinstance(v, int):
        raise KvplanInputError(f"{source}: {key} must be an integer, got {_short(v)}.", "Fix the value in config.json.")
    if lo is not None and v < lo:
        raise KvplanInputError(f"{source}: {key} is {v}; it must be at least {lo}.",
                               "Fix the value in config.json (vLLM cannot build the model with it).")
    if v > hi:
        raise InputLimitError(f"{source}: {key} is {v:,}, over kvplan's plausibility limit of {hi:,}.",
                              f"Fix the value in config.json (limits: {DOCS}).")


def check_count(source: str, key: str, v: int, hi: int) -> int:
    """A layer count against the limit in force (`kvplan serve --max-layers` lowers it)."""
    if v > hi:
        raise InputLimitError(f"{source}: {key} is {v:,}; kvplan plans at most {hi} layers.",
                              f"Check the config (limits: {DOCS}; a server's is set by `kvplan serve --max-layers`).")
    return v


def _short(v: Any) -> str:
    r = repr(v)
    return r if len(r) <= 60 else r[:57] + "..."


# ----------------------------------------------------------------------------- pydantic boundary
F = TypeVar("F", bound=Callable[..., Any])

# Model field -> the name the user wrote (config.json key or vLLM flag).
FIELD_NAMES: dict[str, str] = {
    "num_layers": "num_hidden_layers", "num_heads": "num_attention_heads", "num_kv_heads": "num_key_value_heads",
    "head_size": "head_dim", "head_size_v": "head_dim (value)", "sliding_window": "sliding_window",
    "attention_chunk_size": "attention_chunk_size", "max_position_embeddings": "max_position_embeddings",
    "kv_lora_rank": "kv_lora_rank", "qk_rope_head_dim": "qk_rope_head_dim", "qk_nope_head_dim": "qk_nope_head_dim",
    "v_head_dim": "v_head_dim", "index_topk": "index_topk", "index": "layer index",
    "tensor_parallel_size": "--tensor-parallel-size", "pipeline_parallel_size": "--pipeline-parallel-size",
    "max_model_len": "--max-model-len", "block_size": "--block-size",
    "gpu_memory_utilization": "--gpu-memory-utilization", "max_num_batched_tokens": "--max-num-batched-tokens",
    "max_num_seqs": "--max-num-seqs", "attention_config": "--attention-config",
    "producer": "quantization config producer.name", "quant_method": "quantization config quant_method",
    "config_dtype": "torch_dtype", "model_type": "model_type", "text_model_type": "text_config.model_type",
    "mamba_ssm_cache_dtype": "mamba_ssm_cache_dtype", "layer": "scale tensor layer index",
}


def validation_message(e: ValidationError) -> str:
    """The first pydantic error as `key is VALUE; it must be ...` (key in the user's spelling)."""
    err = e.errors()[0]
    loc = [p for p in err.get("loc", ()) if isinstance(p, str)]
    where = [int(p) for p in err.get("loc", ()) if isinstance(p, int)]
    field = loc[-1] if loc else "value"
    name = FIELD_NAMES.get(field, field)
    ctx = err.get("ctx") or {}
    value = _short(err.get("input"))
    if "ge" in ctx:
        need = f"it must be at least {ctx['ge']}"
    elif "gt" in ctx:
        need = f"it must be greater than {ctx['gt']}"
    elif "le" in ctx:
        need = f"it must be at most {ctx['le']:,} (kvplan's plausibility limit, {DOCS})"
    elif "lt" in ctx:
        need = f"it must be below {ctx['lt']:,}"
    else:
        need = str(err.get("msg", "invalid")).removeprefix("Value error, ")
    layer = f" (layer {where[0]})" if where and loc and loc[0] == "layers" else ""
    return f"{name} is {value}{layer}; {need}"


def input_boundary(source_arg: str | None = None, fix: str = "Fix the value.",
                   what: str = "") -> Callable[[F], F]:
    """Decorate a reader that builds model objects: their constraint errors become one
    KvplanInputError line naming the key, the value and the limit (`source_arg`: the argument
    that names the input, e.g. the config path)."""
    def deco(fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except (ValidationError, RecursionError) as e:
                src = kwargs.get(source_arg) if source_arg else None
                if src is None and source_arg:
                    import inspect
                    try:
                        src = inspect.signature(fn).bind_partial(*args, **kwargs).arguments.get(source_arg)
                    except TypeError:
                        src = None
                prefix = f"{src}: " if src is not None else ""
                if isinstance(e, RecursionError):  # a safety net: the depth limits should refuse it first
                    raise InputLimitError(f"{prefix}{what}the input nests too deeply to read.",
                                          f"Pass the real file (limits: {DOCS}).") from None
                raise KvplanInputError(f"{prefix}{what}{validation_message(e)}.", fix) from None
        return wrapper  # type: ignore[return-value]
    return deco


# ----------------------------------------------------------------------------- YAML
def check_yaml(text: str, source: str) -> None:
    """Refuse YAML over the size, depth, node or alias-expansion limits before it is composed.

    One pass over the parser's events (C speed with libyaml): every node counts once, an alias
    counts as the size of the node it names (so the count is that of the fully expanded
    document), a recursive alias is refused, and the time budget is checked as it goes.
    Syntax errors are left to the caller's composer (same messages as before).
    """
    lim = limits()
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > lim.max_lint_file_bytes:
        raise InputLimitError(f"{source} is {size:,} bytes, over kvplan's limit of {_mib(lim.max_lint_file_bytes)} "
                              "for a YAML file.", f"Split the file (limits: {DOCS}).")
    sizes: dict[str, int] = {}
    stack: list[list[Any]] = []  # [anchor, expanded size] of open collections
    total = aliased = 0
    n_events = 0

    def refuse(problem: str, mark: Any, code: str = "KV821") -> InputLimitError:
        line, col = (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)
        return InputLimitError(f"{source}:{line}: {problem}.",
                               f"Remove the aliases or split the file (limits: {DOCS}).",
                               code=code, line=line, column=col, detail=f"{problem}.")

    try:
        for ev in yaml.parse(text, Loader=_Loader):
            n_events += 1
            if not n_events & 0xFFF:
                check_deadline()
            if isinstance(ev, DocumentStartEvent):
                sizes.clear()
                continue
            if isinstance(ev, CollectionStartEvent):
                if len(stack) >= lim.max_yaml_depth:
                    raise refuse(f"YAML nests deeper than kvplan's limit of {lim.max_yaml_depth} levels", ev.start_mark)
                stack.append([ev.anchor, 1])
                total += 1
            elif isinstance(ev, CollectionEndEvent):
                anchor, n = stack.pop()
                if anchor is not None:
                    sizes[anchor] = n
                if stack:
                    stack[-1][1] += n
            elif isinstance(ev, (ScalarEvent, AliasEvent)):
                if isinstance(ev, AliasEvent):
                    if any(a == ev.anchor for a, _ in stack):
                        raise refuse(f"YAML alias *{ev.anchor} refers to a node that contains it (a recursive "
                                     "document)", ev.start_mark)
                    n = sizes.get(ev.anchor, 1)
                    aliased += n
                    total += n
                    if aliased > lim.max_yaml_alias_nodes:
                        raise refuse(f"YAML aliases expand to more than {lim.max_yaml_alias_nodes:,} nodes "
                                     f"(alias *{ev.anchor}: an alias bomb?), over kvplan's alias-expansion budget",
                                     ev.start_mark)
                else:
                    n = 1
                    total += 1
                    if ev.anchor is not None:
                        sizes[ev.anchor] = 1
                if stack:
                    stack[-1][1] += n
            if total > lim.max_yaml_nodes:
                raise refuse(f"YAML has more than {lim.max_yaml_nodes:,} nodes (aliases expanded), "
                             "over kvplan's limit", ev.start_mark)
    except yaml.YAMLError:
        return  # the composer reports syntax errors with its own position and wording


def compose_all(text: str, source: str = "<yaml>") -> Iterator[Any]:
    """yaml.compose_all under the limits of `check_yaml` (raised before the first document)."""
    check_yaml(text, source)
    yield from yaml.compose_all(text, Loader=_Loader)


# ----------------------------------------------------------------------------- shell sources, argv
def check_text(text: str, source: str) -> None:
    """A shell script / launch-line file: size, line and word limits (KV820 in lint)."""
    lim = limits()
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > lim.max_lint_file_bytes:
        raise InputLimitError(f"{source} is {size:,} bytes, over kvplan's limit of {_mib(lim.max_lint_file_bytes)}.",
                              f"Split the file (limits: {DOCS}).")
    lines = text.count("\n") + 1
    if lines > lim.max_text_lines:
        raise InputLimitError(f"{source} has {lines:,} lines, over kvplan's limit of {lim.max_text_lines:,} "
                              "for a script.", f"Split the file (limits: {DOCS}).")
    words = len(text.split())
    if words > lim.max_text_tokens:
        raise InputLimitError(f"{source} has {words:,} words, over kvplan's limit of {lim.max_text_tokens:,} "
                              "for a script.", f"Split the file (limits: {DOCS}).")


def check_argv(argv: Any) -> None:
    """A launch line's arguments: count and size of each (before any flag is parsed)."""
    lim = limits()
    if not isinstance(argv, (list, tuple)):
        raise KvplanInputError(f"engine flags must be a list of strings, got {type(argv).__name__}.",
                               'Pass e.g. ["--kv-cache-dtype", "fp8"].')
    if len(argv) > lim.max_argv_tokens:
        raise InputLimitError(f"the launch line has {len(argv):,} arguments, over kvplan's limit of "
                              f"{lim.max_argv_tokens:,}.", f"Pass the serving flags only (limits: {DOCS}).")
    for i, a in enumerate(argv):
        if not isinstance(a, str):
            raise KvplanInputError(f"engine flag argument {i} is a {type(a).__name__}, not a string.",
                                   'Pass e.g. ["--kv-cache-dtype", "fp8"].')
        if len(a) > lim.max_arg_bytes:
            raise InputLimitError(f"launch-line argument {i} ({_short(a[:40])}) is {len(a):,} characters, over "
                                  f"kvplan's limit of {lim.max_arg_bytes:,}.",
                                  f"Check the flag value (limits: {DOCS}).")


def check_launch_line(line: str) -> None:
    """A pasted launch line, before it is shell-split."""
    lim = limits()
    if len(line) > lim.max_launch_line_bytes:
        raise InputLimitError(f"the launch line is {len(line):,} characters, over kvplan's limit of "
                              f"{_mib(lim.max_launch_line_bytes)}.", f"Pass the serving flags only (limits: {DOCS}).")


# ----------------------------------------------------------------------------- time budget
class TimeBudgetExceeded(BaseException):
    """Raised inside a `time_budget` block when its time is up. A BaseException (like
    KeyboardInterrupt), so parsing code's `except Exception` cannot swallow it."""


def check_deadline() -> None:
    """Cooperative check for loops that can run long (the YAML scan calls it)."""
    d = _DEADLINE.get()
    if d is not None and time.monotonic() > d:
        raise TimeBudgetExceeded()


def _async_raise(tid: int, exc: type[BaseException] | None) -> None:
    # Not CPython (no pythonapi): the cooperative checks remain.
    with contextlib.suppress(AttributeError, OSError):
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(tid), ctypes.py_object(exc) if exc else None)


@contextmanager
def time_budget(seconds: float | None) -> Iterator[None]:
    """Bound the wall time of a block: `TimeBudgetExceeded` is raised in it after `seconds`.

    A watchdog timer raises the exception asynchronously in the calling thread (any thread, not
    only the main one, unlike SIGALRM; it takes effect between Python bytecodes, so a single long
    C call finishes first: the size limits keep those short). Callers catch TimeBudgetExceeded
    around the whole `with` statement. None or <= 0: no budget.
    """
    if not seconds or seconds <= 0:
        yield
        return
    tid = threading.get_ident()
    lock = threading.Lock()
    state = {"armed": True, "fired": False}

    def fire() -> None:
        with lock:
            if state["armed"]:
                state["fired"] = True
                _async_raise(tid, TimeBudgetExceeded)

    token = _DEADLINE.set(time.monotonic() + seconds)
    timer = threading.Timer(seconds, fire)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        try:
            with lock:
                state["armed"] = False
                if state["fired"]:
                    _async_raise(tid, None)  # drop it if not delivered yet: never outside the block
            timer.cancel()
        finally:
            _DEADLINE.reset(token)
