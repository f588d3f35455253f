"""Engine flags, verbatim from a launch line -> ServingFlags, read the way the release's own parser reads them.

vLLM's `vllm serve` parser is argparse with `allow_abbrev` (`FlexibleArgumentParser` around
`make_arg_parser`). kvplan reads argv against the option table generated from that release's parser
(`kvplan.releases`: `release(version).options`, written by `scripts/gen_vllm_release.py`); without a
version, the default release's:

* FlexibleArgumentParser's preprocessing: `--flag_name` -> `--flag-name` (up to the first '.'),
  `-O3` -> `--optimization-level 3`, dotted JSON keys (`--attention-config.backend X`, `key+` lists)
  gathered into one JSON value appended at the end, `vllm serve --model M` -> positional model;
* argparse's matching: exact spellings (including the hidden `--no-<name>` forms), unambiguous prefixes
  (`--max-model 4096`, `--kv-cache-dtype-s sliding_window`), `--flag=value`, `-tp=4`; a prefix of several
  options is an error ("ambiguous option"), an option nobody has is "unrecognized arguments";
* values consumed by nargs (one value, `+` = one or more up to the next option, `?`, flags take none)
  and converted with the option's type (int, float, human_readable_int `32k`/`1M`, JSON) and choices;
  the last occurrence wins.

Everything vLLM's parser exits on (status 2) is recorded with argparse's own wording. Unknown and
ambiguous flags and rejected values of options kvplan does not model become `FlagError`s (KV001,
KV006, KV007: error findings; the plan is made without them). A rejected value of an option kvplan
plans with (`--tensor-parallel-size two`, `--dtype bf16`, `--kv-cache-dtype` without a value) is an
input error (exit 2, like vLLM), as are values the parser takes but vLLM's config validation refuses
(an unknown --kv-cache-dtype, a tensor-parallel size of 0), with the valid values listed.
"""
from __future__ import annotations

import difflib
import json
import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kvplan.errors import KvplanInputError
from kvplan.ingest.limits import check_argv, check_launch_line, input_boundary
from kvplan.model.flags import FlagError, ServingFlags
from kvplan.releases import DEFAULT_ENGINE_VERSION, Release, ServeOption, ServeOptions, release
from kvplan.releases.options import Preprocess

__all__ = ["KNOWN_FLAGS", "MODELLED", "REMOVED_FLAGS", "FlagUse", "ScanError", "ScannedArgv", "ServeOption",
           "ServeOptions", "expand_config_file", "flags_from", "parse_flags", "scan_argv", "serve_options",
           "split_launch_line", "strip_launcher", "suggest_flag", "validate_kv_cache_dtype"]

OPTIONS_VERSION = DEFAULT_ENGINE_VERSION

# Options kvplan models: dest -> ServingFlags field (the option table knows spellings, nargs and types).
MODELLED_DESTS: dict[str, str] = {
    "kv_cache_dtype": "kv_cache_dtype",
    "kv_cache_dtype_skip_layers": "kv_cache_dtype_skip_layers",
    "dtype": "dtype",
    "tensor_parallel_size": "tensor_parallel_size",
    "pipeline_parallel_size": "pipeline_parallel_size",
    "max_model_len": "max_model_len",
    "block_size": "block_size",
    "gpu_memory_utilization": "gpu_memory_utilization",
    "max_num_batched_tokens": "max_num_batched_tokens",
    "max_num_seqs": "max_num_seqs",
    "attention_backend": "attention_backend",
    "attention_config": "attention_config",
    "quantization": "quantization",
    "revision": "revision",          # the Hub revision of a model id (not --code-revision / --tokenizer-revision)
    "hf_overrides": "hf_overrides",  # applied to config.json before planning, as vLLM does
    "trust_remote_code": "trust_remote_code",  # a config that needs its auto_map's code is refused without it
    "mamba_cache_dtype": "mamba_cache_dtype",
    "mamba_ssm_cache_dtype": "mamba_ssm_cache_dtype",
    "mamba_cache_mode": "mamba_cache_mode",
    "enable_prefix_caching": "enable_prefix_caching",
    "disable_hybrid_kv_cache_manager": "disable_hybrid_kv_cache_manager",
}

# A removed flag whose effect kvplan still models: name -> (release note, takes a value). Every other
# removed flag is found in the release history (`Release.removed_in_this_line`).
REMOVED_FLAGS = {
    "--calculate-kv-scales": ("removed in vLLM 0.33 (PR #49389); scales now come from the checkpoint, else 1.0", False),
}


# ----------------------------------------------------------------------------- the option table
def serve_options(version: str | None = None) -> ServeOptions:
    """The `vllm serve` option table of a release (None: the default release)."""
    return release(version).options


def _modelled() -> dict[str, tuple[str, str]]:
    table = serve_options()
    out: dict[str, tuple[str, str]] = {}
    for dest, fld in MODELLED_DESTS.items():
        o = table.by_dest.get(dest)
        if o is None:
            continue
        kind = "list" if o.nargs == "+" else o.kind
        for s in o.spellings:
            out[s] = (fld, kind)
    out["--model"] = ("model", "str")
    return out


