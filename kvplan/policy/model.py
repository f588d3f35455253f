"""The policy file's shape: rules (selector -> setting, with a reason) and constraints.

A policy is YAML (`policy.schema.json` is generated from these models):

    version: 1
    name: protect-edges
    rules:                       # later rules override earlier ones for the same layer
      - code: KV901
        name: fp8-everywhere
        reason: FP8 KV halves memory; scales come from the checkpoint.
        set: {kv_cache_dtype: fp8}
      - code: KV902
        name: keep-first-and-last-in-bf16
        reason: The first and last layers are the most sensitive to KV error.
        select: {index: [0, 1, -1]}
        set: {kv_cache_dtype: model}
    constraints:
      - code: KV910
        name: no-e5m2
        reason: e5m2 keeps 2 mantissa bits; our evals regress.
        forbid: {kv_cache_dtype: [fp8_e5m2]}
      - code: KV911
        name: long-context-capacity
        reason: Product needs 4 concurrent 128k requests.
        min_tokens: 524288
"""
from __future__ import annotations

import re
from typing import Any, Literal, TypeVar

from pydantic import ConfigDict, Field, field_validator, model_validator

from kvplan.model.base import Frozen
from kvplan.model.vocab import LAYER_KINDS, VLLM_033_KV_CACHE_DTYPES, QuantMode, Severity

T = TypeVar("T")

POLICY_SCHEMA_VERSION = 1
USER_CODE = re.compile(r"^KV9[0-7]\d$")  # KV900-KV979; KV98x emitters, KV99x the policy engine
NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
_RANGE = re.compile(r"^(\d+)-(\d+)$")
# kv_cache_dtype settings that mean "keep this layer in the model dtype" (a skip in vLLM 0.33).
MODEL_DTYPE_WORDS = ("model", "auto")


