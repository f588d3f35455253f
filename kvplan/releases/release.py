"""The vLLM releases kvplan knows, and the one object that says what release R accepts and decides.

Everything here is read from data generated out of each release's own wheel by
scripts/gen_vllm_release.py (kvplan/data/vllm/): `releases.json` names, per release, the
content-addressed tables it uses (`options/`, `registry/`, `facts/`, identical tables stored once);
`history.json` says, per option spelling, which releases accept it and, for a removed one, the
release that removed it and the successor vLLM's own help text names; `model_types.json` (with
`config_types/` and `transformers/`) the config model types each release loads. A table is read the first time
a caller asks for it, for the release asked for only.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any

from kvplan.errors import KvplanInputError
from kvplan.releases.options import ServeOptions, load_options

__all__ = ["DATA_DIR", "ConfigLoading", "OptionHistory", "Release", "default_version", "find_release", "known_releases",
           "newest_release", "option_history", "release", "release_key", "spellings_of_any_release"]

DATA_DIR = Path(__file__).resolve().parents[1] / "data" / "vllm"

ReleaseKey = tuple[int, ...]


def release_key(version: str) -> ReleaseKey:
    """'0.6.1.post2' -> (0, 6, 1, 0, 2); '0.10.1.1' -> (0, 10, 1, 1, 0): the order of pip's versions."""
    main, _, post = version.partition(".post")
    nums = [int(x) for x in re.findall(r"\d+", main)[:4]]
    nums += [0] * (4 - len(nums))
    return (*nums, int(post or 0))


@lru_cache(maxsize=1)
def _index() -> dict[str, Any]:
    return json.loads((DATA_DIR / "releases.json").read_text())


@lru_cache(maxsize=1)
def _model_types_index() -> dict[str, Any]:
    path = DATA_DIR / "model_types.json"
    return json.loads(path.read_text()) if path.is_file() else {"releases": {}}


@lru_cache(maxsize=1)
def _history() -> dict[str, Any]:
    return json.loads((DATA_DIR / "history.json").read_text())


def default_version() -> str:
    """The release kvplan models when none is named (`releases.json` "default")."""
    return str(_index()["default"])


@dataclass(frozen=True)
class OptionHistory:
    """Which releases accept one option spelling, and what replaced it once it went."""

    spelling: str
    accepted: tuple[tuple[str, str], ...]
    """Runs of consecutive known releases that accept it: ((first, last), ...)."""
    removed_in: str | None
    """The release after the last one that accepts it (None: the newest release accepts it)."""
    successor: str | None
    """The option vLLM's deprecation help names instead (None: vLLM names none)."""

    @property
    def first(self) -> str:
        return self.accepted[0][0]


def option_history(spelling: str) -> OptionHistory | None:
    """The history of a spelling some known release accepts exactly; None if no release ever did."""
    row = _history()["options"].get(spelling)
    if row is None:
        return None
    return OptionHistory(spelling=spelling, accepted=tuple((a, b) for a, b in row["accepted"]),
                         removed_in=row.get("removed_in"), successor=row.get("successor"))


def spellings_of_any_release() -> frozenset[str]:
    """Every option spelling at least one known release accepts exactly."""
    return frozenset(_history()["options"])


@dataclass(frozen=True)
class ConfigLoading:
    """What a release loads a config.json with (vllm/transformers_utils/config.py::HFConfigParser.parse): vLLM's
    own config class for the model_type (`_CONFIG_REGISTRY`), else the AutoConfig of the transformers release a
    user of it gets (the newest one its requirement allows: what `pip install vllm==X` installs)."""

    transformers_version: str
    transformers_requirement: str
    """The release's `Requires-Dist` specifier for transformers, e.g. `<5.23.0,>=5.16.1`."""
    vllm_config_model_types: frozenset[str]
    transformers_model_types: frozenset[str]
    transformers_model_classes: frozenset[str]
    """Model classes that transformers release exports (what vLLM's Transformers backend can build by name)."""
    vllm_config_classes: tuple[tuple[str, str], ...] | None = None
    """(model type, class name) of `_CONFIG_REGISTRY`: the class vLLM's own registry loads each model type with
    (0.33's minimax_m3_vl: MiniMaxM3Config; 0.34's: MiniMaxM3VLConfig, transformers'). None: the release's
    table was generated before the names were recorded (scripts/gen_vllm_release.py --model-types)."""

    def loads(self, model_type: str) -> bool:
        return model_type in self.vllm_config_model_types or model_type in self.transformers_model_types