# Every exact spelling of the options kvplan models: spelling -> (ServingFlags field, value kind).
MODELLED: dict[str, tuple[str, str]] = _modelled()
# Every spelling the default release's `vllm serve` parser accepts exactly (prefixes of them resolve too).
KNOWN_FLAGS = frozenset(serve_options().by_spelling)


def suggest_flag(flag: str, candidates: Iterable[str] | None = None, cutoff: float | None = None) -> str | None:
    """Closest real vLLM flag, for typo findings."""
    pool = sorted(candidates) if candidates is not None else sorted(
        {s for s in KNOWN_FLAGS if s.startswith("--")} | set(REMOVED_FLAGS))
    if cutoff is None:
        cutoff = 0.6 if candidates is not None else 0.75
    m = difflib.get_close_matches(flag, pool, n=1, cutoff=cutoff)
    return m[0] if m else None


def validate_kv_cache_dtype(value: str, version: str | None = None) -> str:
    """`value` if the release offers it as a `--kv-cache-dtype` choice; KvplanInputError naming them otherwise."""
    rel = release(version)
    valid = rel.kv_cache_dtypes
    if value not in valid:
        close = difflib.get_close_matches(value, valid, n=1, cutoff=0.6)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        later = next((r.version for r in known_releases_after(rel) if value in r.kv_cache_dtypes), None)
        when = f": vLLM {rel.version} does not have it (vLLM {later} added it)" if later else ""
        raise KvplanInputError(
            f"invalid --kv-cache-dtype {value!r}{when}.{hint if not later else ''}",
            f"Valid values (vLLM {rel.version}): " + ", ".join(valid) + ".")
    return value


def _added_later(dtype: str | None, version: str | None) -> str | None:
    """The first release after `version` whose `--kv-cache-dtype` values include `dtype` (None: none does, or
    `version` has it)."""
    rel = release(version)
    if dtype is None or dtype in rel.kv_cache_dtypes:
        return None
    return next((r.version for r in known_releases_after(rel) if dtype in r.kv_cache_dtypes), None)


def known_releases_after(rel: Release) -> list[Release]:
    from kvplan.releases import known_releases

    return [r for r in known_releases() if r.key > rel.key]


def split_launch_line(line: str) -> list[str]:
    """Shell-split a pasted launch line (backslash-newline continuations allowed)."""
    check_launch_line(line)
    try:
        return shlex.split(line.replace("\\\n", " "), comments=True)
    except ValueError as e:
        raise KvplanInputError(f"cannot parse the launch line: {e}.", "Check the quotes.") from None


def strip_launcher(argv: Sequence[str]) -> tuple[int, bool]:
    """(how many leading words are the launcher, whether it is `vllm serve`).

    `vllm serve ...` (also `/path/to/vllm serve`), `python -m vllm.entrypoints.openai.api_server ...`
    (or any `vllm.` module), `python -m vllm.entrypoints.cli.main serve ...`.
    """
    args = list(argv)
    if len(args) >= 2 and args[0].rsplit("/", 1)[-1] == "vllm" and args[1] == "serve":
        return 2, True
    if len(args) >= 3 and args[1] == "-m" and args[2].startswith("vllm."):
        if args[3:4] == ["serve"]:  # python -m vllm.entrypoints.cli.main serve ...
            return 4, True
        return 3, False
    return 0, False


# ----------------------------------------------------------------------------- value types
class _TypeError_(Exception):
    """A value the option's type rejects; the message is argparse's text after 'argument NAME: '."""


_HR = re.compile(r"(\d+(?:\.\d+)?)([kKmMgGtT])")
_DEC = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BIN = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def human_readable_int(value: str) -> int:
    """vLLM's human_readable_int: '32k' = 32,000, '1M' = 1,048,576, '25.6k' = 25,600 (no decimals with K/M/G/T)."""
    v = value.strip()
    m = _HR.fullmatch(v)
    if m:
        number, suffix = m.groups()
        if suffix in _DEC:
            return int(float(number) * _DEC[suffix])
        try:
            return int(number) * _BIN[suffix]
        except ValueError:
            raise _TypeError_(f"Decimals are not allowed with binary suffixes like {suffix}. Did you mean to "
                              f"use {number}{suffix.lower()} instead?") from None
    return int(v)


def _expand_json_numbers(val: str) -> str:
    """vLLM expands bare 80m / 1k tokens inside JSON config values (not inside strings)."""
    parts = re.split(r'("(?:[^"\\]|\\.)*")', val)
    for i in range(0, len(parts), 2):
        parts[i] = re.sub(r"\b\d+(?:\.\d+)?[kKmMgGtT]\b", lambda m: str(human_readable_int(m.group())), parts[i])
    return "".join(parts)


