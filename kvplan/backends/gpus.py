"""GPU profiles (data), `resolve_gpu` (name / alias / compute capability / auto-detect) and `GpuFacts`,
the one GPU type the planner and the rules read.

Numbers are nominal datasheet values (memory capacity and peak memory bandwidth as the vendor
publishes them); compute capabilities follow NVIDIA's CUDA GPU table
(https://developer.nvidia.com/cuda-gpus). The FP8 column is what vLLM 0.33 does with a KV cache on
the device (`current_platform.fp8_dtype()`, `is_fp8_fnuz()`; reference §1.2, §3.2, §4.3, §5.3).

No torch import at module level: `resolve_gpu("auto")` imports torch lazily.
"""
from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from kvplan.errors import KvplanInputError
from kvplan.model.gpu import GpuProfile

__all__ = [
    "GENERIC_CC_REPRESENTATIVES",
    "GENERIC_ROCM_ARCH_REPRESENTATIVES",
    "GPU_PROFILES",
    "GpuFacts",
    "all_gpu_names",
    "detect_gpu",
    "get_gpu",
    "gpu_facts",
    "resolve_gpu",
]

_CC_TABLE = "https://developer.nvidia.com/cuda-gpus"


def _p(**kw: Any) -> GpuProfile:
    return GpuProfile(**kw)


