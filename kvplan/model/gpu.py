"""GPU profile type: what kvplan needs to know about an accelerator.

Data lives in :mod:`kvplan.backends.gpus`; this module holds the type only (no I/O, imports nothing
from kvplan). vLLM reasons about devices through the CUDA compute capability ("family N" =
same major, `vllm/platforms/interface.py::is_device_capability_family`) and, on ROCm, the gfx arch
(`is_fp8_fnuz()` = "gfx94" in the arch name); the fields below carry exactly those facts.
"""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

Vendor = Literal["nvidia", "amd", "cpu"]
Fp8Format = Literal["none", "e4m3fn", "e4m3fnuz"]
Platform = Literal["cuda", "rocm", "cpu"]

# Largest finite values of the FP8 storage formats (torch.finfo).
_FP8_MAX = {"e4m3fn": 448.0, "e4m3fnuz": 240.0}
# vLLM's per-token-head quantizer range (`quant_utils.get_fp8_min_max`): fnuz uses 224, not 240.
_FP8_PTH_MAX = {"e4m3fn": 448.0, "e4m3fnuz": 224.0}


class GpuProfile(BaseModel):
    """One accelerator (or a generic compute-capability stand-in) as kvplan models it."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    name: str
    """Canonical kvplan id, lower-case kebab (e.g. `h100-sxm`, `mi300x`, or `sm90` for a generic CC)."""
    display_name: str
    """Human-readable name (e.g. `NVIDIA H100 SXM 80GB`, `generic SM90 (H100 SXM)`)."""
    vendor: Vendor
    """Who makes it: `nvidia` (CUDA platform in vLLM), `amd` (ROCm) or `cpu` (host CPU backend)."""
    compute_capability: tuple[int, int] | None
    """CUDA compute capability (major, minor), e.g. (9, 0); None for AMD and CPU."""
    arch: str
    """Architecture id: `sm90`, `sm100`, `sm120`... for NVIDIA, the gfx target (`gfx942`) for AMD."""
    memory_gib: float | None
    """Nominal device memory in GiB (datasheet capacity; the driver reports slightly less). None for
    CPU profiles, whose memory is the host's."""
    hbm_bandwidth_gbs: float | None
    """Nominal peak device-memory bandwidth in GB/s (HBM or GDDR), from the vendor datasheet; None
    for CPU profiles."""
    fp8: Fp8Format
    """FP8 format vLLM uses for the KV cache on this device (`current_platform.fp8_dtype()`): `e4m3fn`
    (OCP, max 448), `e4m3fnuz` (ROCm gfx94x, max 240), or `none` where no vLLM backend can hold an
    FP8 KV cache (SM7x: FlashInfer needs SM80+, the Triton path needs SM89+). SM80/86 keep `e4m3fn`
    (FlashInfer stores it and dequantizes) but have no FP8 tensor cores."""
    native_fp8_tensor_cores: bool
    """True if the device has FP8 matrix units (Ada SM89, Hopper, Blackwell, CDNA3+)."""
    aliases: tuple[str, ...] = ()
    """Other names `resolve_gpu` accepts (case-insensitive; punctuation ignored)."""
    source: str
    """Where the numbers come from: vendor datasheet URL(s) and the CUDA CC table."""

    @property
    def platform(self) -> Platform:
        """vLLM platform class this device runs under."""
        return {"nvidia": "cuda", "amd": "rocm", "cpu": "cpu"}[self.vendor]  # type: ignore[return-value]

    @property
    def cc_major(self) -> int | None:
        """CUDA compute-capability major (vLLM "family" = major), None off CUDA."""
        return self.compute_capability[0] if self.compute_capability else None

    def is_family(self, family: int) -> bool:
        """vLLM `is_device_capability_family(family)`: same CC major (family 100 = SM100/SM103)."""
        return self.cc_major is not None and self.cc_major == family // 10

    def cc_at_least(self, major: int, minor: int = 0) -> bool:
        """True if CUDA and compute capability >= (major, minor)."""
        return self.compute_capability is not None and self.compute_capability >= (major, minor)

    @property
    def cc_str(self) -> str | None:
        """Compute capability as vLLM prints it, e.g. `9.0`."""
        if self.compute_capability is None:
            return None
        return f"{self.compute_capability[0]}.{self.compute_capability[1]}"

    @property
    def fp8_max(self) -> float | None:
        """Largest finite value of the device's FP8 KV format (448 e4m3fn, 240 e4m3fnuz)."""
        return _FP8_MAX.get(self.fp8)

    @property
    def fp8_per_token_head_max(self) -> float | None:
        """Range vLLM's per-token-head FP8 quantizer clamps to (448, or 224 on fnuz)."""
        return _FP8_PTH_MAX.get(self.fp8)

    @property
    def fp8_torch_dtype(self) -> str | None:
        """`current_platform.fp8_dtype()` as a torch dtype name, None if no FP8."""
        return {"e4m3fn": "float8_e4m3fn", "e4m3fnuz": "float8_e4m3fnuz"}.get(self.fp8)