def _base_convert(opt: ServeOption, v: str) -> Any:
    k = opt.kind
    if k in ("str", "other"):  # other: a type of an old release kvplan does not convert (any word is taken)
        return v
    if k == "nullable_str":
        return None if v == "None" else v
    if k == "kvs":  # 0.6-0.9 nullable_kvs: "image=16,video=2" -> {"image": 16, "video": 2}
        if not v:
            return None
        return {key: int(val) for key, _, val in (p.partition("=") for p in v.split(","))}
    if k == "str_lower":
        return v.lower().replace("-", "_")
    if k == "int":
        return int(v)
    if k == "float":
        return float(v)
    if k == "human_readable_int":
        return human_readable_int(v)
    if k == "human_readable_int_or_auto":
        s = v.strip()
        return -1 if s == "-1" or s.lower() == "auto" else human_readable_int(s)
    if k == "json_or_kvs" and not re.match(r"(?s)^{.*}$", v):  # 0.8: key=value pairs when not a JSON object
        return {key: int(val) for key, _, val in (p.partition("=") for p in v.split(","))}
    if k == "json_or_int" and v.strip().isdigit():  # 0.9: `-O 3` is a compilation level
        return {"level": int(v)}
    if k in ("json", "json_or_kvs", "json_or_int"):
        return json.loads(_expand_json_numbers(v) if opt.type_name == "parse_dataclass" else v)
    if k == "json_or_str":
        return json.loads(v) if re.match(r"(?s)^\s*{.*}\s*$", v) else v
    if k == "csv_int_or_str":
        return [int(p) if p.isdigit() else p for p in (q.strip() for q in v.split(","))]
    return v


def convert_value(opt: ServeOption, v: str) -> Any:
    """One value through the option's type, worded as argparse/vLLM words a rejection."""
    if opt.type_wrapper == "optional" and v in ("", "None"):
        return None
    try:
        out = _base_convert(opt, v)
    except _TypeError_:
        raise
    except RecursionError:
        raise _TypeError_(f"invalid JSON for {opt.canonical}: the input nests too deeply to read") from None
    except (ValueError, TypeError, OverflowError, json.JSONDecodeError) as e:
        if opt.type_name == "parse_dataclass":  # pydantic validation of the config class
            raise _TypeError_(f"invalid JSON for {opt.canonical} ({getattr(e, 'msg', e)}): {v!r}") from None
        if opt.type_wrapper is not None:
            raise _TypeError_(f"Value {v} cannot be converted to {opt.type_repr}.") from None
        raise _TypeError_(f"invalid {opt.type_name} value: {v!r}") from None
    if opt.type_name == "parse_dataclass" and not isinstance(out, dict):
        raise _TypeError_(f"invalid JSON for {opt.canonical}: expected an object, got {v!r}")
    if opt.choices is not None and out not in opt.choices:
        raise _TypeError_(f"invalid choice: {out!r} (choose from {', '.join(map(repr, opt.choices))})")
    return out


# ----------------------------------------------------------------------------- scanning argv
@dataclass
class FlagUse:
    """One option occurrence: as written, what it resolved to, and the argv indices it spans."""

    written: str                       # the flag part as written after vLLM's preprocessing (dashes)
    index: int                         # argv index of the flag token
    option: ServeOption | None = None
    spelling: str | None = None     # the option spelling the flag resolved to (`--no-enable-prefix-caching`)
    values: list[str] = field(default_factory=list)
    value_indices: list[int] = field(default_factory=list)
    inline: bool = False               # --flag=value / -tp=4 / -O3: the value sits in the flag's token
    synthetic: bool = False            # gathered from dotted keys (--attention-config.backend X)

    @property
    def flag(self) -> str:
        """The option's long spelling when it resolved, else the flag as written."""
        return self.option.canonical if self.option is not None else self.written

    def indices(self) -> list[int]:
        return [self.index] if self.inline else [self.index, *self.value_indices]


@dataclass(frozen=True)
class ScanError:
    """What vLLM's parser exits on (status 2), with argparse's wording."""

    kind: str                          # unknown | ambiguous | invalid_value
    flag: str                          # as written (dashes for underscores), or the stray word
    message: str                       # vLLM's text after 'vllm serve: error: '
    position: int                      # argv index
    suggestion: str | None = None   # closest real option (for a removed flag: the successor vLLM names, if any)
    dest: str | None = None         # the option's dest, for invalid values
    removed_in: str | None = None   # an earlier release accepted the flag; this release removed it
    added_in: str | None = None     # the flag (or, for an invalid value, the value) exists from this release on
    value: str | None = None        # the value rejected, for invalid values


@dataclass
class ScannedArgv:
    """argv as vLLM's parser reads it: options, positionals, converted values, and what it exits on."""

    uses: list[FlagUse]
    positionals: list[int]             # argv indices of positional words (the model, strays)
    model_index: int | None         # argv index of the positional vLLM takes as model_tag
    model: str | None               # that positional's value
    values: dict[str, Any]             # dest -> converted value (last occurrence wins)
    errors: list[ScanError]
    launcher: int = 0                  # leading launcher words skipped


_NEG_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")
_DOTTED_PREFIX = re.compile(r"(?<=--)[^.]*")


def _norm_token(tok: str, whole_key: bool = False) -> str:
    """FlexibleArgumentParser: underscores -> dashes in a --long name, up to the first '.' (and '='); in the
    whole name before '=' in releases that did so (0.8)."""
    if not tok.startswith("--"):
        return tok
    key, eq, value = tok.partition("=")
    if whole_key:
        return key.replace("_", "-") + eq + value
    key = _DOTTED_PREFIX.sub(lambda m: m.group(0).replace("_", "-"), key, count=1)
    return key + eq + value