_PROFILES: tuple[GpuProfile, ...] = (
    # ---- NVIDIA Volta / Turing: no FP8 KV path in vLLM (FlashInfer needs SM80+, Triton FP8 SM89+).
    _p(name="v100", display_name="NVIDIA Tesla V100 SXM2 32GB", vendor="nvidia",
       compute_capability=(7, 0), arch="sm70", memory_gib=32, hbm_bandwidth_gbs=900, fp8="none",
       native_fp8_tensor_cores=False, aliases=("v100-sxm2", "v100-32gb", "tesla-v100"),
       source="https://images.nvidia.com/content/technologies/volta/pdf/"
              "volta-v100-datasheet-update-us-1165301-r5.pdf; CC: " + _CC_TABLE),
    _p(name="t4", display_name="NVIDIA T4 16GB", vendor="nvidia", compute_capability=(7, 5),
       arch="sm75", memory_gib=16, hbm_bandwidth_gbs=320, fp8="none",
       native_fp8_tensor_cores=False, aliases=("tesla-t4",),
       source="https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/tesla-t4/"
              "t4-tensor-core-datasheet-951643.pdf; CC: " + _CC_TABLE),
    # ---- Ampere: FP8 KV only through FlashInfer's dequantizing fa2 path; no FP8 tensor cores.
    _p(name="a10", display_name="NVIDIA A10 24GB", vendor="nvidia", compute_capability=(8, 6),
       arch="sm86", memory_gib=24, hbm_bandwidth_gbs=600, fp8="e4m3fn",
       native_fp8_tensor_cores=False, aliases=(),
       source="https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a10/pdf/"
              "datasheet-new/nvidia-a10-datasheet.pdf; CC: " + _CC_TABLE),
    _p(name="a100-40gb", display_name="NVIDIA A100 SXM4 40GB", vendor="nvidia",
       compute_capability=(8, 0), arch="sm80", memory_gib=40, hbm_bandwidth_gbs=1555,
       fp8="e4m3fn", native_fp8_tensor_cores=False,
       aliases=("a100-sxm4-40gb", "a100-pcie-40gb", "a100-40g"),
       source="https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/"
              "nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf; CC: " + _CC_TABLE),
    _p(name="a100-80gb", display_name="NVIDIA A100 SXM4 80GB", vendor="nvidia",
       compute_capability=(8, 0), arch="sm80", memory_gib=80, hbm_bandwidth_gbs=2039,
       fp8="e4m3fn", native_fp8_tensor_cores=False,
       aliases=("a100", "a100-sxm4-80gb", "a100-80g", "a100-sxm"),
       source="https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/"
              "nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf; CC: " + _CC_TABLE),
    # ---- Ada SM89: native FP8 (fp8e4nv) -> vLLM's Triton FP8 path works.
    _p(name="l4", display_name="NVIDIA L4 24GB", vendor="nvidia", compute_capability=(8, 9),
       arch="sm89", memory_gib=24, hbm_bandwidth_gbs=300, fp8="e4m3fn",
       native_fp8_tensor_cores=True, aliases=(),
       source="https://www.nvidia.com/en-us/data-center/l4/; CC: " + _CC_TABLE),
    _p(name="l40s", display_name="NVIDIA L40S 48GB", vendor="nvidia", compute_capability=(8, 9),
       arch="sm89", memory_gib=48, hbm_bandwidth_gbs=864, fp8="e4m3fn",
       native_fp8_tensor_cores=True, aliases=(),
       source="https://www.nvidia.com/en-us/data-center/l40s/; CC: " + _CC_TABLE),
    _p(name="rtx-4090", display_name="NVIDIA GeForce RTX 4090 24GB", vendor="nvidia",
       compute_capability=(8, 9), arch="sm89", memory_gib=24, hbm_bandwidth_gbs=1008,
       fp8="e4m3fn", native_fp8_tensor_cores=True, aliases=("4090", "geforce-rtx-4090"),
       source="https://www.nvidia.com/en-us/geforce/graphics-cards/40-series/rtx-4090/; CC: "
              + _CC_TABLE),
    # ---- Hopper SM90.
    _p(name="h100-pcie", display_name="NVIDIA H100 PCIe 80GB", vendor="nvidia",
       compute_capability=(9, 0), arch="sm90", memory_gib=80, hbm_bandwidth_gbs=2000,
       fp8="e4m3fn", native_fp8_tensor_cores=True, aliases=("h100-pci",),
       source="https://www.nvidia.com/en-us/data-center/h100/ (H100 PCIe: 80GB, 2TB/s); CC: "
              + _CC_TABLE),
    _p(name="h100-sxm", display_name="NVIDIA H100 SXM 80GB", vendor="nvidia",
       compute_capability=(9, 0), arch="sm90", memory_gib=80, hbm_bandwidth_gbs=3350,
       fp8="e4m3fn", native_fp8_tensor_cores=True,
       aliases=("h100", "h100-sxm5", "h100-80gb", "h100-80gb-hbm3"),
       source="https://www.nvidia.com/en-us/data-center/h100/ (H100 SXM: 80GB, 3.35TB/s); CC: "
              + _CC_TABLE),
    _p(name="h200", display_name="NVIDIA H200 141GB", vendor="nvidia", compute_capability=(9, 0),
       arch="sm90", memory_gib=141, hbm_bandwidth_gbs=4800, fp8="e4m3fn",
       native_fp8_tensor_cores=True, aliases=("h200-sxm", "h200-nvl"),
       source="https://www.nvidia.com/en-us/data-center/h200/ (141GB HBM3e, 4.8TB/s); CC: "
              + _CC_TABLE),
    _p(name="h20", display_name="NVIDIA H20 96GB", vendor="nvidia", compute_capability=(9, 0),
       arch="sm90", memory_gib=96, hbm_bandwidth_gbs=4000, fp8="e4m3fn",
       native_fp8_tensor_cores=True, aliases=(),
       source="NVIDIA H20 partner spec sheets (96GB HBM3, 4.0TB/s; no public NVIDIA datasheet "
              "page); Hopper SM90 per " + _CC_TABLE),
    # ---- Blackwell datacenter: family 100 (SM100 / SM103).
    _p(name="b200", display_name="NVIDIA B200 180GB", vendor="nvidia", compute_capability=(10, 0),
       arch="sm100", memory_gib=180, hbm_bandwidth_gbs=8000, fp8="e4m3fn",
       native_fp8_tensor_cores=True, aliases=("hgx-b200", "dgx-b200"),
       source="https://www.nvidia.com/en-us/data-center/dgx-b200/ (1,440GB / 8 GPUs, 8TB/s per "
              "GPU); CC: " + _CC_TABLE),
    _p(name="gb200", display_name="NVIDIA GB200 (Grace Blackwell) 186GB", vendor="nvidia",
       compute_capability=(10, 0), arch="sm100", memory_gib=186, hbm_bandwidth_gbs=8000,
       fp8="e4m3fn", native_fp8_tensor_cores=True, aliases=("gb200-nvl72",),
       source="https://www.nvidia.com/en-us/data-center/gb200-nvl72/ (13.4TB HBM3e and 576TB/s "
              "over 72 GPUs); CC: " + _CC_TABLE),
    _p(name="b300", display_name="NVIDIA B300 (Blackwell Ultra) 288GB", vendor="nvidia",
       compute_capability=(10, 3), arch="sm103", memory_gib=288, hbm_bandwidth_gbs=8000,
       fp8="e4m3fn", native_fp8_tensor_cores=True, aliases=("hgx-b300", "b300-sxm"),
       source="https://www.nvidia.com/en-us/data-center/hgx/ (HGX B300: 2.3TB over 8 GPUs, 8TB/s "
              "per GPU); SM103 per " + _CC_TABLE),
    _p(name="gb300", display_name="NVIDIA GB300 (Grace Blackwell Ultra) 288GB", vendor="nvidia",
       compute_capability=(10, 3), arch="sm103", memory_gib=288, hbm_bandwidth_gbs=8000,
       fp8="e4m3fn", native_fp8_tensor_cores=True, aliases=("gb300-nvl72",),
       source="https://www.nvidia.com/en-us/data-center/gb300-nvl72/ (up to 288GB HBM3e per GPU, "
              "8TB/s); SM103 per " + _CC_TABLE),
    # ---- Blackwell workstation / consumer: family 120 (SM120 / SM121).
    _p(name="rtx-pro-6000", display_name="NVIDIA RTX PRO 6000 Blackwell 96GB", vendor="nvidia",
       compute_capability=(12, 0), arch="sm120", memory_gib=96, hbm_bandwidth_gbs=1792,
       fp8="e4m3fn", native_fp8_tensor_cores=True,
       aliases=("rtx-pro-6000-blackwell", "rtx-pro-6000-server", "rtx6000-pro", "pro6000"),
       source="https://www.nvidia.com/en-us/data-center/rtx-pro-6000-blackwell-server-edition/ "
              "(96GB GDDR7, 1792GB/s); CC: " + _CC_TABLE),
    _p(name="rtx-5090", display_name="NVIDIA GeForce RTX 5090 32GB", vendor="nvidia",
       compute_capability=(12, 0), arch="sm120", memory_gib=32, hbm_bandwidth_gbs=1792,
       fp8="e4m3fn", native_fp8_tensor_cores=True, aliases=("5090", "geforce-rtx-5090"),
       source="https://www.nvidia.com/en-us/geforce/graphics-cards/50-series/rtx-5090/ (32GB "
              "GDDR7, 1792GB/s); CC: " + _CC_TABLE),
    _p(name="dgx-spark", display_name="NVIDIA DGX Spark (GB10) 128GB unified", vendor="nvidia",
       compute_capability=(12, 1), arch="sm121", memory_gib=128, hbm_bandwidth_gbs=273,
       fp8="e4m3fn", native_fp8_tensor_cores=True, aliases=("gb10", "spark"),
       source="https://www.nvidia.com/en-us/products/workstations/dgx-spark/ (128GB LPDDR5x "
              "unified, 273GB/s); SM121 per " + _CC_TABLE),
    # ---- AMD Instinct. gfx94x -> float8_e4m3fnuz (`is_fp8_fnuz`: "gfx94" in arch); gfx950 -> OCP.
    _p(name="mi250x", display_name="AMD Instinct MI250X 128GB", vendor="amd",
       compute_capability=None, arch="gfx90a", memory_gib=128, hbm_bandwidth_gbs=3277,
       fp8="none", native_fp8_tensor_cores=False, aliases=("mi250",),
       source="https://www.amd.com/en/products/accelerators/instinct/mi200/mi250x.html"),
    _p(name="mi300x", display_name="AMD Instinct MI300X 192GB", vendor="amd",
       compute_capability=None, arch="gfx942", memory_gib=192, hbm_bandwidth_gbs=5300,
       fp8="e4m3fnuz", native_fp8_tensor_cores=True, aliases=("mi300",),
       source="https://www.amd.com/en/products/accelerators/instinct/mi300/mi300x.html "
              "(192GB HBM3, 5.3TB/s; CDNA3 gfx942)"),
    _p(name="mi325x", display_name="AMD Instinct MI325X 256GB", vendor="amd",
       compute_capability=None, arch="gfx942", memory_gib=256, hbm_bandwidth_gbs=6000,
       fp8="e4m3fnuz", native_fp8_tensor_cores=True, aliases=("mi325",),
       source="https://www.amd.com/en/products/accelerators/instinct/mi300/mi325x.html "
              "(256GB HBM3E, 6TB/s; CDNA3 gfx942)"),
    _p(name="mi355x", display_name="AMD Instinct MI355X 288GB", vendor="amd",
       compute_capability=None, arch="gfx950", memory_gib=288, hbm_bandwidth_gbs=8000,
       fp8="e4m3fn", native_fp8_tensor_cores=True, aliases=("mi355", "mi350x"),
       source="https://www.amd.com/en/products/accelerators/instinct/mi350/mi355x.html "
              "(288GB HBM3E, 8TB/s; CDNA4 gfx950 uses OCP FP8, not fnuz)"),
    # ---- Host CPU (vLLM CPU platform: CPU_ATTN / CPU_MLA / AMX_MLA).
    _p(name="cpu-x86-amx", display_name="x86-64 CPU with AVX-512 + AMX (Sapphire Rapids or newer)",
       vendor="cpu", compute_capability=None, arch="x86_64-amx", memory_gib=None,
       hbm_bandwidth_gbs=None, fp8="e4m3fn", native_fp8_tensor_cores=False,
       aliases=("cpu", "cpu-x86", "cpu-amx", "cpu-avx512"),
       source="vLLM 0.33 vllm/platforms/cpu.py and backends/cpu_attn.py (FP8 KV needs AVX-512 or "
              "AMX, reference §8)"),
    _p(name="cpu-x86-avx2", display_name="x86-64 CPU without AVX-512 (AVX2 only)", vendor="cpu",
       compute_capability=None, arch="x86_64-avx2", memory_gib=None, hbm_bandwidth_gbs=None,
       fp8="none", native_fp8_tensor_cores=False, aliases=("cpu-avx2",),
       source="vLLM 0.33 vllm/v1/attention/backends/cpu_attn.py: 'FP8 KV cache on CPU requires x86 "
              "with AVX-512 or AMX.' (reference §8)"),
)

