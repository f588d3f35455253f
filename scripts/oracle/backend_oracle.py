#!/usr/bin/env python3
"""Attention-backend oracle: ask the installed vLLM which backend its selector picks, and why it refuses the others.

Run with the oracle interpreter (CPU only, no GPU needed; never in CI):

    "$ORACLE_VENV/bin/python" scripts/oracle/backend_oracle.py --out tests/data/vllm_oracle_backends/0.33.0
    PYTHONPATH=/tmp/kvplan-oracle-releases/vllm-0.34.0:/tmp/kvplan-oracle-releases/deps \\
        "$ORACLE_VENV/bin/python" scripts/oracle/backend_oracle.py --out tests/data/vllm_oracle_backends/0.34.0

(scripts/oracle/backend_oracle.sh VERSION does both steps for a release.) For every GPU of `GPUS` (one
subprocess each, because vLLM caches per-device answers) and every attention configuration of the grid
(`cases()`), it records what vLLM's own code answers:

  * `priority`: `vllm/platforms/cuda.py::_get_backend_priorities` for the configuration;
  * `reasons`: `AttentionBackend.validate_configuration` (vllm/v1/attention/backend.py: the shared checks plus
    the backend's `supports_combination`) of every backend kvplan models for CUDA, [] when valid;
  * `selected`: what `CudaPlatform.get_attn_backend_cls(None, ...)` returns (the walk over `priority`), or the
    ValueError it raises (`error`).

What is not stock vLLM is listed in `PATCHES` (runtime patches in this process; no vLLM file is changed).
Backends whose class still cannot be imported are listed under `unjudged` with the error, never guessed.
Output: one compact JSON file per GPU (`<gpu>.json`), keys sorted, plus `meta.json` (vLLM version, patches).
"""
from __future__ import annotations

import argparse
import importlib.abc
import importlib.machinery
import itertools
import json
import os
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

GPUS: dict[str, tuple[int, int]] = {
    "a100": (8, 0), "l40s": (8, 9), "h100": (9, 0), "b200": (10, 0), "b300": (10, 3), "rtx-pro-6000": (12, 0)}
"""GPU name (kvplan's `--gpu` spelling) -> CUDA compute capability under test."""

ROCM_GPUS: dict[str, tuple[str, bool]] = {
    "mi250x": ("gfx90a", False), "mi300x": ("gfx942", False), "mi300x-aiter": ("gfx942", True),
    "mi355x": ("gfx950", False), "mi355x-aiter": ("gfx950", True)}
"""ROCm GPUs under test: kvplan `--gpu` name (`-aiter`: VLLM_ROCM_USE_AITER=1, kvplan's attention_config
`rocm_use_aiter`) -> (gfx target, AITER enabled)."""

ROCM_JUDGED = (
    "ROCM_ATTN", "ROCM_AITER_FA", "ROCM_AITER_UNIFIED_ATTN", "TRITON_ATTN", "TURBOQUANT", "ROCM_OCTAVE", "ULTRAQUANT",
    "ROCM_SEGMENTED_ATTN", "TRITON_ATTN_DIFFKV", "TRITON_MLA", "ROCM_AITER_MLA", "ROCM_AITER_TRITON_MLA",
    "ROCM_AITER_MLA_SPARSE")
"""Backends whose `validate_configuration` is recorded on ROCm GPUs."""

JUDGED = (
    "FLASH_ATTN", "FLASHINFER", "TRITON_ATTN", "FLEX_ATTENTION", "TURBOQUANT", "TRITON_ATTN_DIFFKV", "B12X",
    "HPC_ATTN", "ULTRAQUANT", "FLASHINFER_MLA", "TOKENSPEED_MLA", "CUTLASS_MLA", "FLASH_ATTN_MLA", "FLASHMLA",
    "TRITON_MLA", "FLASHINFER_MLA_SPARSE", "FLASHMLA_SPARSE", "FLASH_ATTN_MLA_SPARSE",
    "FLASH_ATTN_MLA_SPARSE_FA4", "FLASHINFER_MLA_SPARSE_SM90", "FLASHINFER_MLA_SPARSE_SM120", "FLASH_ATTN_DIFFKV")