class PolicyModel(Frozen):
    """Policy file objects: frozen, unknown keys are errors, `set` is accepted for `setting`."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True,
                              populate_by_name=True)


def _as_list(v: Any) -> Any:
    return v if v is None or isinstance(v, list) else [v]


def _items(v: T | list[T]) -> list[T]:
    """A field declared `X | list[X]` holds a list once validated (`_as_list`); typed as that list."""
    return v if isinstance(v, list) else [v]


class IntRange(PolicyModel):
    """An inclusive range; either bound may be left out."""

    min: int | None = None
    """Smallest value that matches."""
    max: int | None = None
    """Largest value that matches."""

    @model_validator(mode="after")
    def _order(self) -> IntRange:
        if self.min is None and self.max is None:
            raise ValueError("a range needs min and/or max")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"min {self.min} is larger than max {self.max}")
        return self

    def contains(self, n: int) -> bool:
        return (self.min is None or n >= self.min) and (self.max is None or n <= self.max)


IntMatch = int | list[int] | IntRange  # an int is stored as [int]


def _int_match(v: IntMatch | None, n: int | None) -> bool:
    if v is None:
        return True
    if n is None:
        return False
    return v.contains(n) if isinstance(v, IntRange) else n in _items(v)


class Selector(PolicyModel):
    """Which layers a rule or constraint applies to. All given conditions must hold; a list matches any of its items."""

    kind: str | list[str] | None = None
    """Layer kinds: full_attention, sliding_attention, chunked_attention, mla, cross_attention, ..."""
    index: int | str | list[int | str] | None = None
    """Decoder-layer indices (vLLM numbering): integers, 'a-b' ranges, negative integers count from the end (-1 = last layer)."""  # noqa: E501 (the field docstring is the schema description)
    sliding_window: bool | IntRange | None = None
    """true: the layer has a sliding window; false: it has none; {min, max}: its window is in range."""
    head_size: IntMatch | None = None
    """Key head size: a value, a list, or {min, max}."""
    num_kv_heads: IntMatch | None = None
    """KV heads of the layer as in config.json (before tensor parallelism): a value, a list, or {min, max}."""
    model_type: str | list[str] | None = None
    """config.json model_type (top level or text model's), e.g. gpt_oss, gemma3, llama."""

    @field_validator("kind", "index", "model_type", mode="before")
    @classmethod
    def _listify(cls, v: Any) -> Any:
        return _as_list(v)

    @field_validator("head_size", "num_kv_heads", mode="before")
    @classmethod
    def _int_or_list(cls, v: Any) -> Any:
        return [v] if isinstance(v, int) and not isinstance(v, bool) else v

    @field_validator("kind")
    @classmethod
    def _kinds(cls, v: Any) -> Any:
        for k in v or ():
            if k not in LAYER_KINDS:
                raise ValueError(f"unknown layer kind {k!r}; use one of: {', '.join(LAYER_KINDS)}")
        return v

    @field_validator("index")
    @classmethod
    def _indices(cls, v: Any) -> Any:
        for item in v or ():
            if isinstance(item, str):
                m = _RANGE.match(item.strip())
                if not m:
                    raise ValueError(f"index {item!r} is neither an integer nor a range like '0-3'")
                if int(m.group(1)) > int(m.group(2)):
                    raise ValueError(f"index range {item!r} runs backwards")
        return v

    def indices(self, num_layers: int) -> set[int] | None:
        """The selected indices for a model with `num_layers` layers (None: any)."""
        if self.index is None:
            return None
        out: set[int] = set()
        items: list[int | str] = self.index if isinstance(self.index, list) else [self.index]
        for item in items:
            if isinstance(item, int):
                out.add(item if item >= 0 else num_layers + item)
            else:
                m = _RANGE.match(item.strip())
                assert m is not None, item  # checked by the validator
                a, b = int(m.group(1)), int(m.group(2))
                out.update(range(a, b + 1))
        return out

    def matches(self, *, index: int, kind: str, sliding_window: int | None, head_size: int | None,
                num_kv_heads: int | None, model_types: tuple[str, ...], num_layers: int) -> bool:
        """Whether a layer with these facts is selected."""
        if self.kind is not None and kind not in self.kind:
            return False
        idx = self.indices(num_layers)
        if idx is not None and index not in idx:
            return False
        sw = self.sliding_window
        if isinstance(sw, bool):
            if (sliding_window is not None) != sw:
                return False
        elif sw is not None and (sliding_window is None or not sw.contains(sliding_window)):
            return False
        if not _int_match(self.head_size, head_size) or not _int_match(self.num_kv_heads, num_kv_heads):
            return False
        return self.model_type is None or any(t in self.model_type for t in model_types)

    def describe(self) -> str:
        """Short text for facts and messages, e.g. 'kind=sliding_attention, index=0-3'."""
        parts = []
        for name in ("kind", "index", "sliding_window", "head_size", "num_kv_heads", "model_type"):
            v = getattr(self, name)
            if v is None:
                continue
            if isinstance(v, IntRange):
                v = f"{'' if v.min is None else v.min}..{'' if v.max is None else v.max}"
            elif isinstance(v, list):
                v = ",".join(map(str, v))
            parts.append(f"{name}={v}")
        return ", ".join(parts) or "all layers"


def _check_kv_dtype(v: str | None, allow_model: bool) -> str | None:
    if v is None:
        return v
    if allow_model and v in MODEL_DTYPE_WORDS:
        return v
    if v not in VLLM_033_KV_CACHE_DTYPES:
        extra = "'model', " if allow_model else ""
        raise ValueError(f"invalid kv_cache_dtype {v!r}; use {extra}or one of vLLM 0.33's: "
                         + ", ".join(VLLM_033_KV_CACHE_DTYPES))
    return v


class Setting(PolicyModel):
    """What a rule sets on the layers it selects: exactly one of kv_cache_dtype or quant_mode."""

    kv_cache_dtype: str | None = None
    """A vLLM 0.33 --kv-cache-dtype value, or 'model' to keep the layer in the model dtype (a skip)."""
    quant_mode: QuantMode | None = None
    """A quant mode (none, fp8_per_tensor, int8_per_token_head, nvfp4, ...); the checkpoint's own dtype is kept when its mode matches."""  # noqa: E501 (the field docstring is the schema description)

    @field_validator("kv_cache_dtype")
    @classmethod
    def _dtype(cls, v: str | None) -> str | None:
        return _check_kv_dtype(v, allow_model=True)

    @model_validator(mode="after")
    def _one(self) -> Setting:
        if (self.kv_cache_dtype is None) == (self.quant_mode is None):
            raise ValueError("set exactly one of kv_cache_dtype or quant_mode")
        return self

    def describe(self) -> str:
        return (f"kv_cache_dtype {self.kv_cache_dtype}" if self.kv_cache_dtype is not None
                else f"quant_mode {self.quant_mode.value}")  # type: ignore[union-attr]


class _Coded(PolicyModel):
    code: str = Field(json_schema_extra={"pattern": USER_CODE.pattern})
    """Stable code, KV900-KV979 (KV98x/KV99x are kvplan's own emitter and policy findings)."""
    name: str = Field(json_schema_extra={"pattern": NAME.pattern})
    """kebab-case name, unique in the policy."""
    reason: str
    """Why the rule exists, one line; it is recorded with every decision or finding."""
    fix: str | None = None
    """How to fix a violation (constraints; default: a generic hint)."""
    select: Selector = Field(default_factory=Selector)
    """Which layers (default: every layer with a KV cache)."""

    @field_validator("code")
    @classmethod
    def _code(cls, v: str) -> str:
        if not USER_CODE.match(v):
            raise ValueError(f"policy code {v!r} must be KV900-KV979 (KV98x and KV99x are kvplan's own)")
        return v

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not NAME.match(v):
            raise ValueError(f"name {v!r} must be kebab-case, e.g. keep-sliding-bf16")
        return v

    @field_validator("reason")
    @classmethod
    def _reason(cls, v: str) -> str:
        v = " ".join(v.split())
        if not v:
            raise ValueError("reason must not be empty")
        return v


class PolicyRule(_Coded):
    """selector -> setting, with a reason; recorded in decided_by/decisions of every layer it sets."""

    setting: Setting = Field(alias="set")
    """What to set on the selected layers (YAML key: set)."""


class LayerCondition(PolicyModel):
    """Layer facts a constraint forbids or requires; a list matches any of its items."""

    kv_cache_dtype: str | list[str] | None = None
    """kv_cache_dtype strings."""
    quant_mode: QuantMode | list[QuantMode] | None = None
    """Quant modes."""
    quantized: bool | None = None
    """The layer's KV is quantized (true) or 16-bit (false)."""
    skipped: bool | None = None
    """The layer is in --kv-cache-dtype-skip-layers."""

    @field_validator("kv_cache_dtype", "quant_mode", mode="before")
    @classmethod
    def _listify(cls, v: Any) -> Any:
        return _as_list(v)

    @field_validator("kv_cache_dtype")
    @classmethod
    def _dtypes(cls, v: Any) -> Any:
        for d in v or ():
            _check_kv_dtype(d, allow_model=False)
        return v

    @model_validator(mode="after")
    def _some(self) -> LayerCondition:
        if all(getattr(self, f) is None for f in type(self).model_fields):
            raise ValueError("name at least one of kv_cache_dtype, quant_mode, quantized, skipped")
        return self

    def describe(self) -> str:
        """'kv_cache_dtype fp8/nvfp4, quantized: false'."""
        parts = []
        if self.kv_cache_dtype is not None:
            parts.append("kv_cache_dtype " + "/".join(self.kv_cache_dtype))
        if self.quant_mode is not None:
            parts.append("quant_mode " + "/".join(q.value for q in _items(self.quant_mode)))
        for flag in ("quantized", "skipped"):
            if getattr(self, flag) is not None:
                parts.append(f"{flag}: {str(getattr(self, flag)).lower()}")
        return ", ".join(parts)

    def hits(self, *, kv_cache_dtype: str, quant_mode: QuantMode, skipped: bool) -> list[str]:
        """The listed facts this layer has (for forbid) - each as text."""
        out = []
        if self.kv_cache_dtype is not None and kv_cache_dtype in self.kv_cache_dtype:
            out.append(f"kv_cache_dtype {kv_cache_dtype}")
        if self.quant_mode is not None and quant_mode in self.quant_mode:
            out.append(f"quant_mode {quant_mode.value}")
        if self.quantized is not None and quant_mode.is_quantized == self.quantized:
            out.append("quantized" if self.quantized else "16-bit")
        if self.skipped is not None and skipped == self.skipped:
            out.append("skipped" if self.skipped else "not skipped")
        return out

    def misses(self, *, kv_cache_dtype: str, quant_mode: QuantMode, skipped: bool) -> list[str]:
        """The required facts this layer lacks (for require) - each as text."""
        out = []
        if self.kv_cache_dtype is not None and kv_cache_dtype not in self.kv_cache_dtype:
            out.append(f"kv_cache_dtype {kv_cache_dtype} is not {'/'.join(self.kv_cache_dtype)}")
        if self.quant_mode is not None and quant_mode not in self.quant_mode:
            out.append(f"quant_mode {quant_mode.value} is not {'/'.join(q.value for q in _items(self.quant_mode))}")
        if self.quantized is not None and quant_mode.is_quantized != self.quantized:
            out.append("not quantized" if self.quantized else "quantized")
        if self.skipped is not None and skipped != self.skipped:
            out.append("not skipped" if self.skipped else "skipped")
        return out


class Constraint(_Coded):
    """A check on the compiled plan; a violation is a finding with the constraint's code."""

    severity: Severity = Severity.error
    """Severity of a violation (error, warning, info)."""
    forbid: LayerCondition | None = None
    """Selected layers must not have any of these facts."""
    require: LayerCondition | None = None
    """Selected layers must have all of these facts."""
    min_tokens: int | None = Field(default=None, ge=1)
    """At least this many tokens of KV capacity at --max-model-len (needs --gpu or a KV budget)."""
    min_concurrency: float | None = Field(default=None, gt=0)
    """At least this many concurrent requests of --max-model-len (needs --gpu or a KV budget)."""
    max_bytes_per_token: int | None = Field(default=None, ge=1)
    """At most this many KV bytes per token (per TP rank)."""

    @model_validator(mode="after")
    def _one(self) -> Constraint:
        given = [f for f in ("forbid", "require", "min_tokens", "min_concurrency", "max_bytes_per_token")
                 if getattr(self, f) is not None]
        if len(given) != 1:
            raise ValueError("a constraint needs exactly one of forbid, require, min_tokens, min_concurrency, "
                             f"max_bytes_per_token (got {', '.join(given) or 'none'})")
        return self

    @property
    def needs_budget(self) -> bool:
        return self.min_tokens is not None or self.min_concurrency is not None


class Policy(PolicyModel):
    """A KV cache policy: rules that choose dtypes and constraints that check the plan."""

    version: Literal[1]
    """Policy file format version (1)."""
    name: str | None = None
    """Policy name, shown in facts and findings."""
    description: str | None = None
    """What the policy is for."""
    rules: list[PolicyRule] = Field(default_factory=list)
    """Settings, applied in order: a later rule overrides an earlier one on the same layer."""
    constraints: list[Constraint] = Field(default_factory=list)
    """Checks on the compiled plan."""

    @model_validator(mode="after")
    def _unique(self) -> Policy:
        # "@<path>:" tells the YAML loader which line to point at (a model validator has no loc).
        seen_codes: dict[str, str] = {}
        seen_names: set[str] = set()
        items = [("rules", i, r) for i, r in enumerate(self.rules)] + \
                [("constraints", i, c) for i, c in enumerate(self.constraints)]
        for group, i, item in items:
            if item.code in seen_codes:
                raise ValueError(f"@{group}.{i}.code: code {item.code} is used twice "
                                 f"({seen_codes[item.code]} and {item.name})")
            if item.name in seen_names:
                raise ValueError(f"@{group}.{i}.name: name {item.name!r} is used twice")
            seen_codes[item.code] = item.name
            seen_names.add(item.name)
        return self


def policy_schema() -> dict[str, Any]:
    """JSON Schema of policy files (published as schemas/policy.schema.json; YAML keys, e.g. `set`)."""
    s = Policy.model_json_schema(mode="validation", by_alias=True)
    s["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    s["$id"] = f"https://kvplan.dev/schemas/policy-{POLICY_SCHEMA_VERSION}.json"
    return s
