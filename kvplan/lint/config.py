"""Lint settings from `kvplan.toml` or `pyproject.toml [tool.kvplan]`, discovered like ruff does.

Each linted file uses the nearest folder above it holding a `kvplan.toml`, or a `pyproject.toml`
with a `[tool.kvplan]` table; `--config PATH` names one for the whole run. Lint
keys may sit in the top table (`[tool.kvplan]`, shared with other kvplan commands, so unknown keys
there are left alone) or in its `lint` sub-table (`[tool.kvplan.lint]`, checked strictly, and it
wins over the top table):

    [tool.kvplan.lint]
    engine-version = "0.33.0"
    gpu = "h100"                       # default GPU when a manifest names none
    fail-level = "error"
    select = ["KV"]                    # code prefixes
    ignore = ["KV306"]
    exclude = ["charts/*/tests/*"]
    per-file-ignores = { "deploy/legacy/*.yaml" = ["KV401"] }
    kv-budget-gib = 40                 # KV memory per GPU, instead of estimating it from weights
    hub = true                         # resolve Hugging Face ids via the HF cache and Hub (false: air-gapped)
    file-timeout = 5                   # seconds per file (KV822 when over; 0 = no limit)
    [tool.kvplan.lint.models]
    "meta-llama/Meta-Llama-3.1-8B" = "models/llama-3.1-8b/config.json"
    "/models/qwen*" = { config = "models/qwen3-8b", weight-gib = 15.3 }
"""
from __future__ import annotations

import difflib
import sys
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from kvplan.errors import KvplanInputError
from kvplan.ingest.limits import read_toml
from kvplan.model.limits import LINT_FILE_TIMEOUT_S
from kvplan.releases import DEFAULT_ENGINE_VERSION

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10 needs the backport (pyproject: tomli; python_version < "3.11")
    import tomli as tomllib



def engine_spec(version: str) -> str:
    """`engine-version` ("0.33.0", or "vllm==0.33.0") as an `--engine` value."""
    v = version.strip()
    return v if "==" in v else f"vllm=={v}"


def _kebab(name: str) -> str:
    return name.replace("_", "-")


class _Cfg(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", alias_generator=_kebab, populate_by_name=True,
                              use_attribute_docstrings=True)


class ModelEntry(_Cfg):
    """Where a served model's config lives, and optionally its weight size (for KV memory findings)."""

    config: str
    """config.json, or a checkpoint folder holding one (relative to the config file)."""
    weight_gib: float | None = Field(default=None, ge=0, le=1 << 20)
    """Checkpoint weight size in GiB (all ranks together); else read from *.safetensors or the bundled index."""


class LintConfig(_Cfg):
    """Settings of `kvplan lint`."""

    engine_version: str = DEFAULT_ENGINE_VERSION
    """vLLM release the deployment runs (kvplan models 0.18 to 0.33; see `kvplan plan --engine`)."""
    gpu: str | None = None
    """Default GPU profile for launches whose manifest does not say (node selectors win)."""
    fail_level: Literal["error", "warning", "info"] = "error"
    """Exit 1 when a finding is at or above this severity."""
    select: list[str] = Field(default_factory=list)
    """Code prefixes to report (empty: all)."""
    ignore: list[str] = Field(default_factory=list)
    """Code prefixes never to report."""
    exclude: list[str] = Field(default_factory=list)
    """Glob patterns (relative to the config file) of files and folders to skip when walking."""
    per_file_ignores: dict[str, list[str]] = Field(default_factory=dict)
    """Glob pattern -> code prefixes ignored in matching files."""
    models: dict[str, str | ModelEntry] = Field(default_factory=dict)
    """Served model (id, path or glob) -> config.json / checkpoint folder, or a table with config and weight-gib."""
    kv_budget_gib: float | None = Field(default=None, gt=0, le=1 << 20)
    """KV cache memory per GPU in GiB; when unset it is estimated from GPU memory and weight size."""
    hub: bool = True
    """Resolve Hugging Face model ids through the Hugging Face cache and Hub (false: air-gapped; KV804 says so)."""
    file_timeout: float = Field(default=LINT_FILE_TIMEOUT_S, ge=0)
    """Seconds one file may take to lint (0: no limit); a file over it is finding KV822 and the next file goes on."""
    strict: bool = False
    """An architecture not verified against vLLM 0.33, or config keys that look like layer geometry but
    were not used (KV604), is an error (as `kvplan lint --strict`, `kvplan plan --strict`)."""