GPU_PROFILES: Mapping[str, GpuProfile] = MappingProxyType({g.name: g for g in _PROFILES})
"""Every built-in profile by canonical name, in table order."""

GENERIC_CC_REPRESENTATIVES: Mapping[tuple[int, int], str] = MappingProxyType({
    (7, 0): "v100", (7, 5): "t4", (8, 0): "a100-80gb", (8, 6): "a10", (8, 9): "l40s",
    (9, 0): "h100-sxm", (10, 0): "b200", (10, 3): "b300", (12, 0): "rtx-pro-6000",
    (12, 1): "dgx-spark",
})
"""Which profile stands in for a bare compute capability (`sm90`, `9.0`, `90`)."""

GENERIC_ROCM_ARCH_REPRESENTATIVES: Mapping[str, str] = MappingProxyType({
    "gfx90a": "mi250x", "gfx942": "mi300x", "gfx950": "mi355x",
})
"""Which profile stands in for a bare ROCm gfx target."""

# Substrings of `torch.cuda.get_device_name()` -> profile, most specific first.
_DEVICE_NAME_PATTERNS: tuple[tuple[str, str], ...] = (
    (r"gb300", "gb300"), (r"gb200", "gb200"), (r"b300", "b300"), (r"b200", "b200"),
    (r"gb10\b|dgx spark", "dgx-spark"),
    (r"h100.*pcie", "h100-pcie"), (r"h100", "h100-sxm"), (r"h200", "h200"), (r"\bh20\b", "h20"),
    (r"a100.*80", "a100-80gb"), (r"a100", "a100-40gb"), (r"\ba10\b", "a10"),
    (r"l40s", "l40s"), (r"\bl4\b", "l4"),
    (r"rtx pro 6000", "rtx-pro-6000"), (r"5090", "rtx-5090"), (r"4090", "rtx-4090"),
    (r"v100", "v100"), (r"\bt4\b", "t4"),
    (r"mi355|mi350", "mi355x"), (r"mi325", "mi325x"), (r"mi300", "mi300x"), (r"mi250", "mi250x"),
)