@dataclass(frozen=True)
class Release:
    """One vLLM release: what its `vllm serve` accepts and the defaults it decides with.

    Ask it, never a release number: `release("0.28.0").options.resolve("--dev")`,
    `.kv_cache_dtypes`, `.quantization_methods`, `.architectures`, `.attention_backends`, `.defaults`.
    """

    version: str
    """As the package index spells it: `0.34.0`, `0.6.1.post2`."""
    entry: dict[str, Any]

    @property
    def key(self) -> ReleaseKey:
        return release_key(self.version)

    @property
    def version_tuple(self) -> tuple[int, int, int]:
        k = self.key
        return k[0], k[1], k[2]

    @property
    def minor(self) -> str:
        return f"{self.key[0]}.{self.key[1]}"

    @cached_property
    def options(self) -> ServeOptions:
        """The `vllm serve` option table generated from this release's parser."""
        return load_options(DATA_DIR / "options" / f"{self.entry['options']}.json", self.version)

    @cached_property
    def _facts(self) -> dict[str, Any]:
        return dict(json.loads((DATA_DIR / "facts" / f"{self.entry['facts']}.json").read_text()))

    @cached_property
    def _registry(self) -> dict[str, Any]:
        return dict(json.loads((DATA_DIR / "registry" / f"{self.entry['registry']}.json").read_text()))

    @property
    def kv_cache_dtypes(self) -> tuple[str, ...]:
        """`--kv-cache-dtype` choices, in vLLM's order."""
        return tuple(self._facts.get("kv_cache_dtypes") or ())

    @property
    def quantization_methods(self) -> tuple[str, ...]:
        """`QUANTIZATION_METHODS`: the `--quantization` values and checkpoint `quant_method`s vLLM loads."""
        return tuple(self._facts.get("quantization_methods") or ())

    @property
    def attention_backends(self) -> tuple[str, ...]:
        """Names of the release's attention backend enum (`--attention-backend` values)."""
        return tuple(self._facts.get("attention_backends", {}).get("names") or ())

    @property
    def defaults(self) -> dict[str, Any]:
        """Defaults that feed a plan: `parser` (the option defaults), `config` (CacheConfig, SchedulerConfig,
        EngineArgs field defaults) and `max_model_len_auto` (whether `--max-model-len auto` is taken)."""
        return dict(self._facts.get("defaults") or {})

    def parser_default(self, dest: str) -> Any:
        """The parser's default of one option (None where it has no default or no such option)."""
        return self.defaults.get("parser", {}).get(dest)

    @property
    def architectures(self) -> frozenset[str]:
        """Every architecture name of the release's model registry."""
        tables = self._registry.get("tables", {})
        names = tables.get("vllm_models")
        if names is None:  # releases whose registry has no union table
            names = [a for t, v in tables.items() if not t.startswith("transformers") for a in v]
        return frozenset(names)

    @property
    def previously_supported(self) -> dict[str, str]:
        """Architectures the release refuses, with the last release that supported them."""
        return dict(self._registry.get("previously_supported") or {})

    @cached_property
    def config_loading(self) -> ConfigLoading | None:
        """The model types this release loads a config.json with (None: not generated for it, before 0.18)."""
        entry = _model_types_index()["releases"].get(self.version)
        if entry is None:
            return None
        own = json.loads((DATA_DIR / "config_types" / f"{entry['vllm_config']}.json").read_text())
        tf = json.loads((DATA_DIR / "transformers" / f"{entry['transformers']}.json").read_text())
        classes = own.get("classes")
        return ConfigLoading(transformers_version=str(entry["transformers"]),
                             transformers_requirement=str(entry["transformers_requirement"]),
                             vllm_config_model_types=frozenset(own["model_types"]),
                             transformers_model_types=frozenset(tf["model_types"]),
                             transformers_model_classes=frozenset(tf["model_classes"]),
                             vllm_config_classes=tuple(sorted(classes.items())) if isinstance(classes, dict)
                             else None)

    def accepts(self, spelling: str) -> bool:
        """True if the release's parser takes this spelling exactly (not as a prefix)."""
        return spelling in self.options.by_spelling

    def removed(self, spelling: str) -> OptionHistory | None:
        """The spelling's history if an earlier release accepted it and this one does not."""
        if self.accepts(spelling):
            return None
        h = option_history(spelling)
        if h is None or release_key(h.first) > self.key:
            return None
        return h

    def added_later(self, spelling: str) -> str | None:
        """The first later release that accepts a spelling this one lacks (None: no later release does)."""
        if self.accepts(spelling):
            return None
        h = option_history(spelling)
        if h is None:
            return None
        return next((a for a, _ in h.accepted if release_key(a) > self.key), None)

    def removed_in_this_line(self, spelling: str) -> tuple[str, str | None] | None:
        """(release that removed it, successor) for a spelling an earlier release accepted, as of this release."""
        h = self.removed(spelling)
        if h is None:
            return None
        earlier = [b for _, b in h.accepted if release_key(b) < self.key]
        if not earlier:
            return None
        last = earlier[-1]
        versions = [r.version for r in known_releases()]
        removed_in = versions[versions.index(last) + 1]
        return removed_in, h.successor if removed_in == h.removed_in else None


@lru_cache(maxsize=1)
def known_releases() -> tuple[Release, ...]:
    """Every release kvplan has data for, oldest first."""
    rel = _index()["releases"]
    return tuple(Release(v, rel[v]) for v in sorted(rel, key=release_key))


def newest_release() -> Release:
    return known_releases()[-1]


@lru_cache(maxsize=64)
def find_release(version: tuple[int, ...] | str | None) -> Release | None:
    """The release data for a version: that release, or the newest known patch at or below it in the same
    minor (a patch that changed none of vLLM's tables is not stored separately). None if the minor is unknown."""
    if version is None:
        version = default_version()
    key = release_key(version) if isinstance(version, str) else (*version, 0, 0, 0, 0)[:5]
    same = [r for r in known_releases() if r.key[:2] == key[:2] and r.key <= key]
    return same[-1] if same else None


def release(version: tuple[int, ...] | str | None = None) -> Release:
    """The release object for a version (None: the default); KvplanInputError (one line) if unknown."""
    found = find_release(version)
    if found is None:
        shown = version if isinstance(version, str) else ".".join(map(str, version or ()))
        rels = known_releases()
        raise KvplanInputError(
            f"kvplan has no data for vLLM {shown} (it knows {rels[0].version} to {rels[-1].version}).",
            "Pass a known release (`kvplan engines` lists them); a new one is added with "
            "scripts/add_vllm_release.py VERSION.")
    return found