"""Backends whose `validate_configuration` is recorded for every case (CUDA backends kvplan has rows for, plus
FLASH_ATTN_DIFFKV)."""

PATCHES = (
    "1. Import-level stubs (_STUB_PREFIXES) for compiled extensions and CUDA-only packages that do not load on a "
    "CPU machine (vllm._C*, the FlashAttention extension modules, flashinfer, ...): modules whose every attribute "
    "is an inert class. They make the backend modules importable; their capability checks are plain Python. "
    "FA2_AVAILABLE/FA3_AVAILABLE are then True, as on a CUDA install of the wheel.",
    "2. vllm.platforms._current_platform is vLLM's own NonNvmlCudaPlatform with get_device_capability (and "
    "get_device_name, num_compute_units) answering the GPU under test; is_device_capability_family, "
    "has_device_capability and the backends read the capability through it (vllm modules imported before the "
    "switch get their `current_platform` name rebound).",
    "3. torch.cuda.get_device_capability / torch.cuda.is_available answer the GPU under test.",
    "4. The current VllmConfig is VllmConfig(cache_config=CacheConfig(cache_dtype=<case kv dtype>[, block_size=<case "
    "block size>])): no model config (checks that read the model's hf_config are skipped), attention_config "
    "defaults (no FA version override, trtllm auto), no KV connector, no context parallelism, no batch invariance.",
    "5. While the backend classes are imported, torch.empty(device='cuda') allocates on the meta device "
    "(mla/cutlass_mla.py allocates its workspace at import).",
    "6. vllm/utils/flashinfer.py probes in _INSTALLED_FEATURES answer True: FlashInfer as the wheel pins it, with "
    "its cubins, is installed (the stub cannot be introspected; the artifactory probe would need the network).",
    "7. Every GPU runs in its own process (vLLM caches per-device answers with functools.cache).",
    "8. ROCm: amdsmi is a stub answering the gfx target under test (vllm/platforms/rocm.py reads it once at import); "
    "aiter is an import-level stub (installed, as in vLLM's ROCm images); VLLM_ROCM_USE_AITER is set for the "
    "'-aiter' GPUs; the current platform is vLLM's own RocmPlatform.",
    "9. The grid asks only the --kv-cache-dtype values of the release's own CacheDType (an older release's parser "
    "refuses the others before a backend is asked); a JUDGED backend the release's AttentionBackendEnum does not "
    "name is listed under `absent` (the release has no such backend), never judged.",
    "10. A case property the release's AttentionSelectorConfig has no field for (has_sliding_window before 0.26) "
    "is not passed: the release's layers ask its selector without it, so such a case answers as its twin without "
    "the property.",
)
"""Everything in the harness that is not stock vLLM (also written to meta.json)."""

_STUB_PREFIXES = (
    "vllm._C", "vllm._C_stable_libtorch", "vllm._moe_C", "vllm._flashmla_C", "vllm._flashmla_extension_C",
    "vllm.vllm_flash_attn._vllm_fa2_C", "vllm.vllm_flash_attn._vllm_fa3_C", "vllm._qutlass_C",
    "flashinfer", "flashinfer_cubin", "tokenspeed_mla", "deep_gemm", "cutlass", "nvidia.cutlass_dsl",
    "cuda", "triton_kernels", "b12x", "hpc_attn", "quack")
"""Modules replaced by inert stubs at import (patch 1). A real module of these names is never imported."""

_INSTALLED_FEATURES = ("has_flashinfer", "has_flashinfer_cubin", "has_nvidia_artifactory",
                       "has_flashinfer_sm90_nope_mla", "has_flashinfer_sparse_mla_sm120")
"""vllm/utils/flashinfer.py feature probes answered True (patch 6): the FlashInfer the wheel pins is installed
with its cubins (no network probe of NVIDIA's artifactory)."""

_ROCM_STUB_PREFIXES = ("aiter", "vllm._rocm_C", "flash_attn")
"""Added to the stubs on ROCm GPUs (patch 8): AITER and ROCm's compiled ops, upstream flash-attn."""

DENSE_HEAD_SIZES = (64, 80, 96, 128, 192, 256, 512)
DENSE_KV = ("auto", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2", "nvfp4", "int8_per_token_head",
            "fp8_per_token_head", "turboquant_k8v4", "ultraquant_4bit")