def _classify(table: ServeOptions, tok: str) -> str:
    """'O' when argparse takes the token for an option, else 'A' (a value / positional)."""
    if not tok or tok[0] != "-" or len(tok) == 1:
        return "A"
    if tok in table.by_spelling:
        return "O"
    if "=" in tok and tok.split("=", 1)[0] in table.by_spelling:
        return "O"
    key = tok.split("=", 1)[0] if tok.startswith("--") else tok
    if any(s.startswith(key) for s in table.order):
        return "O"
    if _NEG_NUMBER.match(tok):
        return "A"
    if " " in tok:
        return "A"
    return "O"


Item = tuple[str, int, bool]
"""A preprocessed token: (token, argv index, the value sits inline in the token)."""
Dotted = dict[str, tuple[dict[str, Any], int, list[int]]]
"""Dotted JSON keys gathered per option: key -> (JSON object, argv index of the first, value indices)."""


def scan_argv(argv: Sequence[str], version: str | None = None) -> ScannedArgv:
    """Read argv (launcher words allowed) as the release's `vllm serve` parser does, keeping argv indices."""
    table = serve_options(version)
    skip, is_serve = strip_launcher(argv)
    items = _preprocess(argv, skip, is_serve, table.preprocess)
    how = table.preprocess
    raw = "dashes" if how.dotted_key_dashes else "raw" if how.dotted_raw else ""
    kept, dotted = _gather_dotted(items, raw) if how.dotted_json else (items, {})
    scan = _Scanner(table, kept)
    scan.run()
    scan.add_dotted(dotted)  # dotted keys come last, as vLLM appends them after everything else
    values = scan.convert_values()
    for i, tok in scan.stray:
        scan.error("unknown", tok, f"unrecognized arguments: {tok}", i)
    return ScannedArgv(uses=scan.uses, positionals=scan.positionals, model_index=scan.model_index, model=scan.model,
                       values=values, errors=scan.errors, launcher=skip)


_CURRENT = Preprocess()
"""The rewriting of the newest releases."""


def _preprocess(argv: Sequence[str], skip: int, is_serve: bool, how: Preprocess = _CURRENT) -> list[Item]:
    """FlexibleArgumentParser's rewriting, as the release does it (`how`): `--flag_name` dashes, `-O3`, and
    `vllm serve --model M` -> M first."""
    items: list[Item] = []
    args = list(argv)
    for i in range(skip, len(args)):
        tok = args[i]
        if tok.startswith("--"):
            items.append((_norm_token(tok, how.dash_whole_key), i, False))
        elif tok.startswith("-O") and tok != "-O" and how.opt_level is not None:
            level = tok[3:] if tok[2:3] == "=" else tok[2:]
            items.append((_opt_level(how.opt_level, level), i, True))
        elif (tok == "-O" and i + 1 < len(args) and args[i + 1] in ("0", "1", "2", "3") and how.opt_level is not None
              and how.opt_level_split):
            items.append((how.opt_level[0], i, False))
            if len(how.opt_level) == 2 and how.opt_level[1] != "3":  # 0.10: `-O 3` -> `-O '{"level": 3}'`
                args[i + 1] = re.sub(r"\b3\b", args[i + 1], how.opt_level[1])
        else:
            items.append((tok, i, False))
    if not is_serve or not how.model_to_front:
        return items
    for j, (tok, i, _) in enumerate(items):  # FlexibleArgumentParser moves `--model M` to the positional
        if tok == "--model" and j + 1 < len(items):
            return [items[j + 1], *items[:j], *items[j + 2:]]
        if tok.startswith("--model="):
            return [(tok.removeprefix("--model="), i, True), *items[:j], *items[j + 1:]]
    return items


def _opt_level(template: tuple[str, ...], level: str) -> str:
    """`-O3` as the release rewrites it, in one token (`--optimization-level=3`)."""
    words = [re.sub(r"\b3\b", level, w) for w in template]
    return "=".join(words) if len(words) == 2 else words[0]


def _gather_dotted(items: list[Item], raw: str = "") -> tuple[list[Item], Dotted]:
    """Dotted JSON keys (--attention-config.backend X, -ac.backend=X, --x.list+ a,b) -> one JSON value each."""
    dotted: Dotted = {}
    kept: list[Item] = []
    j = 0
    while j < len(items):
        tok, i, _ = items[j]
        key_part, eq, value_str = tok.partition("=")
        if not (tok.startswith("-") and "." in tok and not _NEG_NUMBER.match(tok)) or (eq and "." not in key_part):
            kept.append(items[j])
            j += 1
            continue
        vidx = [i]
        if not eq:
            if j + 1 >= len(items):
                kept.append(items[j])  # vLLM itself fails here (IndexError); let argparse matching report it
                j += 1
                continue
            value_str, vidx = items[j + 1][0], [items[j + 1][1]]
            j += 1
        key, value = _dotted_value(key_part, value_str, raw)
        if key not in dotted:
            dotted[key] = ({}, i, [])
        _merge(dotted[key][0], value)
        dotted[key][2].extend(vidx)
        j += 1
    return kept, dotted