_FIX = "pass --gpu h100 (see `kvplan gpus`)"


def _key(s: str) -> str:
    return re.sub(r"[^a-z0-9]", "", s.lower())


def _build_index() -> dict[str, str]:
    index: dict[str, str] = {}
    for g in _PROFILES:
        for n in (g.name, *g.aliases):
            k = _key(n)
            if k in index and index[k] != g.name:  # pragma: no cover - data error
                raise AssertionError(f"GPU alias {n!r} is ambiguous")
            index[k] = g.name
    return index


_INDEX = _build_index()


def all_gpu_names() -> list[str]:
    """Every accepted spelling (canonical names then aliases), for help text and suggestions."""
    names = [g.name for g in _PROFILES]
    return names + [a for g in _PROFILES for a in g.aliases]


def get_gpu(name: str) -> GpuProfile:
    """Exact canonical-name lookup (no aliases); raises KeyError."""
    return GPU_PROFILES[name]


_CC_RE = re.compile(r"^(?:sm|cc|compute|compute-capability)?[_\-\s]?(\d{1,3})(?:\.(\d))?[af]?$")


def _parse_cc(spec: str) -> tuple[int, int] | None:
    m = _CC_RE.match(spec.strip().lower())
    if not m:
        return None
    digits, minor = m.group(1), m.group(2)
    if minor is not None:
        return int(digits), int(minor)
    if len(digits) == 1:
        return int(digits), 0
    return int(digits[:-1]), int(digits[-1])