BLOCKS = (None, 16, 32, 64, 128)
MLA_KV = ("auto", "bfloat16", "fp8", "fp8_e4m3", "fp8_ds_mla", "nvfp4_ds_mla")


# ---------------------------------------------------------------------------- patch 1: stubs
class _InertMeta(type):
    """Metaclass of the stub classes: any attribute is another stub class; `X | Y` works (annotations)."""

    def __getattr__(cls, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _inert(name)

    def __getitem__(cls, key: Any) -> Any:
        return cls


class _Inert(metaclass=_InertMeta):
    """An instance of a stub class: callable (as a decorator it returns the function), any attribute."""

    def __init__(self, *a: Any, **k: Any) -> None:
        pass

    def __call__(self, *a: Any, **k: Any) -> Any:
        return a[0] if len(a) == 1 and callable(a[0]) and not k else _Inert()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _inert(name)

    def __getitem__(self, key: Any) -> Any:
        return _Inert()

    def __iter__(self) -> Any:
        return iter(())


def _inert(name: str) -> type:
    return _InertMeta(name, (_Inert,), {})


class _StubModule(types.ModuleType):
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _inert(name)


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, prefixes: tuple[str, ...] = ()) -> None:
        self.prefixes = _STUB_PREFIXES + prefixes

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if any(fullname == p or fullname.startswith(p + ".") for p in self.prefixes):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec: Any) -> types.ModuleType:
        mod = _StubModule(spec.name)
        mod.__path__ = []  # a package, so submodules resolve through this finder too
        return mod

    def exec_module(self, module: types.ModuleType) -> None:
        pass


# ---------------------------------------------------------------------------- the grid
def _case(head_size: int, kv: str, block: int | None, *, dtype: str = "bfloat16", use_mla: bool = False,
          sparse: bool = False, sinks: bool = False, sw: bool = False, attn_type: str = "decoder",
          num_heads: int | None = None) -> dict[str, Any]:
    return {"head_size": head_size, "kv_cache_dtype": kv, "block_size": block, "dtype": dtype, "use_mla": use_mla,
            "use_sparse": sparse, "has_sink": sinks, "has_sliding_window": sw, "attn_type": attn_type,
            "num_heads": num_heads}


def _release_kv_dtypes() -> frozenset[str]:
    """The --kv-cache-dtype values the imported release offers (vllm/config/cache.py::CacheDType; patch 9)."""
    import typing

    from vllm.config.cache import CacheDType

    return frozenset(typing.get_args(CacheDType))


def cases() -> list[dict[str, Any]]:
    """The attention configurations asked on every GPU (only the release's own KV cache dtypes, patch 9)."""
    offered = _release_kv_dtypes()
    return [c for c in _grid() if c["kv_cache_dtype"] in offered]


def _grid() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    # dense decoder: head size x KV dtype x block size x (window, sinks)
    for h, kv, blk, (sw, sinks) in itertools.product(DENSE_HEAD_SIZES, DENSE_KV, BLOCKS,
                                                     ((False, False), (True, False), (False, True), (True, True))):
        out.append(_case(h, kv, blk, sw=sw, sinks=sinks))
    # model dtype
    for h, kv, dt in itertools.product((64, 128, 256), ("auto", "float16", "fp8", "fp8_e5m2", "nvfp4"),
                                       ("float16", "float32")):
        if kv == "float16" and dt != "float16":
            continue
        out.append(_case(h, kv, None, dtype=dt))
    # attention types
    for h, kv, at in itertools.product((64, 128), ("auto", "fp8"), ("encoder", "encoder_only", "encoder_decoder")):
        out.append(_case(h, kv, None, attn_type=at))
    # MLA (576 = 512 + 64 latent; 512 = NoPE) and sparse MLA
    for h, kv, blk, sparse, heads, sw in itertools.product((576, 512), MLA_KV, BLOCKS, (False, True),
                                                          (16, 128), (False, True)):
        out.append(_case(h, kv, blk, use_mla=True, sparse=sparse, num_heads=heads, sw=sw))
    return out