def _dotted_value(key_part: str, value_str: str, raw: str = "") -> tuple[str, Any]:
    """`attention-config.backend`, `X` -> ('attention-config', {'backend': X}), the value read as vLLM reads it
    (`raw`, 0.9: the value a string, no `key+` lists; "dashes", 0.9.0: keys with dashes for underscores too)."""
    if raw:
        key, *keys = (key_part.replace("_", "-") if raw == "dashes" else key_part).split(".")
        nested: Any = value_str
        for k in reversed(keys):
            nested = {k: nested}
        return key, nested
    if key_part.endswith("+"):
        key_part = key_part[:-1]
        value_str = json.dumps(value_str.split(","))
    key, *keys = key_part.split(".")
    try:
        value: Any = json.loads(value_str)
    except json.JSONDecodeError:
        try:
            value = human_readable_int(value_str)
        except (ValueError, _TypeError_):
            value = value_str
    for k in reversed(keys):
        value = {k: value}
    return key, value


class _Scanner:
    """argparse's matching over the preprocessed tokens: options, their values, positionals, errors."""

    def __init__(self, table: ServeOptions, kept: list[Item]):
        self.table, self.kept = table, kept
        self.pattern = [_classify(table, t) for t, _, _ in kept]
        self.uses: list[FlagUse] = []
        self.positionals: list[int] = []
        self.errors: list[ScanError] = []
        self.stray: list[tuple[int, str]] = []  # positional words vLLM does not take (after the model)
        self.model_index: int | None = None
        self.model: str | None = None
        self.j = 0

    def error(self, kind: str, flag: str, message: str, index: int, suggestion: str | None = None,
              dest: str | None = None) -> None:
        self.errors.append(ScanError(kind=kind, flag=flag, message=message, position=index, suggestion=suggestion,
                                     dest=dest))

    def unknown(self, written: str, message: str, index: int) -> None:
        """An option the release's parser does not know: removed (and its successor, if vLLM names one),
        added by a later release, or never an option (then the closest spelling of this release)."""
        rel = release(self.table.engine_version)
        gone = rel.removed_in_this_line(written)
        if gone is not None:
            removed_in, successor = gone
            self.errors.append(ScanError(kind="unknown", flag=written, message=message, position=index,
                                         suggestion=successor, removed_in=removed_in))
            return
        added = rel.added_later(written)
        if added is not None:
            self.errors.append(ScanError(kind="unknown", flag=written, message=message, position=index,
                                         added_in=added))
            return
        pool = {s for s in self.table.by_spelling if s.startswith("--")} | set(REMOVED_FLAGS)
        self.error("unknown", written, message, index, suggest_flag(written, pool, cutoff=0.75))

    def run(self) -> None:
        after_dd = False
        while self.j < len(self.kept):
            tok, i, inl = self.kept[self.j]
            self.j += 1
            if tok == "--" and not after_dd:
                after_dd = True
            elif after_dd or self.pattern[self.j - 1] == "A":
                self._positional(i, tok)
            else:
                self._option(tok, i, inl)

    def _positional(self, i: int, tok: str) -> None:
        self.positionals.append(i)
        if self.model_index is None:
            self.model_index, self.model = i, tok
        else:
            self.stray.append((i, tok))

    def _take_value_words(self, use: FlagUse, limit: int | None = None) -> None:
        """The value words after an option (up to `limit`), until the next option."""
        while self.j < len(self.kept) and self.pattern[self.j] == "A" and (limit is None or len(use.values) < limit):
            use.values.append(self.kept[self.j][0])
            use.value_indices.append(self.kept[self.j][1])
            self.j += 1

    def _resolve(self, tok: str) -> tuple[ServeOption | None, str | None, list[str], str, str, str]:
        """(option, spelling, ambiguous candidates, flag as written, '=' if an inline value, that value)."""
        table = self.table
        written, eq, inline_value = tok.partition("=") if "=" in tok else (tok, "", "")
        opt, spelling, ambiguous = table.resolve(tok)
        if opt is None and eq:
            opt, spelling, ambiguous = table.resolve(written)
        elif opt is not None:
            written, eq, inline_value = tok, "", ""
        if opt is None and not ambiguous and len(written) > 2 and not written.startswith("--"):
            # single dash: '-tp4' is '-t' + '4' only when '-t' exists (it does not in vLLM 0.33)
            short = table.by_spelling.get(written[:2])
            if short is not None:
                return short, written[:2], [], written[:2], "=", written[2:]
        return opt, spelling, ambiguous, written, eq, inline_value

    def _option(self, tok: str, i: int, inl: bool) -> None:
        opt, spelling, ambiguous, written, eq, inline_value = self._resolve(tok)
        use = FlagUse(written=written, index=i, inline=bool(eq) or inl, spelling=spelling)
        self.uses.append(use)
        if opt is None:
            self._take_value_words(use)  # its would-be values: not the model, not strays
            if len(ambiguous) > 1:
                self.error("ambiguous", written, f"ambiguous option: {tok if not eq else written + '=' + inline_value} "
                           f"could match {', '.join(ambiguous)}", i, suggest_flag(written, ambiguous))
            else:  # (a removed flag is KV002's, see parse_flags)
                # argparse files the flag and the words after it (until the next option) as unrecognized
                # (kvplan keeps those words as the unknown flag's values, never as the model).
                self.unknown(written, "unrecognized arguments: " + " ".join([tok, *use.values]), i)
            return
        use.option = opt
        problem = self._option_values(use, opt, eq, inline_value)
        if problem is not None:
            self.error("invalid_value", written, f"argument {opt.name}: {problem}", i, dest=opt.dest)
            use.option = None

    def _option_values(self, use: FlagUse, opt: ServeOption, eq: str, inline_value: str) -> str | None:
        """Take the option's values as its nargs says; what argparse says when they are wrong."""
        if eq:
            use.values, use.value_indices = [inline_value], [use.index]
            return f"ignored explicit argument {inline_value!r}" if opt.nargs == 0 else None
        if opt.nargs == 0:
            return None
        if opt.nargs in (None, 1):
            self._take_value_words(use, limit=1)
            return None if use.values else "expected one argument"
        if opt.nargs == "?":
            self._take_value_words(use, limit=1)
        elif opt.nargs == "+":
            self._take_value_words(use)
            return None if use.values else "expected at least one argument"
        return None

    def add_dotted(self, dotted: Dotted) -> None:
        for key, (obj, i, vidx) in dotted.items():
            opt, spelling, ambiguous = self.table.resolve(_norm_token(key))
            use = FlagUse(written=_norm_token(key), index=i, values=[json.dumps(obj)], value_indices=vidx,
                          synthetic=True, spelling=spelling)
            self.uses.append(use)
            if opt is not None:
                use.option = opt
            elif len(ambiguous) > 1:
                self.error("ambiguous", use.written, f"ambiguous option: {use.written} could match "
                           f"{', '.join(ambiguous)}", i, suggest_flag(use.written, ambiguous))
            else:
                self.unknown(use.written, f"unrecognized arguments: {use.written} {json.dumps(obj)}", i)

    def convert_values(self) -> dict[str, Any]:
        """dest -> the value through the option's type (the last occurrence wins; `append` options collect)."""
        values: dict[str, Any] = {}
        for use in self.uses:
            opt = use.option
            if opt is None:
                continue
            try:
                values[opt.dest] = _use_value(opt, use, values)
            except _TypeError_ as e:
                self.errors.append(ScanError(kind="invalid_value", flag=use.written, position=use.index,
                                             message=f"argument {opt.name}: {e}", dest=opt.dest,
                                             value=use.values[0] if use.values else None))
                use.option = None
        return values