def _generic_cc(cc: tuple[int, int]) -> GpuProfile:
    rep_name = GENERIC_CC_REPRESENTATIVES.get(cc)
    if rep_name is None:
        known = ", ".join(f"sm{a}{b}" for a, b in GENERIC_CC_REPRESENTATIVES)
        raise KvplanInputError(
            f"no GPU profile for compute capability {cc[0]}.{cc[1]} (kvplan models {known}).",
            "pass a modelled compute capability or a GPU name, e.g. --gpu h100 (see `kvplan gpus`)",
        )
    rep = GPU_PROFILES[rep_name]
    sm = f"sm{cc[0]}{cc[1]}"
    return rep.model_copy(update={
        "name": sm,
        "display_name": f"generic {sm.upper()} ({_short(rep)})",
        "aliases": (),
        "source": f"generic compute capability {cc[0]}.{cc[1]}: numbers of {rep.display_name}. "
                  + rep.source,
    })


def _generic_rocm(arch: str) -> GpuProfile:
    rep = GPU_PROFILES[GENERIC_ROCM_ARCH_REPRESENTATIVES[arch]]
    return rep.model_copy(update={
        "name": arch,
        "display_name": f"generic {arch} ({_short(rep)})",
        "aliases": (),
        "source": f"generic ROCm target {arch}: numbers of {rep.display_name}. " + rep.source,
    })


def _short(g: GpuProfile) -> str:
    """`H100 SXM` out of `NVIDIA H100 SXM 80GB`."""
    s = re.sub(r"^(NVIDIA|AMD Instinct|AMD)\s+", "", g.display_name)
    s = re.sub(r"\s+\d+GB.*$", "", s)
    return s


def resolve_gpu(spec: str) -> GpuProfile:
    """Turn a `--gpu` value into a profile.

    Accepts, case-insensitively and ignoring punctuation: a canonical name or alias (`h100` is the
    H100 SXM, `a100` the 80GB part), a compute capability (`sm90`, `sm_90`, `9.0`, `90`, `sm100a`)
    giving a generic profile for that CC, a ROCm target (`gfx942`), or `auto` (detect with torch).
    Raises KvplanInputError for anything else, listing close matches.
    """
    raw = spec.strip()
    low = raw.lower()
    if not raw:
        raise KvplanInputError("empty --gpu value.", _FIX)
    if low == "auto":
        return detect_gpu()
    name = _INDEX.get(_key(raw))
    if name is not None:
        return GPU_PROFILES[name]
    cc = _parse_cc(low)
    if cc is not None:
        return _generic_cc(cc)
    arch = re.sub(r":.*$", "", low)  # "gfx942:sramecc+:xnack-" as torch reports it
    if arch in GENERIC_ROCM_ARCH_REPRESENTATIVES:
        return _generic_rocm(arch)
    candidates = all_gpu_names()
    close = difflib.get_close_matches(low, candidates, n=4, cutoff=0.5)
    hint = f" Did you mean: {', '.join(close)}?" if close else ""
    raise KvplanInputError(
        f"unknown GPU {raw!r}.{hint}",
        "pass a GPU name, alias or compute capability such as --gpu h100, --gpu sm90 or "
        "--gpu 9.0 (see `kvplan gpus`)",
    )


