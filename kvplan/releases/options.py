"""One release's `vllm serve` option table: every spelling, how argparse matches it, what it takes.

Rows are generated from the release's own parser (scripts/gen_vllm_release.py) into
`kvplan/data/vllm/options/<id>.json`; this module only reads them.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Preprocess", "ServeOption", "ServeOptions", "load_options"]


@dataclass(frozen=True)
class ServeOption:
    """One `vllm serve` option, as the release's parser declares it."""

    dest: str
    option_strings: tuple[str, ...]      # the visible spellings (argparse names the option by these)
    spellings: tuple[str, ...]           # every spelling the parser matches, hidden --no-<name> forms included
    negative: frozenset[str]             # spellings that set a boolean option to False
    nargs: Any                           # None (one value), 0 (a flag), '?', '+'
    # flag | str | str_lower | nullable_str | int | float | human_readable_int[_or_auto] | json | json_or_str
    # | json_or_kvs | json_or_int | kvs | csv_int_or_str | other (a type kvplan does not convert: any word taken)
    kind: str
    type_name: str | None             # argparse's name of the type function ("invalid <type_name> value")
    type_wrapper: str | None          # vLLM's optional_type / parse_type wrapper, which words errors itself
    type_repr: str | None             # repr of the wrapped type, as those wrappers print it
    choices: tuple[Any, ...] | None
    group: str                           # engine | frontend | serve
    action: str
    const: Any = None
    default: Any = None                  # the parser's default (None where it has none or it is not plain data)
    deprecated: bool = False
    deprecation_help: str | None = None  # the help text where it speaks of deprecation (names a successor)

    @property
    def name(self) -> str:
        """argparse's name of the option in error messages: the visible spellings joined by '/'."""
        return "/".join(self.option_strings)

    @property
    def canonical(self) -> str:
        """The long spelling kvplan reports the option by (e.g. '--tensor-parallel-size' for '-tp')."""
        return next((s for s in self.option_strings if s.startswith("--")), self.option_strings[0])


@dataclass(frozen=True)
class Preprocess:
    """How the release's FlexibleArgumentParser rewrites argv before argparse sees it (read from its own output
    on probe argv at generation time, `preprocess` in the option table)."""

    dotted_json: bool = True
    """`--attention-config.backend X` is gathered into `--attention-config '{"backend": "X"}'` (else passed on)."""
    dash_whole_key: bool = False
    """Underscores become dashes in the whole key, dots included (else up to the first '.')."""
    opt_level: tuple[str, ...] | None = ("--optimization-level", "3")
    """What `-O3` becomes, with "3" standing for the level; None: passed on (argparse reads `-O3` itself)."""
    opt_level_split: bool = True
    """`-O 3` is rewritten like `-O3` (else passed on)."""
    model_to_front: bool = True
    """`vllm serve ... --model M` becomes `vllm serve M ...`."""
    dotted_raw: bool = False
    """Dotted values stay strings, with no `key+` lists (0.9.0, 0.9.1)."""
    dotted_key_dashes: bool = False
    """Dotted keys get dashes for underscores too (0.9.0)."""

    @classmethod
    def from_probes(cls, probes: dict[str, list[str]] | None) -> Preprocess:
        if not probes:
            return cls()
        dotted = probes.get("dotted", [])[2:]
        level = probes.get("opt_level", [])[2:]
        return cls(dotted_json=len(dotted) == 2 and dotted[0] == "--a-b" and dotted[1].startswith("{"),
                   dotted_raw=dotted[1:] in (['{"c-d": "1"}'], ['{"c_d": "1"}']),
                   dotted_key_dashes=dotted[1:] == ['{"c-d": "1"}'],
                   dash_whole_key=dotted[:1] == ["--a-b.c-d"],
                   opt_level=None if level == ["-O3"] else tuple(level),
                   opt_level_split=probes.get("opt_level_split", [])[2:] != ["-O", "3"],
                   model_to_front=probes.get("model_flag", ["", ""])[1:2] == ["m"])


@dataclass(frozen=True)
class ServeOptions:
    """A release's `vllm serve` option table."""

    engine_version: str
    options: tuple[ServeOption, ...]
    by_spelling: dict[str, ServeOption]
    order: tuple[str, ...]               # spellings in registration order (argparse lists ambiguous matches so)
    by_dest: dict[str, ServeOption]
    allow_abbrev: bool = True
    preprocess: Preprocess = Preprocess()
    model_required: bool = False         # `vllm serve` exits without a positional model (0.6 to 0.8)

    def resolve(self, written: str) -> tuple[ServeOption | None, str | None, list[str]]:
        """(option, spelling matched, ambiguous candidates) for a flag as argparse matches it."""
        if written in self.by_spelling:
            return self.by_spelling[written], written, []
        if len(written) < 2 or not self.allow_abbrev:
            return None, None, []
        # allow_abbrev: every spelling the flag is a prefix of (for '-x' too: '-d' is a prefix of '-dp', '-dcp', ...)
        hits = [s for s in self.order if s.startswith(written)]
        if len(hits) == 1:
            return self.by_spelling[hits[0]], hits[0], []
        return None, None, hits


def load_options(path: Path, engine_version: str) -> ServeOptions:
    """Read one generated option table."""
    data = json.loads(path.read_text())
    options = []
    for row in data["options"]:
        spellings = tuple(row["option_strings"]) + tuple(row["hidden_option_strings"])
        options.append(ServeOption(
            dest=row["dest"], option_strings=tuple(row["option_strings"]), spellings=spellings,
            negative=frozenset(row["negative_option_strings"]), nargs=row["nargs"], kind=row["kind"],
            type_name=row["type_name"], type_wrapper=row["type_wrapper"], type_repr=row["type_repr"],
            choices=tuple(row["choices"]) if row["choices"] is not None else None, group=row["group"],
            action=row["action"], const=row.get("const"), default=row.get("default"),
            deprecated=bool(row.get("deprecated")), deprecation_help=row.get("deprecation_help")))
    by_spelling = {s: o for o in options for s in o.spellings}
    return ServeOptions(engine_version=engine_version, options=tuple(options), by_spelling=by_spelling,
                        order=tuple(data["registration_order"]), by_dest={o.dest: o for o in options},
                        allow_abbrev=bool(data.get("allow_abbrev", True)),
                        preprocess=Preprocess.from_probes(data.get("preprocess")),
                        model_required=any(p["dest"] == "model_tag" and p["nargs"] is None and p["required"]
                                           for p in data.get("positionals", [])))
