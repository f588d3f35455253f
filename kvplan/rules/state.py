"""The contract between decision rules and the planner: which fields exist, who may set them, with what.

A decision rule reads an immutable context and yields `Set(field, value, fact)`; it never writes
state itself. The fields form a closed set (the `Literal`s below), each with one value type:

- global fields (`GlobalField`) are decided once, at config time, by the `scope="global"` rules;
- layer fields (`PlanField`) are the per-layer `LayerPlan` fields the `scope="layer"` rules decide;
  every `Set` of one becomes a `Decision` in the plan;
- carried fields (`CarriedField`) are engine state that one layer's construction changes for the layers
  built after it (vLLM's `cache_config.cache_dtype`); the planner passes their value on from layer to
  layer and records no decision for them.

`Set`'s overloads let mypy reject an unknown field or a value of the wrong type; the same checks run
when a `Set` is built, so a rule that slips past the type checker fails loudly instead of setting
nothing. A decision rule declares the fields it may set with `@decides_global(...)` or
`@decides_layer(...)` under its `@declare(...)`; when the planner runs it, setting any other field
raises `RuleContractError`.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Literal, get_args, overload

from kvplan.model.vocab import QuantMode, ScaleSource

if TYPE_CHECKING:  # pragma: no cover
    from kvplan.model.arch import LayerArch
    from kvplan.rules.context import RuleContext

GlobalField = Literal["model_dtype", "kv_cache_dtype"]
PlanField = Literal["kv_cache_dtype", "dtype", "quant_mode", "scale_source", "skipped", "bytes_per_token",
                    "num_kv_heads", "backend", "flash_attn_version", "query_dtype"]
CarriedField = Literal["cache_config_dtype"]
LayerField = Literal[PlanField, CarriedField]
Field = Literal[GlobalField, LayerField]

# Grouped by value type, for Set's overloads.
_StrField = Literal["model_dtype", "kv_cache_dtype", "dtype", "backend", "cache_config_dtype"]
_IntField = Literal["bytes_per_token", "num_kv_heads", "flash_attn_version"]
FieldValue = str | int | bool | QuantMode | ScaleSource | None

GLOBAL_FIELDS: frozenset[str] = frozenset(get_args(GlobalField))
PLAN_FIELDS: frozenset[str] = frozenset(get_args(PlanField))
CARRIED_FIELDS: frozenset[str] = frozenset(get_args(CarriedField))
LAYER_FIELDS: frozenset[str] = PLAN_FIELDS | CARRIED_FIELDS

_TYPES: dict[str, tuple[type, ...]] = {
    **{f: (str,) for f in get_args(_StrField)},
    **{f: (int,) for f in get_args(_IntField)},
    "query_dtype": (str, type(None)),
    "quant_mode": (QuantMode,),
    "scale_source": (ScaleSource,),
    "skipped": (bool,),
}
assert set(_TYPES) == GLOBAL_FIELDS | LAYER_FIELDS  # every field has exactly one value type
_EXACT: dict[str, frozenset[type]] = {f: frozenset(ts) for f, ts in _TYPES.items()}  # the fast path of _check


class RuleContractError(TypeError):
    """A rule broke its contract: an unknown field, a value of the wrong type, an undeclared field."""


def _check(field: str, value: object) -> None:
    if type(value) in _EXACT.get(field, ()):
        return
    types = _TYPES.get(field)
    if types is None:
        raise RuleContractError(f"unknown field {field!r}: a rule can set only {', '.join(sorted(_TYPES))}")
    # bool is an int and QuantMode/ScaleSource are str in Python: an int field takes no True/False, a
    # string field no enum member (mypy cannot tell those apart, so this check is the one that does)
    if not isinstance(value, types) or (isinstance(value, (bool, Enum)) and type(value) not in types):
        want = " or ".join("None" if t is type(None) else t.__name__ for t in types)
        raise RuleContractError(f"field {field!r} takes {want}, not {type(value).__name__} ({value!r})")


@dataclass(frozen=True, init=False)
class Set:
    """A decision: set `field` to `value` because of `fact` (the input fact shown in `kvplan explain`)."""

    field: Field
    value: FieldValue
    fact: str

    @overload
    def __init__(self, field: _StrField, value: str, fact: str) -> None: ...
    @overload
    def __init__(self, field: _IntField, value: int, fact: str) -> None: ...
    @overload
    def __init__(self, field: Literal["query_dtype"], value: str | None, fact: str) -> None: ...
    @overload
    def __init__(self, field: Literal["quant_mode"], value: QuantMode, fact: str) -> None: ...
    @overload
    def __init__(self, field: Literal["scale_source"], value: ScaleSource, fact: str) -> None: ...
    @overload
    def __init__(self, field: Literal["skipped"], value: bool, fact: str) -> None: ...

    def __init__(self, field: Field, value: FieldValue, fact: str) -> None:
        _check(field, value)
        object.__setattr__(self, "field", field)
        object.__setattr__(self, "value", value)
        object.__setattr__(self, "fact", fact)


@dataclass(frozen=True, slots=True)
class GlobalState:
    """The config-time fields while the global decision rules run (None: not decided yet)."""

    model_dtype: str | None = None
    kv_cache_dtype: str | None = None


@dataclass(frozen=True, slots=True)
class LayerState:
    """One layer's fields while its decision rules run, in precedence order (None: not decided yet).

    Frozen: rules read it and cannot assign to it; the planner applies the `Set`s they yield (`apply_set`).
    """

    kv_cache_dtype: str | None = None
    """The layer's --kv-cache-dtype string ('auto' = the model dtype); None for a layer without KV."""
    dtype: str | None = None
    """Stored element type (KV110)."""
    quant_mode: QuantMode | None = None
    scale_source: ScaleSource | None = None
    skipped: bool = False
    bytes_per_token: int | None = None
    num_kv_heads: int | None = None
    """KV heads on one tensor-parallel rank (KV130)."""
    backend: str | None = None
    flash_attn_version: int | None = None
    query_dtype: str | None = None
    cache_config_dtype: str | None = None
    """vLLM's `cache_config.cache_dtype` as this layer's constructor reads it: the global kv_cache_dtype,
    unless an earlier Attention layer's compressed-tensors override rewrote it to 'fp8' (KV103). Carried
    from layer to layer by the planner."""



