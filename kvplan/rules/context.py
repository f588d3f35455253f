"""The immutable context rules read: model facts, metadata, flags, GPU, engine, plan so far."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from types import MappingProxyType
from typing import Any

from kvplan.backends.capabilities import EngineVersion
from kvplan.backends.gpus import GpuFacts
from kvplan.model.arch import LayerArch, ModelArch
from kvplan.model.flags import ServingFlags
from kvplan.model.plan import LayerPlan, Totals
from kvplan.model.quant import QuantMetadata
from kvplan.releases import DEFAULT_ENGINE_VERSION

ENGINE_NAME = "vllm"
ENGINE_VERSION = DEFAULT_ENGINE_VERSION
KV_CACHE_DTYPE_SET_BY = "kv_cache_dtype_set_by"
"""The `globals` key holding the code of the rule that set the global kv_cache_dtype last (KV101, KV102, KV117)."""


@lru_cache(maxsize=512)
def _engine_has(feature: str, engine: EngineVersion) -> bool:
    from kvplan.backends.vllm_rows import engine_feature
    return engine_feature(feature).holds_for(engine)


@dataclass(frozen=True)
class FlagsOnlyContext:
    """What a flag-only rule (KV001/KV002/KV003/KV006/KV007/KV301) needs when no model is known (the linter's
    launches of models it cannot find): the serving flags and the release modelled."""

    flags: ServingFlags
    engine: EngineVersion = field(default_factory=EngineVersion)

    def engine_has(self, feature: str) -> bool:
        return _engine_has(feature, self.engine)


@dataclass(frozen=True)
class RuleContext:
    """What every rule sees. `globals` holds config-time decisions (model_dtype, kv_cache_dtype)."""

    arch: ModelArch
    quant: QuantMetadata
    flags: ServingFlags
    gpu: GpuFacts | None = None
    engine_version: str = ENGINE_VERSION
    engine: EngineVersion = field(default_factory=EngineVersion)  # the release modelled (--engine)
    globals: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    layers: tuple[LayerPlan, ...] = ()
    weight_bytes: int | None = None

    @property
    def model_dtype(self) -> str:
        return str(self.globals.get("model_dtype", "bfloat16"))

    @property
    def kv_cache_dtype(self) -> str:
        """The global (config-time) KV cache dtype, after KV101/KV102."""
        return str(self.globals.get("kv_cache_dtype", self.flags.kv_cache_dtype))

    @property
    def totals(self) -> Totals | None:
        """The plan's totals, for check rules (set once memory is sized)."""
        t = self.globals.get("totals")
        return t if isinstance(t, Totals) else None

    def engine_has(self, feature: str) -> bool:
        """True if the modelled release has this ENGINE_FEATURES entry (feature present / bug present)."""
        return _engine_has(feature, self.engine)

    def arch_layer(self, index: int) -> LayerArch | None:
        return self._arch_by_index.get(index)

    @cached_property
    def _arch_by_index(self) -> dict[int, LayerArch]:
        out: dict[int, LayerArch] = {}
        for la in self.arch.layers:
            out.setdefault(la.index, la)  # first match, as a linear search would find
        return out


FlagsContext = RuleContext | FlagsOnlyContext
"""What a rule that reads only the flags and the release accepts (the linter runs those without a model)."""