def detect_gpu() -> GpuProfile:
    """`--gpu auto`: ask torch for device 0 and match it to the table (lazy torch import)."""
    try:
        import torch
    except ImportError:
        raise KvplanInputError("cannot auto-detect the GPU: torch is not installed.", _FIX) from None
    if not torch.cuda.is_available():
        raise KvplanInputError("cannot auto-detect the GPU: torch sees no CUDA/ROCm device.", _FIX)
    device_name = str(torch.cuda.get_device_name(0))
    is_rocm = bool(getattr(getattr(torch, "version", None), "hip", None))
    props = torch.cuda.get_device_properties(0)
    total_gib = getattr(props, "total_memory", 0) / 2**30 or None
    if is_rocm:
        gcn = str(getattr(props, "gcnArchName", "") or "").split(":")[0].lower()
        return _match_device(device_name, None, gcn or None, total_gib)
    major, minor = torch.cuda.get_device_capability(0)
    return _match_device(device_name, (int(major), int(minor)), None, total_gib)


def _match_device(device_name: str, cc: tuple[int, int] | None, gcn_arch: str | None,
                  total_gib: float | None) -> GpuProfile:
    low = device_name.lower()
    for pattern, name in _DEVICE_NAME_PATTERNS:
        if re.search(pattern, low):
            prof = GPU_PROFILES[name]
            if cc is not None and prof.compute_capability != cc:
                continue  # name matched but CC disagrees: trust the capability
            if gcn_arch is not None and prof.arch != gcn_arch:
                continue
            return prof
    if gcn_arch is not None and gcn_arch in GENERIC_ROCM_ARCH_REPRESENTATIVES:
        prof = _generic_rocm(gcn_arch)
    elif cc is not None and cc in GENERIC_CC_REPRESENTATIVES:
        prof = _generic_cc(cc)
    else:
        what = gcn_arch or (f"compute capability {cc[0]}.{cc[1]}" if cc else "unknown")
        raise KvplanInputError(
            f"auto-detected GPU {device_name!r} ({what}) is not in kvplan's table.", _FIX)
    update: dict[str, Any] = {"display_name": f"{device_name} (detected; {prof.display_name})"}
    if total_gib:
        update["memory_gib"] = round(total_gib, 2)
    return prof.model_copy(update=update)


@dataclass(frozen=True)
class GpuFacts:
    """The GPU a plan is made for: the facts the planner reads, and the profile backend rules read.

    Built from a profile by `GpuFacts.from_profile` (or `gpu_facts(--gpu value)`); a hand-built one
    without a profile sizes memory but leaves backend selection silent.
    """

    name: str
    """Profile name (`h100-sxm`, `sm90`, ...)."""
    memory_gib: float | None = None
    """Memory per GPU (GiB), None if unknown."""
    compute_capability: tuple[int, int] | None = None
    """CUDA compute capability, None off CUDA."""
    fp8: str = "e4m3fn"
    """FP8 KV format on the device: `none`, `e4m3fn` or `e4m3fnuz` (`GpuProfile.fp8`)."""
    supports_bf16: bool = True
    """False on NVIDIA below SM80 (vLLM refuses a bfloat16 model there)."""
    profile: GpuProfile | None = None
    """The full profile (backend selection reads it); None for hand-built facts."""

    @classmethod
    def from_profile(cls, profile: GpuProfile) -> GpuFacts:
        """The facts of a profile."""
        cc = profile.compute_capability
        return cls(name=profile.name, memory_gib=profile.memory_gib, compute_capability=cc, fp8=profile.fp8,
                   supports_bf16=profile.vendor != "nvidia" or not (cc and cc < (8, 0)), profile=profile)

    @property
    def cc_str(self) -> str | None:
        """Compute capability as vLLM prints it, e.g. `9.0`."""
        return ".".join(map(str, self.compute_capability)) if self.compute_capability else None


def gpu_facts(gpu: str | GpuProfile | GpuFacts | None) -> GpuFacts | None:
    """`--gpu` (a name, alias, compute capability or `auto`), a profile, or facts -> GpuFacts (None stays None)."""
    if gpu is None or isinstance(gpu, GpuFacts):
        return gpu
    return GpuFacts.from_profile(resolve_gpu(gpu) if isinstance(gpu, str) else gpu)