def apply_set(state: GlobalState | LayerState, s: Set) -> None:
    """The planner's one write path: apply a rule's `Set` to the state of its scope.

    The field must belong to the state (a layer rule cannot set model_dtype); its value's type was
    checked when the Set was made. The states are frozen to rules, so this writes in place with
    `object.__setattr__` (as a frozen dataclass's own __init__ does) instead of copying the state
    for every decision."""
    if s.field not in _FIELDS_OF[type(state)]:
        scope, fields = ("global", GLOBAL_FIELDS) if isinstance(state, GlobalState) else ("layer", LAYER_FIELDS)
        raise RuleContractError(f"field {s.field!r} is not a {scope} field ({', '.join(sorted(fields))})")
    object.__setattr__(state, s.field, s.value)


_FIELDS_OF: dict[type, frozenset[str]] = {GlobalState: GLOBAL_FIELDS, LayerState: LAYER_FIELDS}


GlobalBody = Callable[["RuleContext"], Iterable[Set]]
LayerBody = Callable[["RuleContext", "LayerArch", LayerState], Iterable[Set]]


def _declared(fields: tuple[str, ...], allowed: frozenset[str], scope: str) -> frozenset[str]:
    if not fields:
        raise RuleContractError(f"a {scope} decision rule must declare at least one field it sets")
    bad = [f for f in fields if f not in allowed]
    if bad:
        raise RuleContractError(f"{', '.join(map(repr, bad))} {'is' if len(bad) == 1 else 'are'} not "
                                f"{scope} field(s): choose from {', '.join(sorted(allowed))}")
    return frozenset(fields)


def check_declared(code: str, fields: frozenset[str], s: Set) -> None:
    """Refuse a Set of a field the rule did not declare (the planner calls this for every decision)."""
    if s.field not in fields:
        raise RuleContractError(f"rule {code} set {s.field!r}, which it does not declare "
                                f"(it declares {', '.join(sorted(fields))})")


@dataclass(frozen=True)
class GlobalDecision:
    """The body of a global (config-time) decision rule and the global fields it may set."""

    fields: frozenset[str]
    body: GlobalBody

    def __call__(self, ctx: RuleContext) -> Iterable[Set]:
        return self.body(ctx)


@dataclass(frozen=True)
class LayerDecision:
    """The body of a per-layer decision rule and the layer fields it may set."""

    fields: frozenset[str]
    body: LayerBody

    def __call__(self, ctx: RuleContext, la: LayerArch, st: LayerState) -> Iterable[Set]:
        return self.body(ctx, la, st)


def decides_global(*fields: GlobalField) -> Callable[[GlobalBody], GlobalDecision]:
    """Declare the global fields a `scope="global"` decision rule sets (put it under `@declare`)."""
    declared = _declared(fields, GLOBAL_FIELDS, "global")
    return lambda body: GlobalDecision(declared, body)


def decides_layer(*fields: LayerField) -> Callable[[LayerBody], LayerDecision]:
    """Declare the layer fields a `scope="layer"` decision rule sets (put it under `@declare`)."""
    declared = _declared(fields, LAYER_FIELDS, "layer")
    return lambda body: LayerDecision(declared, body)