_TOP_KEYS = {_kebab(n) for n in LintConfig.model_fields} | set(LintConfig.model_fields)


class LoadedConfig:
    """A LintConfig plus where it came from (mapping paths resolve against `root`)."""

    def __init__(self, config: LintConfig, path: Path | None):
        self.config = config
        self.path = path
        self.root = path.parent if path else Path.cwd()
        self.offline = False
        """`kvplan lint --offline`: no Hub resolution for this run (set by the runner)."""
        self.strict = config.strict
        """`kvplan lint --strict` or `strict = true`: KV604 is an error (the runner ORs the CLI option in)."""


def find_config(start: Path) -> Path | None:
    """The nearest kvplan.toml, or pyproject.toml with [tool.kvplan], from `start` upwards."""
    d = start if start.is_dir() else start.parent
    d = d.resolve()
    for folder in (d, *d.parents):
        k = folder / "kvplan.toml"
        if k.is_file():
            return k
        pp = folder / "pyproject.toml"
        if pp.is_file():
            try:
                if "kvplan" in read_toml(pp).get("tool", {}):
                    return pp
            except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
                continue
    return None


def load_config(path: Path | None) -> LoadedConfig:
    """Read and validate; every problem is a KvplanInputError (exit 2) naming the file and key."""
    if path is None:
        return LoadedConfig(LintConfig(), None)
    try:
        doc = read_toml(path)  # size and nesting limits (docs/limits.md)
    except FileNotFoundError:
        raise KvplanInputError(f"config file not found: {path}.",
                               "Pass an existing kvplan.toml or pyproject.toml to --config.") from None
    except (OSError, UnicodeDecodeError) as e:
        raise KvplanInputError(f"cannot read config file {path}: {e}.", "Check the path and permissions.") from None
    except tomllib.TOMLDecodeError as e:
        raise KvplanInputError(f"{path} is not valid TOML: {e}.", "Fix the TOML syntax.") from None
    if path.name == "pyproject.toml":
        top = doc.get("tool", {}).get("kvplan", {})
        where, sub = "[tool.kvplan]", "[tool.kvplan.lint]"
    else:
        top, where, sub = doc, "kvplan.toml", "[lint]"
        if isinstance(doc.get("tool"), dict) and "kvplan" in doc["tool"]:
            # pyproject.toml's spelling in a kvplan.toml would be ignored without a word (as ruff.toml's [lint])
            raise KvplanInputError(f"{path} has a [tool.kvplan] table: that is pyproject.toml's spelling, "
                                   "which kvplan.toml does not read.",
                                   "In kvplan.toml write the keys at the top level or under [lint] "
                                   "([tool.kvplan.lint] -> [lint]).")
    if not isinstance(top, dict):
        raise KvplanInputError(f"{where} in {path} must be a table.", "See docs/lint.md for the keys.")
    lint = top.get("lint", {})
    if not isinstance(lint, dict):
        raise KvplanInputError(f"{sub} in {path} must be a table.", "See docs/lint.md for the keys.")
    merged: dict[str, Any] = {k: v for k, v in top.items() if k in _TOP_KEYS}
    for k in lint:
        if k not in _TOP_KEYS:
            valid = sorted(_kebab(n) for n in LintConfig.model_fields)
            close = difflib.get_close_matches(k, valid, n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise KvplanInputError(f"unknown key {k!r} in {sub} of {path}.{hint}",
                                   "Valid keys: " + ", ".join(valid) + ".")
    merged.update(lint)
    try:
        cfg = LintConfig.model_validate(merged)
    except ValidationError as e:
        err = e.errors()[0]
        loc = ".".join(str(x) for x in err["loc"])
        raise KvplanInputError(f"invalid {where} setting {loc!r} in {path}: {err['msg']}.",
                               "See docs/lint.md for the keys and their types.") from None
    from kvplan.backends.capabilities import EngineVersion
    from kvplan.releases import find_release, known_releases
    try:
        ev = EngineVersion.parse(engine_spec(cfg.engine_version))
        known = ev.engine == "vllm" and ev.version is not None and find_release(ev.version) is not None
    except KvplanInputError:
        known = False
    if not known:
        rels = known_releases()
        raise KvplanInputError(f"engine-version {cfg.engine_version!r} in {path} is not a vLLM release kvplan knows "
                               f"({rels[0].version} to {rels[-1].version}; `kvplan engines` lists them).",
                               f'Set engine-version to the release you deploy, e.g. "{DEFAULT_ENGINE_VERSION}".'
                               ) from None
    return LoadedConfig(cfg, path)