def _use_value(opt: ServeOption, use: FlagUse, values: dict[str, Any]) -> Any:
    if opt.nargs == 0:
        return use.spelling not in opt.negative if opt.action == "boolean_optional" else True
    if opt.nargs == "?" and not use.values:
        return opt.const
    if opt.nargs == "+":
        return [convert_value(opt, x) for x in use.values]
    if opt.action == "append":
        return [*values.get(opt.dest, []), convert_value(opt, use.values[0])]
    return convert_value(opt, use.values[0])


def _merge(original: dict[str, Any], update: dict[str, Any]) -> None:
    for k, v in update.items():
        if isinstance(v, dict) and isinstance(original.get(k), dict):
            _merge(original[k], v)
        elif isinstance(v, list) and isinstance(original.get(k), list):
            original[k] += v
        else:
            original[k] = v


# ----------------------------------------------------------------------------- --config YAML
def expand_config_file(argv: Sequence[str], base: Path | None = None) -> list[str]:
    """`--config serve.yaml` in argv -> the file's options in its place, as FlexibleArgumentParser does.

    Keys become `--key` (true -> the bare flag, false -> `--no-key` when that exact spelling exists,
    lists -> the flag and each item, objects -> JSON); they go right after the launcher and the
    positional model, so the command line's own flags, read later, win. Only the kvplan CLI calls this
    (the library and the service never open files named inside flags).
    """
    args = list(argv)
    if "--config" not in args:
        return args
    if args.count("--config") > 1:
        raise KvplanInputError("more than one --config file in the launch line.",
                               "Keep one --config (vLLM refuses more).")
    i = args.index("--config")
    if i == len(args) - 1:
        raise KvplanInputError("--config names no file.", "Pass --config serve.yaml.")
    name = args[i + 1]
    if name.split(".")[-1] not in ("yaml", "yml"):
        raise KvplanInputError(f"--config {name}: vLLM reads only YAML config files (.yaml/.yml).",
                               "Convert the file to YAML or pass the options on the command line.")
    path = (base or Path.cwd()) / name
    try:
        import yaml
        config = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise KvplanInputError(f"--config file not found: {path}.", "Pass the path of the vLLM YAML config.") from None
    except (OSError, UnicodeDecodeError) as e:
        raise KvplanInputError(f"cannot read --config file {path}: {e}.", "Check the file.") from None
    except yaml.YAMLError as e:
        raise KvplanInputError(f"malformed YAML in --config file {path}: {str(e).splitlines()[0]}.",
                               "Fix the YAML (vLLM would fail to load it too).") from None
    if not isinstance(config, dict):
        raise KvplanInputError(f"--config file {path} holds no mapping of options.",
                               "Write one `option: value` per line, e.g. `kv-cache-dtype: fp8`.")
    extra: list[str] = []
    for key, value in config.items():
        if isinstance(value, bool):
            if value:
                extra.append(f"--{key}")
            elif f"--no-{key}" in KNOWN_FLAGS:
                extra.append(f"--no-{key}")
        elif isinstance(value, list):
            if value:
                extra += [f"--{key}", *map(str, value)]
        elif isinstance(value, dict):
            extra += [f"--{key}", json.dumps(value)]
        else:
            extra += [f"--{key}", str(value)]
    rest = args[:i] + args[i + 2:]
    skip, _ = strip_launcher(rest)
    at = skip + 1 if len(rest) > skip and not rest[skip].startswith("-") else skip
    return rest[:at] + extra + rest[at:]