# ---------------------------------------------------------------------------- one GPU (worker)
def cuda_platform(cc: tuple[int, int], gpu: str) -> tuple[Any, Any, Any]:
    """vLLM's NonNvmlCudaPlatform answering compute capability `cc` (patch 2), with the import-level stubs
    installed (patch 1) and FlashInfer's features answered (patch 6); the CPU platform stays current.
    Returns (vllm.platforms.cuda, the DeviceCapability, the platform). Also used by capacity_oracle.py."""
    if not any(isinstance(f, _StubFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _StubFinder())
    import vllm.platforms.cuda as cuda
    from vllm.platforms.interface import DeviceCapability

    cap = DeviceCapability(*cc)
    plat_cls = cuda.NonNvmlCudaPlatform
    plat_cls.get_device_capability = classmethod(lambda cls, device_id=0: cap)  # type: ignore[method-assign]
    plat_cls.get_device_name = classmethod(lambda cls, device_id=0: gpu)  # type: ignore[method-assign]
    plat_cls.num_compute_units = classmethod(lambda cls, device_id=0: 132)  # type: ignore[method-assign]
    import vllm.utils.flashinfer as fi

    for name in _INSTALLED_FEATURES:  # patch 6
        setattr(fi, name, lambda *a, **k: True)
    return cuda, cap, plat_cls()


def make_current(platform: Any) -> Any:
    """Patch 2: `platform` becomes vllm.platforms' current platform, and every vllm module that bound
    `current_platform` by name sees it. Returns the platform it replaced."""
    import vllm.platforms as platforms

    before = platforms.current_platform
    platforms._current_platform = platform
    for mod in list(sys.modules.values()):  # modules imported before this bound vLLM's CPU platform by name
        if getattr(mod, "__name__", "").startswith("vllm.") and hasattr(mod, "current_platform"):
            mod.current_platform = platform
    return before


def _install_platform(cc: tuple[int, int], gpu: str) -> Any:
    sys.meta_path.insert(0, _StubFinder())
    import torch

    torch.cuda.get_device_capability = lambda device=None: cc  # patch 3
    torch.cuda.is_available = lambda: True
    cuda, cap, platform = cuda_platform(cc, gpu)
    make_current(platform)
    return cuda, cap


def _install_rocm_platform(arch: str, aiter: bool) -> Any:
    """vLLM's RocmPlatform as the current platform on gfx target `arch` (patches 1, 2, 8)."""
    sys.meta_path.insert(0, _StubFinder(_ROCM_STUB_PREFIXES))
    amdsmi = types.ModuleType("amdsmi")
    for name in ("amdsmi_init", "amdsmi_shut_down", "amdsmi_topo_get_link_type", "amdsmi_topo_get_numa_node_number",
                 "amdsmi_get_gpu_device_uuid", "amdsmi_get_gpu_memory_total", "AmdSmiException"):
        setattr(amdsmi, name, _inert(name))
    amdsmi.amdsmi_get_processor_handles = lambda: [0]  # type: ignore[attr-defined]
    amdsmi.amdsmi_get_gpu_asic_info = lambda h: {"target_graphics_version": arch}  # type: ignore[attr-defined]
    amdsmi.AmdSmiMemoryType = _inert("AmdSmiMemoryType")  # type: ignore[attr-defined]
    sys.modules["amdsmi"] = amdsmi
    if aiter:
        os.environ["VLLM_ROCM_USE_AITER"] = "1"
    import torch

    torch.cuda.is_available = lambda: True
    import vllm.platforms as platforms
    import vllm.platforms.rocm as rocm

    platform = rocm.RocmPlatform()
    platforms._current_platform = platform
    for mod in list(sys.modules.values()):
        if getattr(mod, "__name__", "").startswith("vllm.") and hasattr(mod, "current_platform"):
            mod.current_platform = platform
    return rocm, rocm.RocmPlatform.get_device_capability()


def _priority(module: Any, sel: Any, cap: Any, case: dict[str, Any]) -> list[str]:
    """The platform module's `_get_backend_priorities` for the case (its signature differs per platform)."""
    import inspect

    offered = {"use_mla": sel.use_mla, "use_sparse": sel.use_sparse, "device_capability": cap,
               "num_heads": case["num_heads"], "kv_cache_dtype": sel.kv_cache_dtype, "use_non_causal": False,
               "head_size": sel.head_size, "use_mm_prefix": False, "use_kv_connector": False}
    params = inspect.signature(module._get_backend_priorities).parameters
    return [b.name for b in module._get_backend_priorities(**{k: v for k, v in offered.items() if k in params})]


def _import_classes(names: tuple[str, ...]) -> tuple[dict[str, Any], dict[str, str]]:
    """The backend classes, imported with `torch.empty(device="cuda")` on the meta device (patch 5)."""
    import torch
    from vllm.v1.attention.backends.registry import AttentionBackendEnum

    real_empty = torch.empty

    def empty(*a: Any, **k: Any) -> Any:
        if str(k.get("device", "")).startswith("cuda"):
            k["device"] = "meta"
        return real_empty(*a, **k)

    classes: dict[str, Any] = {}
    unjudged: dict[str, str] = {}
    torch.empty = empty
    try:
        for name in names:
            if name not in AttentionBackendEnum.__members__:  # patch 9: not a backend of this release
                continue
            try:
                classes[name] = AttentionBackendEnum[name].get_class()
            except Exception as e:
                unjudged[name] = f"{type(e).__name__}: {e}"
    finally:
        torch.empty = real_empty
    return classes, unjudged


def _vllm_config(case: dict[str, Any]) -> Any:
    """The run's config as vLLM would hold it for a model whose every layer is the case (patch 4)."""
    from vllm.config import CacheConfig, VllmConfig

    kw: dict[str, Any] = {"cache_dtype": case["kv_cache_dtype"]}
    if case["block_size"] is not None:
        kw["block_size"] = case["block_size"]
    return VllmConfig(cache_config=CacheConfig(**kw))


def _torch_dtype(name: str) -> Any:
    import torch

    return getattr(torch, name)


def _judge(module: Any, cap: Any, case: dict[str, Any], classes: dict[str, Any]) -> dict[str, Any]:
    from vllm.v1.attention.selector import AttentionSelectorConfig

    asked = dict(head_size=case["head_size"], dtype=_torch_dtype(case["dtype"]), kv_cache_dtype=case["kv_cache_dtype"],
                 block_size=case["block_size"], use_mla=case["use_mla"], has_sink=case["has_sink"],
                 use_sparse=case["use_sparse"], attn_type=case["attn_type"],
                 has_sliding_window=case["has_sliding_window"])
    # patch 10: a release whose selector config has no field for a property (has_sliding_window before 0.26)
    # is asked without it, as its attention layers ask
    sel = AttentionSelectorConfig(**{k: v for k, v in asked.items() if k in AttentionSelectorConfig._fields})
    priority = _priority(module, sel, cap, case)
    reasons: dict[str, list[str]] = {}
    for name, cls in classes.items():
        if cls.is_mla() != sel.use_mla:
            continue  # the other attention class: always "MLA not supported" / "non-MLA not supported"
        try:
            reasons[name] = list(cls.validate_configuration(device_capability=cap, **sel._asdict()))
        except Exception as e:  # a capability check that needs the device: recorded, not guessed
            reasons[name] = [f"oracle: {type(e).__name__}: {e}"]
    out: dict[str, Any] = {"case": case, "priority": priority,
                           "reasons": {k: v for k, v in sorted(reasons.items()) if v}}
    try:
        from vllm.platforms import current_platform

        path = type(current_platform).get_attn_backend_cls(None, attn_selector_config=sel, num_heads=case["num_heads"])
        out["selected"] = _enum_name_of(path)
    except ValueError as e:
        out["selected"] = None
        out["error"] = str(e).split(" with AttentionSelectorConfig")[0]
    return out


def _enum_name_of(path: str) -> str:
    from vllm.v1.attention.backends.registry import AttentionBackendEnum

    for b in AttentionBackendEnum:
        try:
            if b.get_path() == path:
                return b.name
        except Exception:
            continue
    return path


CASE_KEYS = ("head_size", "kv_cache_dtype", "block_size", "dtype", "use_mla", "use_sparse", "has_sink",
             "has_sliding_window", "attn_type", "num_heads")
"""Order of a case's values in the stored `cases` rows."""


def _interned(answers: list[dict[str, Any]]) -> dict[str, Any]:
    """The answers with every repeated part stored once.

    `cases[i]` lists case i's values in CASE_KEYS order; `answers[i]` is `[priority, reasons, selected, error]`:
    `priority` indexes `priorities` (backend names), `reasons` indexes `reason_maps` (backend -> indexes of
    `reason_lists`; a backend absent from the map is valid), `selected` is the backend vLLM returns (None when it
    raises `error`, its message up to the selector-config repr).
    """
    tables: dict[str, dict[str, int]] = {"priorities": {}, "reason_lists": {}, "reason_maps": {}}

    def idx(table: str, value: Any) -> int:
        key = json.dumps(value, sort_keys=True)
        return tables[table].setdefault(key, len(tables[table]))

    rows, out = [], []
    for a in answers:
        rows.append([a["case"][k] for k in CASE_KEYS])
        rmap = {b: idx("reason_lists", r) for b, r in a["reasons"].items()}
        out.append([idx("priorities", a["priority"]), idx("reason_maps", rmap), a["selected"], a.get("error")])
    return {"case_keys": list(CASE_KEYS), "cases": rows, "answers": out,
            **{t: [json.loads(k) for k in v] for t, v in tables.items()}}


def worker(gpu: str, out: Path) -> None:
    if gpu in ROCM_GPUS:
        module, cap = _install_rocm_platform(*ROCM_GPUS[gpu])
        classes, unjudged = _import_classes(ROCM_JUDGED)
        where: dict[str, Any] = {"gcn_arch": ROCM_GPUS[gpu][0], "aiter": ROCM_GPUS[gpu][1]}
    else:
        module, cap = _install_platform(GPUS[gpu], gpu)
        classes, unjudged = _import_classes(JUDGED)
        where = {}
    from vllm.config import set_current_vllm_config

    answers = []
    for case in cases():
        with set_current_vllm_config(_vllm_config(case)):  # patch 4
            answers.append(_judge(module, cap, case, classes))
    from vllm.v1.attention.backends.registry import AttentionBackendEnum

    absent = sorted(n for n in (ROCM_JUDGED if gpu in ROCM_GPUS else JUDGED)
                    if n not in AttentionBackendEnum.__members__)
    doc = {"gpu": gpu, "compute_capability": [cap.major, cap.minor], "unjudged": unjudged, "absent": absent, **where,
           **_interned(answers)}
    (out / f"{gpu}.json").write_text(_dumps(doc))


def _dumps(doc: dict[str, Any]) -> str:
    """Compact JSON, keys sorted, one table row per line (so a release-to-release diff reads row by row)."""
    parts = []
    for key in sorted(doc):
        value = doc[key]
        if isinstance(value, list) and value and isinstance(value[0], (list, dict)):
            rows = ",\n".join(json.dumps(v, sort_keys=True, separators=(",", ":")) for v in value)
            parts.append(f"{json.dumps(key)}:[\n{rows}\n]")
        else:
            parts.append(f"{json.dumps(key)}:{json.dumps(value, sort_keys=True, separators=(',', ':'))}")
    return "{\n" + ",\n".join(parts) + "\n}\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True, help="directory for <gpu>.json and meta.json")
    ap.add_argument("--gpu", choices=sorted(GPUS) + sorted(ROCM_GPUS),
                    help="worker mode: answer one GPU in this process")
    ap.add_argument("--gpus", nargs="*", default=sorted(GPUS) + sorted(ROCM_GPUS),
                    help="GPUs to answer (default: all)")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")  # vLLM's import-time platform probe stays on the CPU
    if args.gpu:
        worker(args.gpu, args.out)
        return 0
    for gpu in args.gpus:
        subprocess.run([sys.executable, __file__, "--out", str(args.out), "--gpu", gpu], check=True)
    import vllm

    meta = {"vllm": vllm.__version__, "gpus": {g: list(GPUS.get(g) or ROCM_GPUS[g]) for g in args.gpus},
            "judged": list(JUDGED), "rocm_judged": list(ROCM_JUDGED),
            "stubbed_modules": list(_STUB_PREFIXES), "cases": len(cases()),
            "kv_cache_dtypes": sorted(_release_kv_dtypes()),
            "patches": list(PATCHES)}
    (args.out / "meta.json").write_text(json.dumps(meta, sort_keys=True, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