# ----------------------------------------------------------------------------- ServingFlags
class FlagValueError(KvplanInputError):
    """A value of one engine flag kvplan cannot plan with (vLLM rejects it too); `flag` is the option's
    canonical spelling, so a caller can point at it without reading the message."""

    def __init__(self, flag: str, problem: str, fix: str | None = None, value: str | None = None):
        super().__init__(problem, fix)
        self.flag = flag
        self.value = value  # the value given, when one was given and is what vLLM rejects


@input_boundary(fix="Pass a plausible value (limits: docs/limits.md).")
def parse_flags(argv: Sequence[str], version: str | None = None) -> ServingFlags:
    """Parse engine flags as the release's parser does (None: the default release); the leading
    `vllm serve` / `python -m vllm...` part is skipped."""
    check_argv(argv)  # argument count and size, before anything is parsed
    table = serve_options(version)
    scan = scan_argv(argv, table.engine_version)
    later_dtype = None
    for e in scan.errors:  # a value kvplan needs to plan with, which vLLM's parser rejects: exit 2 like vLLM
        if e.kind == "invalid_value" and e.dest == "kv_cache_dtype" and _added_later(e.value, version) is not None:
            later_dtype = e  # a dtype a later release has: KV005 reports it (as KV004 a later flag)
            continue
        if e.kind == "invalid_value" and e.dest in MODELLED_DESTS:
            opt = table.by_dest[e.dest]
            raise FlagValueError(opt.canonical, e.message if e.message.endswith((".", "?")) else e.message + ".",
                                 _value_fix(opt, table.engine_version))
    fields = _modelled_fields(scan)
    if later_dtype is not None:
        fields.update(kv_cache_dtype=later_dtype.value, kv_cache_dtype_explicit=True)
    _check_values(fields, table.engine_version)
    removed = {u.written for u in scan.uses if u.option is None and u.written in REMOVED_FLAGS}
    if "--calculate-kv-scales" in removed or scan.values.get("calculate_kv_scales"):  # (accepted before 0.27)
        fields["calculate_kv_scales"] = True
    if scan.values.get("enforce_eager"):  # read, not modelled: a bad value stays a KV007 finding
        fields["enforce_eager"] = True  # no CUDA graph memory in the GPU budget
    if scan.values.get("enable_lora"):  # read, not modelled: LoRA profiling memory is not estimated (KV505)
        fields["enable_lora"] = True
    kv_bytes = scan.values.get("kv_cache_memory_bytes")
    if isinstance(kv_bytes, int) and not isinstance(kv_bytes, bool) and kv_bytes > 0:
        fields["kv_cache_memory_bytes"] = kv_bytes  # the KV budget itself: vLLM skips profiling
    errors = [e for e in scan.errors if not (e.kind == "unknown" and e.flag in REMOVED_FLAGS) and e is not later_dtype]
    fields["unknown_flags"] = tuple(e.flag for e in errors if e.kind == "unknown")
    fields["flag_errors"] = tuple(FlagError(kind=e.kind, flag=e.flag, message=e.message,  # type: ignore[arg-type]
                                            suggestion=e.suggestion, removed_in=e.removed_in,
                                            added_in=e.added_in) for e in errors)
    return ServingFlags(**fields)


def _modelled_fields(scan: ScannedArgv) -> dict[str, Any]:
    """ServingFlags fields from the values of the options kvplan models."""
    fields: dict[str, Any] = {}
    v = scan.values
    if scan.model:
        fields["model"] = scan.model
    elif v.get("model") is not None:
        fields["model"] = v["model"]
    for dest, fld in MODELLED_DESTS.items():
        if dest in v and v[dest] is not None:
            fields[fld] = v[dest]
    if "kv_cache_dtype_skip_layers" in fields:
        fields["kv_cache_dtype_skip_layers"] = tuple(fields["kv_cache_dtype_skip_layers"])
    if fields.get("max_model_len") == -1:  # 'auto' / -1: vLLM picks the largest length that fits
        del fields["max_model_len"]
    if "kv_cache_dtype" in fields:
        fields["kv_cache_dtype_explicit"] = True
    spec = v.get("speculative_config")
    if isinstance(spec, dict) and isinstance(spec.get("num_speculative_tokens"), int) \
            and not isinstance(spec.get("num_speculative_tokens"), bool):
        fields["num_speculative_tokens"] = spec["num_speculative_tokens"]
    if isinstance(spec, dict) and isinstance(spec.get("method"), str):
        fields["speculative_method"] = spec["method"]
    if isinstance(spec, dict) and isinstance(spec.get("model"), str) and spec["model"]:
        fields["speculative_model"] = spec["model"]
    if isinstance(spec, dict) and isinstance(spec.get("kv_cache_dtype"), str):
        fields["speculative_kv_cache_dtype"] = spec["kv_cache_dtype"]
    return fields


# Options vLLM's config validation requires to be at least 1: dest -> flag.
_POSITIVE = {"tensor_parallel_size": "--tensor-parallel-size", "pipeline_parallel_size": "--pipeline-parallel-size",
             "block_size": "--block-size", "max_num_batched_tokens": "--max-num-batched-tokens",
             "max_num_seqs": "--max-num-seqs", "max_model_len": "--max-model-len"}


def _check_values(fields: dict[str, Any], version: str | None = None) -> None:
    """What vLLM's parser takes but its config validation refuses: an input error, as vLLM exits on it."""
    if "hf_overrides" in fields and not isinstance(fields["hf_overrides"], dict):
        raise FlagValueError("--hf-overrides", f"--hf-overrides must be a JSON object, got {fields['hf_overrides']!r}.",
                             """Pass e.g. --hf-overrides '{"max_position_embeddings": 65536}'.""")
    if "kv_cache_dtype" in fields and _added_later(fields["kv_cache_dtype"], version) is None:
        try:
            validate_kv_cache_dtype(fields["kv_cache_dtype"], version)
        except KvplanInputError as e:
            raise FlagValueError("--kv-cache-dtype", e.problem, e.fix, value=fields["kv_cache_dtype"]) from None
    for dest, flag in _POSITIVE.items():
        if dest in fields and fields[dest] < 1:
            raise FlagValueError(flag, f"{flag} must be at least 1, got {fields[dest]}.", f"Pass a positive {flag}.")
    if "gpu_memory_utilization" in fields and not 0 < fields["gpu_memory_utilization"] <= 1:
        raise FlagValueError("--gpu-memory-utilization",
                             f"--gpu-memory-utilization must be in (0, 1], got {fields['gpu_memory_utilization']}.",
                             "Pass e.g. --gpu-memory-utilization 0.9.")


_EXAMPLES = {"kv_cache_dtype": "fp8", "kv_cache_dtype_skip_layers": "sliding_window 0", "dtype": "bfloat16",
             "tensor_parallel_size": "2", "pipeline_parallel_size": "2", "max_model_len": "32768 (or 32k)",
             "block_size": "16", "gpu_memory_utilization": "0.9", "max_num_batched_tokens": "8192 (or 8k)",
             "max_num_seqs": "256", "attention_backend": "FLASHINFER",
             "attention_config": """'{"use_prefill_query_quantization": true}' (quoted for the shell)""",
             "quantization": "fp8"}


def _value_fix(opt: ServeOption, version: str) -> str:
    if opt.choices is not None:
        return f"Valid values (vLLM {version}): " + ", ".join(map(str, opt.choices)) + "."
    return f"Pass e.g. {opt.canonical} {_EXAMPLES.get(opt.dest, '<value>')}."


# ----------------------------------------------------------------------------- every form of flags
FlagsInput = ServingFlags | Sequence[str] | str | Mapping[str, Any] | None
"""What `kvplan.compile` takes as flags: ServingFlags, an argv list, a launch line, or vLLM field names."""


def flags_from(flags: FlagsInput, version: str | None = None) -> ServingFlags:
    """Accept ServingFlags, an argv list, a pasted launch line, or a dict of vLLM field names; read the way
    release `version` reads them (None: the default release)."""
    if flags is None:
        return ServingFlags()
    if isinstance(flags, ServingFlags):
        return flags
    if isinstance(flags, str):
        return parse_flags(split_launch_line(flags), version)
    if isinstance(flags, Mapping):
        return parse_flags(_argv_of_fields(flags), version)
    return parse_flags(list(flags), version)


def _argv_of_fields(fields: Mapping[str, Any]) -> list[str]:
    """vLLM field names -> argv: lists spread, objects as JSON, True the bare flag, False its --no- form."""
    argv: list[str] = []
    for k, v in fields.items():
        flag = "--" + k.replace("_", "-")
        if isinstance(v, (list, tuple)):
            argv += [flag, *map(str, v)]
        elif isinstance(v, dict):
            argv += [flag, json.dumps(v)]
        elif v is True:
            argv.append(flag)
        elif v is False:  # a boolean option turned off: its --no- form, as vLLM's config files do
            if "--no-" + flag[2:] in KNOWN_FLAGS:
                argv.append("--no-" + flag[2:])
        elif v is not None:
            argv += [flag, str(v)]
    return argv
