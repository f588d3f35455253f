#!/usr/bin/env python3
"""Differential oracle over many model configs in one process: what KV caches does vLLM build?

Run by hand with an interpreter that has vLLM 0.33.0 installed (CPU is enough; never in CI):

    VLLM_TARGET_DEVICE=cpu <venv>/bin/python scripts/oracle/arch_oracle.py \
        --cases tests/data/vllm_oracle_arch/cases.json [--only NAME ...] [--force]

For every case (a config.json plus serving flags) it runs vLLM's own code:
  * `EngineArgs(...).create_engine_config()` (config parsing, dtype, kv-cache-dtype resolution,
    the model's config hooks, quantization config),
  * `initialize_model(vllm_config)` on torch's meta device: the real vLLM model class of the
    config's architecture builds its attention, MLA, indexer, Mamba and linear-attention layers,
  * every layer vLLM registered in `static_forward_context` that defines `get_kv_cache_spec` is
    asked for its spec, so every KV cache vLLM would allocate per layer is reported (sparse
    attention indexer caches included), with its per-token bytes computed from the spec
    (`real_page_size_bytes / block_size`).

What is patched for this to run on a CPU-only machine (no vLLM function body is changed):
  1. VLLM_TARGET_DEVICE=cpu: vLLM's CpuPlatform. Its attention-backend choice is replaced by the
     real CPU_ATTN / CPU_MLA backend classes without the CPU-only kv-dtype support check.
  2. The model-class inspection vLLM runs in a subprocess (`_run_in_subprocess`) is run in this
     process instead (the subprocess fails for multimodal classes in the CPU venv).
  3. A model_type that neither transformers nor vLLM knows (remote code) gets a plain
     `PretrainedConfig` subclass registered under that name for the run, which keeps every key
     of config.json as an attribute (what the remote config class would publish). A case marked
     `remote_config` gets the same stand-in for a model_type transformers does know: its published
     checkpoint ships its own config class (auto_map), which vLLM runs under trust_remote_code
     and whose keys differ from transformers' class of that name (Molmo2's `vit_config`). A case's
     `remote_config_base` names the transformers model_type whose class the remote one extends. Its
     `*_config` sub-dicts become config objects (the known model_type's class, else a plain one),
     lists of per-layer records (DeciLM's block_configs) read by attribute as the remote class
     parses them. `per_layer_config` is transformers' own heterogeneous-config key (layer index ->
     overrides), which the base class parses itself.
  4. One gloo process group (world size 1) is initialised once for all cases.
  5. torchvision cannot be installed next to the CPU torch of the oracle venv, and a few other
     packages that only multimodal processors use are not installed (STUB_MODULES); multimodal
     model files import them at module level. Such an import, when the package is missing, gets
     an empty stand-in module (any attribute is a placeholder class), so the language model and
     its attention layers build (no processor ever runs here).
  6. `FusedMoEConfig.__post_init__` refuses non-gated MoE activations on a CPU platform, and the
     unquantized MoE kernel choice finds no CPU kernel for them (kernel availability, not model
     facts): the check runs with the platform reported as CUDA-alike, and a failed kernel choice
     falls back to the CPU backend (no kernel ever runs here).
  7. Compiled ops (`torch.ops._C.*`, vllm._C) do not load with the CPU torch of the venv; layers
     that look an op up while being built (activations) get a placeholder callable.
  8. `torch.cuda.Event` and `torch.cuda.Stream` (created by a few model classes at build time for
     stream overlap) are a no-op class instead of torch's CUDA-less dummies that raise.
  9. `triton.set_allocator` (newer Triton API some model classes call at build time) is a no-op
     when the venv's Triton lacks it.
 10. A model class that cannot be built on the meta device (it reads a tensor's value at build
     time: "Cannot copy out of meta tensor", ".item() on meta tensors") is built again on the
     CPU device (weights are allocated with torch.empty, never written).
 11. The CPU attention backend reports ALiBi-sqrt support (Step1 refuses a backend without it; a
     kernel capability, not a KV cache fact); kernel options its impl lacks (use_alibi_sqrt,
     chunk_lookback) are dropped when it is built.
 12. A case marked `v2_model_runner` (a model class that requires Model Runner V2, which vLLM
     selects on GPUs) runs with VLLM_USE_V2_MODEL_RUNNER=1.
 13. The CPU platform's switching prefix caching off for MLA models is undone (a CPU scheduling
     choice that makes hybrid MLA + Mamba models fail vLLM's mamba-block-size check).
 14. Cases run with `skip_tokenizer_init` (the case folder holds a config.json only), but some
     multimodal classes read the tokenizer: processor-info classes while vLLM validates the model
     config (which modalities the vocabulary supports), model classes at build time (the id of
     their image placeholder token). Both get a minimal word-level tokenizer (a few special tokens
     and the common media placeholders) instead of None and vLLM's "You cannot pass text prompts"
     refusal. No prompt is ever processed; the KV cache specs do not read it.
 15. A case may carry `files` (file name -> JSON), written next to config.json: the processor
     files (preprocessor_config.json ...) a published checkpoint ships and that a multimodal
     processor-info class loads while vLLM validates the model config.
 16. flash_attn is one of the stand-in modules of patch 5, so a model class that forces
     `flash_attention_2` on a transformers sub-module when flash_attn imports (Qwen2.5-Omni's audio
     tower) would have transformers refuse the missing kernel package: that request falls back to
     sdpa (encoder attention registers no KV cache).
 17. A vision tower that asks for a GPU ViT attention backend (FLASH_ATTN) by name gets the CPU
     platform's TORCH_SDPA instead of an assertion (encoder attention registers no KV cache).
 18. Without timm, transformers' TimmWrapperModel (a vision tower AutoModel builds, e.g. Gemma 3n's)
     is an empty module holding its config: a vision tower holds no KV cache.
 19. A case's `vllm_config_class` names a config class vLLM ships (vllm/transformers_utils/configs)
     for a model_type that neither vLLM's config registry nor transformers maps to it (MiniMax-M3's
     text backbone, minimax_m3_text): that class is registered for the run, as the checkpoint's
     own config class would be, instead of patch 3's stand-in (which would turn its settings dicts,
     `sparse_attention_config`, into config objects the model class cannot index). The config
     was written from that very class (make_arch_cases.py); the KV facts come from its keys.
 20. Without a Triton GPU driver vLLM's `tl` is its placeholder module, which lacks
     `tl.extra` (`tl.extra.cuda.libdevice`, read at import time by Step 5's kernel modules): it gets
     an empty namespace (any attribute is one); no kernel is compiled or run here.
 21. A case marked `flashinfer_impl_check` (Flint's decoder asserts its attention impl is
     FlashInfer's: its fused kernels write the cache in FlashInfer's layout) runs with the CPU
     attention impl registered as a virtual subclass of FlashInferImpl (abc register; cleared after
     the case). The layer is still vLLM's Attention with the CPU backend; its KV cache spec (heads,
     head size, window, dtype) does not depend on the backend class, and no kernel runs.
 22. A case marked `device_capability` ([9, 0]: an H100's) runs with the platform reporting that
     compute capability (the CPU platform reports none): Step 5's sparse-attention (DSA) backend
     refuses to build without SM90/SM100/SM103 (DeepSeek-V4.1's attention picks its FP8 einsum
     recipe by it), and its impl sizes a kernel workspace from the
     device's properties (torch.cuda's capability / SM count answer as that GPU's; the workspace goes
     to device index 0 of the CPU platform's device type). A kernel-availability
     check, not a KV cache fact: the specs its layers register are read from the config.
 25. `vllm.vllm_flash_attn` refuses to import without its CUDA extensions (_vllm_fa2_C / _vllm_fa3_C),
     and model files that import a FlashAttention MLA backend at module level (Dots3-Note's sparse
     MLA) then fail vLLM's model inspection. The package is registered without that check (its
     interface module imports and reports the kernels unavailable), and vLLM's fa_utils and the MLA
     FlashAttention prefill backend (which a model class may name), which bind the kernel entry points
     only on GPU platforms, get the interface's (no kernel ever runs here).
 26. vLLM's vendored DeepGEMM (`vllm.third_party.deep_gemm`) loads a CUDA extension at import time,
     and a vision tower imports an FP8 cast helper from it at module level (Dots3-Note): when the
     extension cannot load, the package is a stand-in whose functions are placeholders (FP8 GEMM
     kernels; none runs here, and none decides a KV cache).
 27. A case that carries tokenizer files (patch 15: a word-level tokenizer.json holding the special
     tokens a processor looks up, e.g. Fuyu's |SPEAKER|) gets that tokenizer where patch 14 would
     hand its minimal one to a processor (no prompt is ever processed).
 31. A case file of patch 15 may sit in a subfolder of the checkpoint (Kimi-Audio's
     `whisper-large-v3/config.json`, which its audio tower and feature extractor load): the folder is
     created. Only where the file is written changes.
 32. A case's `sub_configs` names further keys (besides `*_config`) whose dicts the remote config class
     builds into config objects (Nemotron Parse's `encoder` / `decoder`, read by attribute): patch 3's
     stand-in builds them too. The keys and values are the config's own.
 33. On the CPU platform vLLM's registry entry for DeepseekV4ForConditionalGeneration is a stub that
     refuses the platform ("use CUDA or ROCm"); the run uses vLLM's common (CUDA / ROCm) VL class
     instead, whose language model is the platform's own DeepseekV4ForCausalLM (the class the text
     architecture is answered with). Which class wraps the vision tower is a platform choice; the
     language model and its caches are the same. Patch 14's minimal tokenizer also knows its image
     placeholder token (its processor-info class looks the id up while vLLM validates the config).
 34. cutlass is one of patch 5's stand-ins, so Muse Spark's QK-norm module reports its CuTe-DSL
     kernel available and builds it with placeholder types: the run reports it unavailable (the
     unfused QK norm is chosen, as on a machine without cutlass). A kernel choice; the attention
     layers and their caches are the same.
 35. Without timm (patch 5), the timm layers a vision projector builds from (Kanana-V's C-Abstractor:
     RegStage, LayerNorm2d) are empty torch modules instead of placeholders torch refuses as
     sub-modules (a projector holds no KV cache; its forward never runs here).
 36. openPangu-VL's vision tower refuses every ViT attention backend but FLASH_ATTN (what a CUDA GPU
     selects; the CPU platform picks TORCH_SDPA): its module's ViT-backend lookup answers FLASH_ATTN,
     as on a GPU. A vision-encoder kernel choice; encoder attention registers no KV cache.
 37. A case whose config file is named `params.json` (a Mistral-format checkpoint: Voxtral Realtime
     is published only so) is written under that name and read with `config_format="mistral"`: vLLM's
     own Mistral config parser (adapt_config_dict) builds the config from it, as `--config-format
     mistral` (or auto, next to consolidated*.safetensors) does on a real checkpoint. Only which reader
     vLLM uses changes; it is vLLM's.
 38. A case that carries a Mistral `tekken.json` (patch 15) gets vLLM's MistralTokenizer loaded from
     it where patch 14 would hand over its minimal tokenizer (Voxtral Realtime's model class reads the
     audio settings of the tokenizer's audio encoder at build time). No prompt is ever processed.
 39. A case whose config.json sits in a checkpoint folder next to its hf_quant_config.json (ModelOpt
     re-uploads in tests/data/published_configs) gets that file copied next to config.json, where
     vLLM reads it, as it would in the downloaded checkpoint.
 40. A case's `drop_keys` are removed from its config.json copy and from its `*_config` sub-dicts:
     a published re-upload's `quantization_config` (no FP8 / NVFP4 / MXFP4 weight kernel runs on the
     CPU platform: the answer is the layer geometry without weight quantization; the KV dtype
     decisions of the quantized checkpoint come from the attention-level oracle) or an `auto_map`
     whose remote code is not here (vLLM's or transformers' own config class is used, as for the
     corpus configs of make_arch_cases.py). The answer's config_sha256 is the stored file's.
 41. A case marked `as_published` (a published config without an auto_map, published_suite.py) gets
     no stand-in config class (patch 3 is skipped): vLLM loads the file as it stands, and a model_type
     neither transformers nor vLLM knows fails as it does for a user.
Answers go to <cases dir>/answers/<name>.json (stable key order), one per case, with the sha256 of
the config they answer: a case whose config changed since (make_arch_cases.py rewrote it) is
re-run even without --force, and tests/planner/test_vllm_arch_parity.py fails on a stale answer.
"""
from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import shutil
import socket
import sys
import tempfile
import time
import traceback
from fractions import Fraction
from pathlib import Path

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

_DIST_READY = False
STUB_MODULES = ("torchvision", "mistral_common", "timm", "open_clip", "decord", "librosa",
                "soundfile", "av", "qwen_vl_utils", "flash_attn", "einops", "cv2", "scipy",
                "torchaudio", "matplotlib", "flashinfer", "cutlass", "cuda")
_STUBBED: set[str] = set()
# Media placeholder tokens model classes look up in the tokenizer at build time (patch 14).
MEDIA_TOKENS = ("<image>", "<video>", "<audio>", "<|image_pad|>", "<|video_pad|>", "<IMG_CONTEXT>",
                "<image_placeholder>")
MEDIA_TOKENS += ("<｜deepseek_image｜>",)  # patch 33: DeepSeek-V4 VL's image placeholder
# Patch 32: keys besides `*_config` whose dicts the remote config class of the running case builds.
_SUB_CONFIG_KEYS: set[str] = set()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _install_patches() -> None:
    from vllm.model_executor.models import registry as reg
    from vllm.platforms import current_platform
    from vllm.v1.attention.backends.registry import AttentionBackendEnum

    def get_attn_backend_cls(cls, selected_backend, attn_selector_config, num_heads=None):
        if getattr(attn_selector_config, "use_mla", False):
            return AttentionBackendEnum.CPU_MLA.get_path()
        return AttentionBackendEnum.CPU_ATTN.get_path()

    type(current_platform).get_attn_backend_cls = classmethod(get_attn_backend_cls)
    # Patch 13: the CPU platform turns prefix caching off for MLA models (a CPU scheduling choice);
    # hybrid MLA + Mamba models then fail vLLM's own mamba-block-size check. The run keeps the
    # prefix-caching setting the case asked for, as a GPU deployment has it.
    orig_update = type(current_platform).check_and_update_config

    def check_and_update_config(cls, vllm_config):
        keep = vllm_config.cache_config.enable_prefix_caching
        orig_update(vllm_config)
        vllm_config.cache_config.enable_prefix_caching = keep

    type(current_platform).check_and_update_config = classmethod(check_and_update_config)
    # Patch 11: Step1's ALiBi variant asks the backend for a capability the CPU backend lacks
    # (a kernel feature; the KV cache spec does not depend on it).
    from vllm.v1.attention.backends.cpu_attn import CPUAttentionBackend

    CPUAttentionBackend.supports_alibi_sqrt = classmethod(lambda cls: True)
    impl_cls = CPUAttentionBackend.get_impl_cls()
    impl_init = impl_cls.__init__

    import inspect

    accepted = set(inspect.signature(impl_init).parameters)

    def impl_init_cpu_args(self, *a, **k):
        # Kernel options the CPU impl lacks (use_alibi_sqrt, chunk_lookback) are dropped.
        impl_init(self, *a, **{n: v for n, v in k.items() if n in accepted})

    impl_cls.__init__ = impl_init_cpu_args
    reg._run_in_subprocess = lambda fn: fn()
    _stub_torchvision()
    import torch

    class _Event:  # patch 8: torch.cuda.Event is a dummy class that refuses to exist without CUDA
        def __init__(self, *a, **k):
            pass

        def __getattr__(self, name):
            return lambda *a, **k: None

    torch.cuda.Event = _Event
    torch.cuda.Stream = _Event  # created at build time for overlap too (Kimi-Linear, Kimi-K3)
    import triton
    from vllm import triton_utils

    for t in {id(triton): triton, id(triton_utils.triton): triton_utils.triton}.values():
        if not hasattr(t, "set_allocator"):  # patch 9: newer Triton API, called at build time
            t.set_allocator = lambda *a, **k: None
    from vllm.model_executor.layers.fused_moe import config as moe_cfg

    orig_post = moe_cfg.FusedMoEConfig.__post_init__
    plat = type(current_platform)

    def post_init(self):
        saved = plat.is_cuda_alike
        plat.is_cuda_alike = classmethod(lambda cls: True)
        try:
            orig_post(self)
        finally:
            plat.is_cuda_alike = saved

    moe_cfg.FusedMoEConfig.__post_init__ = post_init

    from vllm.model_executor.layers.fused_moe import unquantized_fused_moe_method as ufm
    from vllm.model_executor.layers.fused_moe.oracle import unquantized as uq

    orig_select = uq.select_unquantized_moe_backend

    def select(moe_config):
        try:
            return orig_select(moe_config)
        except NotImplementedError:
            return uq.UnquantizedMoeBackend.CPU, None

    uq.select_unquantized_moe_backend = select
    ufm.select_unquantized_moe_backend = select

    import torch

    ns_cls = type(torch.ops._C)
    orig_getattr = ns_cls.__getattr__

    def ns_getattr(self, name):
        try:
            return orig_getattr(self, name)
        except AttributeError:
            if getattr(self, "name", None) in ("_C", "_C_cache_ops", "_moe_C") and not name.startswith("__"):
                return lambda *a, **k: None
            raise

    ns_cls.__getattr__ = ns_getattr
    _patch_missing_tokenizer()
    orig_vit = plat.get_vit_attn_backend.__func__

    def get_vit_attn_backend(cls, head_size, dtype, backend=None):
        # Patch 17: a GPU ViT backend asked for by name runs as the CPU platform's own choice.
        if backend is not None and backend not in cls.get_supported_vit_attn_backends():
            backend = None
        return orig_vit(cls, head_size, dtype, backend)

    plat.get_vit_attn_backend = classmethod(get_vit_attn_backend)
    from transformers import modeling_utils

    orig_attn = modeling_utils.PreTrainedModel.get_correct_attn_implementation

    def get_correct_attn_implementation(self, requested_attention, is_init_check=False):
        # Patch 16: flash_attention_2 asked for because the flash_attn stand-in imports.
        if requested_attention in ("flash_attention_2", "flash_attention_3") and "flash_attn" in _STUBBED:
            requested_attention = "sdpa"
        return orig_attn(self, requested_attention, is_init_check)

    modeling_utils.PreTrainedModel.get_correct_attn_implementation = get_correct_attn_implementation
    _triton_extra_placeholder()
    _patch_flash_attn_package()
    _patch_deep_gemm_package()


def _triton_extra_placeholder() -> None:
    """Patch 20: `tl.extra.cuda.libdevice` readable on vLLM's placeholder `tl` (no kernel runs)."""
    from vllm import triton_utils

    class _Namespace:
        def __getattr__(self, name):
            if name.startswith("__"):
                raise AttributeError(name)
            return self

    if not hasattr(triton_utils.tl, "extra"):
        triton_utils.tl.extra = _Namespace()


def _register_shipped_config_class(case: dict, cfg: dict) -> str | None:
    """Patch 19: the config class vLLM ships for this model_type, registered for the run."""
    name = case.get("vllm_config_class")
    if not name:
        return None
    import importlib

    from transformers import AutoConfig

    cls = getattr(importlib.import_module("vllm.transformers_utils.configs"), name)
    mt = cfg.get("model_type")
    if getattr(cls, "model_type", None) != mt:
        raise ValueError(f"{name} is the config class of {cls.model_type!r}, not of {mt!r}")
    AutoConfig.register(mt, cls, exist_ok=True)
    return mt


@contextlib.contextmanager
def _device_capability(case: dict):
    """Patch 22: the platform reports the case's GPU compute capability while the model builds."""
    cap = case.get("device_capability")
    if not cap:
        yield
        return
    import torch
    from vllm.platforms import current_platform
    from vllm.platforms.interface import DeviceCapability

    plat = type(current_platform)
    saved = plat.__dict__.get("get_device_capability")
    plat.get_device_capability = classmethod(lambda cls, device_id=0: DeviceCapability(*cap))
    import types

    saved_torch = (torch.accelerator.current_device_index, torch.cuda.get_device_capability,
                   torch.cuda.get_device_properties)
    torch.accelerator.current_device_index = lambda: 0  # the CPU device stands in for the GPU
    torch.cuda.get_device_capability = lambda device=None: tuple(cap)
    torch.cuda.get_device_properties = lambda device=None: types.SimpleNamespace(
        major=cap[0], minor=cap[1], multi_processor_count=132, name="oracle-stand-in")
    try:
        yield
    finally:
        (torch.accelerator.current_device_index, torch.cuda.get_device_capability,
         torch.cuda.get_device_properties) = saved_torch
        if saved is None:
            del plat.get_device_capability
        else:
            plat.get_device_capability = saved


@contextlib.contextmanager
def _flashinfer_impl_check(case: dict):
    """Patch 21: the CPU attention impl passes an `isinstance(impl, FlashInferImpl)` check."""
    if not case.get("flashinfer_impl_check"):
        yield
        return
    from vllm.v1.attention.backends.cpu_attn import CPUAttentionBackend
    from vllm.v1.attention.backends.flashinfer import FlashInferImpl

    FlashInferImpl.register(CPUAttentionBackend.get_impl_cls())
    try:
        yield
    finally:
        FlashInferImpl._abc_registry_clear()
        FlashInferImpl._abc_caches_clear()


def _patch_flash_attn_package() -> None:
    """Patch 25: vllm.vllm_flash_attn importable without its CUDA extensions (the interface names the release
    has: 0.22 has no compile_flash_attn_varlen_func_from_specs, 0.18 no MLA prefill module)."""
    import importlib
    import types

    try:
        importlib.import_module("vllm.vllm_flash_attn")
        return
    except ImportError:
        pass
    import vllm

    pkg = types.ModuleType("vllm.vllm_flash_attn")
    pkg.__path__ = [str(Path(vllm.__file__).parent / "vllm_flash_attn")]
    pkg.__package__ = "vllm.vllm_flash_attn"
    sys.modules["vllm.vllm_flash_attn"] = pkg
    iface = importlib.import_module("vllm.vllm_flash_attn.flash_attn_interface")
    for name in ("compile_flash_attn_varlen_func_from_specs", "fa_version_unsupported_reason",
                 "flash_attn_varlen_func", "get_scheduler_metadata", "is_fa_version_supported"):
        if hasattr(iface, name):  # an older release's interface has fewer (0.22: no compile_..._from_specs)
            setattr(pkg, name, getattr(iface, name))
    # vLLM's fa_utils binds the kernel entry points only on CUDA / ROCm / XPU platforms.
    from vllm.v1.attention.backends import fa_utils

    for name in ("compile_flash_attn_varlen_func_from_specs", "flash_attn_varlen_func", "get_scheduler_metadata"):
        if not hasattr(fa_utils, name) and hasattr(iface, name):
            setattr(fa_utils, name, getattr(iface, name))
    if not hasattr(fa_utils, "reshape_and_cache_flash"):
        fa_utils.reshape_and_cache_flash = lambda *a, **k: None
    try:
        from vllm.v1.attention.backends.mla.prefill import flash_attn as mla_prefill_fa
    except ModuleNotFoundError:  # 0.18: no separate MLA prefill backends
        return
    if mla_prefill_fa.flash_attn_varlen_func is None:  # the MLA prefill backend a model class names
        mla_prefill_fa.flash_attn_varlen_func = iface.flash_attn_varlen_func


def _patch_deep_gemm_package() -> None:
    """Patch 26: vllm.third_party.deep_gemm as a stand-in when its CUDA extension cannot load."""
    import importlib
    import types

    try:
        importlib.import_module("vllm.third_party.deep_gemm")
        return
    except (ImportError, OSError):
        sys.modules.pop("vllm.third_party.deep_gemm", None)

    class _DeepGemmStandIn(types.ModuleType):
        def __getattr__(self, name):
            if name.startswith("__"):
                raise AttributeError(name)
            return lambda *a, **k: None

    stand_in = _DeepGemmStandIn("vllm.third_party.deep_gemm")
    stand_in.__path__ = []
    sys.modules["vllm.third_party.deep_gemm"] = stand_in


def _mistral_case_tokenizer(model_dir: str):
    """Patch 38: vLLM's Mistral tokenizer from the tekken.json a case carries (patch 15)."""
    from vllm.tokenizers.mistral import MistralTokenizer

    return MistralTokenizer.from_pretrained(model_dir)


def _case_tokenizer(model_dir: str):
    """Patch 27: the tokenizer files a case carries (patch 15), where patch 14 would use its own."""
    if Path(model_dir, "tekken.json").is_file():
        return _mistral_case_tokenizer(model_dir)  # patch 38
    if not Path(model_dir, "tokenizer.json").is_file():
        return None
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(model_dir)


def _patch_missing_tokenizer() -> None:
    """Patch 14: a minimal tokenizer where a multimodal class asks for one."""
    from vllm import tokenizers as vtok
    from vllm.multimodal.processing import context as mm_ctx
    from vllm.tokenizers import registry as vtok_reg

    made: list = []

    def minimal():
        if not made:
            from tokenizers import Tokenizer, models, pre_tokenizers
            from transformers import PreTrainedTokenizerFast

            words = ["<unk>", "<s>", "</s>", "<pad>", *MEDIA_TOKENS]
            tok = Tokenizer(models.WordLevel(vocab={t: i for i, t in enumerate(words)}, unk_token="<unk>"))
            tok.pre_tokenizer = pre_tokenizers.Whitespace()
            made.append(PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>",
                                                eos_token="</s>", pad_token="<pad>"))
        return made[0]

    orig_get = mm_ctx.InputProcessingContext.get_tokenizer

    def get_tokenizer(self):
        return minimal() if self.tokenizer is None else orig_get(self)

    mm_ctx.InputProcessingContext.get_tokenizer = get_tokenizer
    orig_cached = vtok_reg.cached_tokenizer_from_config

    def cached_tokenizer_from_config(model_config, **kwargs):
        if model_config.skip_tokenizer_init:
            return _case_tokenizer(model_config.model) or minimal()
        return orig_cached(model_config, **kwargs)

    for mod in list(sys.modules.values()):  # the name is imported into model modules
        if getattr(mod, "cached_tokenizer_from_config", None) is orig_cached:
            mod.cached_tokenizer_from_config = cached_tokenizer_from_config
    vtok.cached_tokenizer_from_config = cached_tokenizer_from_config
    vtok_reg.cached_tokenizer_from_config = cached_tokenizer_from_config


def _stub_torchvision() -> None:
    """Patch 5: imports of missing processor-only packages resolve to placeholder modules."""
    import importlib.abc
    import importlib.machinery
    import importlib.util
    import types

    class _Meta(type):
        def __getattr__(cls, name):
            if name.startswith("__"):
                raise AttributeError(name)
            return cls

        def __or__(cls, other):
            return cls

        __ror__ = __or__

        def __getitem__(cls, item):
            return cls

    class _Placeholder(metaclass=_Meta):
        def __init__(self, *a, **k):
            pass

        def __call__(self, *a, **k):
            return self

        def __getattr__(self, name):
            return _Placeholder()

        def __mro_entries__(self, bases):
            return (object,)

    class _Module(types.ModuleType):
        def __getattr__(self, name):
            if name.startswith("__"):
                raise AttributeError(name)
            return _Placeholder

    class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
        def find_spec(self, fullname, path, target=None):
            top = fullname.split(".")[0]
            if top in _STUBBED:
                return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
            return None

        def create_module(self, spec):
            m = _Module(spec.name)
            m.__path__ = []
            m.__version__ = "0.0.0+oracle-stub"
            return m

        def exec_module(self, module):
            pass

    for name in STUB_MODULES:
        try:
            missing = importlib.util.find_spec(name) is None
        except (ImportError, ValueError):
            missing = True
        if missing or name == "torchvision":
            _STUBBED.add(name)
    sys.meta_path.insert(0, _Finder())
    if "timm" in _STUBBED:
        _stand_in_timm_wrapper()
        _stand_in_timm_layers()


def _stand_in_timm_wrapper() -> None:
    """Without timm, transformers' TimmWrapperModel (Gemma 3n's vision tower, built by
    AutoModel.from_config) refuses to build: it becomes an empty module holding its config (a vision
    tower holds no KV cache; its forward never runs here)."""
    import torch
    from transformers.models.timm_wrapper import modeling_timm_wrapper as mtw

    class _TimmWrapperStandIn(torch.nn.Module):
        def __init__(self, config, *args, **kwargs):
            super().__init__()
            self.config = config

        @classmethod
        def _from_config(cls, config, **kwargs):
            return cls(config)

    mtw.TimmWrapperModel = _TimmWrapperStandIn


def _stand_in_timm_layers() -> None:
    """Patch 35: timm's projector layers (Kanana-V) as empty modules when timm is missing."""
    import importlib

    import torch

    class _EmptyLayer(torch.nn.Module):
        def __init__(self, *args, **kwargs):
            super().__init__()

    for mod, name in (("timm.models.regnet", "RegStage"), ("timm.layers", "LayerNorm2d")):
        setattr(importlib.import_module(mod), name, _EmptyLayer)


class _AttrDict(dict):
    """A dict whose keys read as attributes too (a remote config class's parsed sub-records)."""

    @classmethod
    def of(cls, d: dict) -> _AttrDict:
        return cls({k: cls.of(v) if isinstance(v, dict) else v for k, v in d.items()})

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


def _register_unknown_model_type(cfg: dict, remote: bool = False, base: str | None = None) -> str | None:
    """Patch 3: a config class for a remote-code model_type, for this run."""
    from transformers import AutoConfig, PretrainedConfig
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    from vllm.transformers_utils import config as vcfg

    mt = cfg.get("model_type")
    if not isinstance(mt, str) or mt in getattr(vcfg, "_CONFIG_REGISTRY", {}):
        return None
    if mt in CONFIG_MAPPING and not remote:
        return None
    def __init__(self, **kwargs):
        # Sub-configs (vision_config, llm_config, ...) become config objects, as the remote
        # config class builds them: the known model_type's class, else a plain config.
        for k, v in list(kwargs.items()):
            if ((k.endswith("_config") or k in _SUB_CONFIG_KEYS) and isinstance(v, dict)
                    and k not in ("quantization_config", "per_layer_config")):
                sub_mt = v.get("model_type")
                sub = dict(v)
                if sub_mt in CONFIG_MAPPING:
                    sub.pop("model_type", None)
                    kwargs[k] = CONFIG_MAPPING[sub_mt](**sub)
                else:
                    kwargs[k] = PretrainedConfig(**sub)
            elif isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
                # Per-layer records (DeciLM's block_configs): the remote class parses them into
                # objects read by attribute (block_config.attention.no_op).
                kwargs[k] = [_AttrDict.of(x) for x in v]
        for k in ("max_position_embeddings", "hidden_size", "num_attention_heads"):
            # transformers' rope standardisation reads these before __init__ sets them.
            if k in kwargs:
                object.__setattr__(self, k, kwargs[k])
        base_cls.__init__(self, **kwargs)

    # A remote config class that extends a transformers class (MiniCPM-V's extends Qwen2Config)
    # keeps what that class derives from the keys (Qwen2: no window unless use_sliding_window).
    base_cls = CONFIG_MAPPING[base] if base else PretrainedConfig
    cls = type(f"Oracle_{mt}_Config", (base_cls,), {"model_type": mt, "__init__": __init__})
    AutoConfig.register(mt, cls, exist_ok=True)
    return mt


def _dtype_name(d) -> str | None:
    return None if d is None else str(d).removeprefix("torch.")


def _num(x):
    if isinstance(x, Fraction):
        return int(x) if x.denominator == 1 else float(x)
    return x


def _spec_record(spec) -> dict:
    from vllm.v1.kv_cache_interface import AttentionSpec, MambaSpec

    rec: dict = {"type": type(spec).__name__, "block_size": spec.block_size}
    if isinstance(spec, AttentionSpec):
        rec.update({
            "dtype": _dtype_name(spec.dtype),
            "kv_quant_mode": getattr(spec.kv_quant_mode, "name", None),
            "num_kv_heads": spec.num_kv_heads,
            "head_size": spec.head_size,
            "head_size_v": spec.head_size_v,
            "sliding_window": getattr(spec, "sliding_window", None),
            "attention_chunk_size": getattr(spec, "attention_chunk_size", None),
            "tokens_per_state": _num(Fraction(spec.tokens_per_state)),
            "cache_dtype_str": getattr(spec, "cache_dtype_str", None),
            "page_size_bytes": spec.page_size_bytes,
            "real_page_size_bytes": spec.real_page_size_bytes,
            "bytes_per_token": _num(Fraction(spec.real_page_size_bytes, spec.block_size)),
        })
    elif isinstance(spec, MambaSpec):
        rec.update({
            "shapes": [list(s) for s in spec.shapes],
            "dtypes": [_dtype_name(d) for d in spec.dtypes],
            "page_size_bytes": spec.page_size_bytes,
        })
    else:
        with contextlib.suppress(Exception):
            rec["page_size_bytes"] = spec.page_size_bytes
    return rec


def _layer_record(name: str, layer, vllm_config) -> dict:
    from vllm.model_executor.models.utils import extract_layer_index
    from vllm.v1.kv_cache_interface import get_kv_quant_mode

    # vLLM's model runner binds caches by this index; LongCat-Flash has two attention modules per
    # decoder layer (self_attn.0/.1), which it numbers 2 * layer + module (gpu_model_runner).
    n_attn = 2 if getattr(vllm_config.model_config.hf_config, "model_type", None) == "longcat_flash" else 1
    try:
        idx = extract_layer_index(name, n_attn)
    except Exception:
        idx = None
    kv = getattr(layer, "kv_cache_dtype", None)
    rec = {
        "index": idx,
        "prefix": name,
        "layer_class": type(layer).__name__,
        "kv_cache_dtype": kv if isinstance(kv, str) else None,
        "kv_quant_mode": get_kv_quant_mode(kv).name if isinstance(kv, str) else None,
        "sliding_window": getattr(layer, "sliding_window", None),
        "kv_sharing_target_layer_name": getattr(layer, "kv_sharing_target_layer_name", None),
        "specs": [],
    }
    try:
        spec = layer.get_kv_cache_spec(vllm_config)
    except Exception as e:
        rec["spec_error"] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        return rec
    if spec is None:
        return rec
    specs = spec if isinstance(spec, (list, tuple)) else [spec]
    rec["specs"] = [_spec_record(s) for s in specs]
    return rec


def run_case(case: dict, base: Path) -> dict:
    import torch
    import vllm
    from vllm.config import set_current_vllm_config
    from vllm.engine.arg_utils import EngineArgs
    from vllm.model_executor.model_loader.utils import initialize_model
    from vllm.model_executor.models.interfaces import supports_multimodal
    from vllm.utils.torch_utils import set_default_torch_dtype

    global _DIST_READY
    cfg_path = base / case["config"]
    cfg = json.loads(cfg_path.read_text())
    _use_case_sub_configs(case)
    res: dict = {
        "kind": "kvplan.vllm_oracle_answer",
        "vllm_version": vllm.__version__,
        "case": case["name"],
        "config": case["config"],
        "flags": {"kv_cache_dtype": case.get("kv_cache_dtype", "auto"),
                  "kv_cache_dtype_skip_layers": case.get("skip_layers", []),
                  "dtype": case.get("dtype", "auto")},
        "config_sha256": config_sha256(cfg_path),
        "registered_config_class_for": None if case.get("as_published") else (  # patch 41
            _register_shipped_config_class(case, cfg) or _register_unknown_model_type(
                cfg, bool(case.get("remote_config")), case.get("remote_config_base"))),
        "engine": None, "layers": [], "error": None,
    }
    tmp = tempfile.mkdtemp(prefix="kvplan-oracle-")
    stage = "create_engine_config"
    saved_v2 = os.environ.get("VLLM_USE_V2_MODEL_RUNNER")
    if case.get("v2_model_runner"):
        # Patch 12: model classes that need Model Runner V2 (vLLM selects it on GPUs; the CPU
        # platform falls back to V1): the run selects it as a GPU deployment does.
        os.environ["VLLM_USE_V2_MODEL_RUNNER"] = "1"
    try:
        fmt = _config_format(cfg_path, tmp)  # patch 37
        _write_case_files(tmp, case.get("files", {}))
        _drop_case_keys(case, tmp)  # patch 40
        if "quantization_config" not in case.get("drop_keys", ()):
            _checkpoint_quant_file(cfg_path, tmp)  # patch 39
        ea = EngineArgs(config_format=fmt, model=tmp, kv_cache_dtype=res["flags"]["kv_cache_dtype"],
                        kv_cache_dtype_skip_layers=list(res["flags"]["kv_cache_dtype_skip_layers"]),
                        dtype=res["flags"]["dtype"], skip_tokenizer_init=True,
                        trust_remote_code=True, enforce_eager=True, load_format="dummy",
                        **({"enable_prefix_caching": True} if case.get("enable_prefix_caching") else {}))
        vc = ea.create_engine_config()
        mc = vc.model_config
        res["engine"] = {"architecture": mc.architecture, "model_dtype": _dtype_name(mc.dtype),
                         "cache_dtype": vc.cache_config.cache_dtype,
                         "kv_cache_dtype_skip_layers": list(vc.cache_config.kv_cache_dtype_skip_layers),
                         "max_model_len": mc.max_model_len}
        stage = "distributed_init"
        from vllm.distributed.parallel_state import (
            destroy_model_parallel,
            ensure_model_parallel_initialized,
            init_distributed_environment,
        )
        with set_current_vllm_config(vc):
            if not _DIST_READY:
                init_distributed_environment(world_size=1, rank=0, local_rank=0, backend="gloo",
                                             distributed_init_method=f"tcp://127.0.0.1:{_free_port()}")
                _DIST_READY = True
            destroy_model_parallel()  # the groups (expert parallel or not) follow each config
            ensure_model_parallel_initialized(1, 1)
        stage = "build_model"
        try:
            with set_default_torch_dtype(mc.dtype), torch.device("meta"), _flashinfer_impl_check(case), \
                    _device_capability(case):
                model = initialize_model(vllm_config=vc)
        except (NotImplementedError, RuntimeError) as e:
            if "meta tensor" not in str(e):
                raise
            # Patch 10: a model class that computes a buffer from a tensor at build time (ALiBi
            # slopes, rotary caches: .item() / a copy) cannot be built on the meta device; it is
            # built again on the CPU (torch.empty: weights are reserved, never written).
            vc.compilation_config.static_forward_context.clear()
            with set_default_torch_dtype(mc.dtype), torch.device("cpu"), _flashinfer_impl_check(case), \
                    _device_capability(case):
                model = initialize_model(vllm_config=vc)
            res["engine"]["build_device"] = "cpu"
        res["engine"]["model_class"] = type(model).__name__
        res["engine"]["multimodal"] = bool(supports_multimodal(model))
        stage = "collect"
        ctx = vc.compilation_config.static_forward_context
        with set_current_vllm_config(vc):
            for name, layer in ctx.items():
                if hasattr(layer, "get_kv_cache_spec"):
                    res["layers"].append(_layer_record(name, layer, vc))
        res["layers"].sort(key=lambda r: (r["index"] is None, r["index"] or 0, r["prefix"]))
        res["engine"]["cache_dtype_after_build"] = vc.cache_config.cache_dtype
        del model
    except Exception as e:
        def scrub(text: str) -> str:  # no machine-specific paths in checked-in answers
            import sysconfig
            text = text.replace(tmp, "<model dir>")
            return text.replace(sysconfig.get_paths()["purelib"], "<site-packages>")

        res["error"] = {"stage": stage, "type": type(e).__name__,
                        "message": scrub(str(e).splitlines()[0][:400]) if str(e) else "",
                        "traceback_tail": [scrub(ln.strip())[:300] for ln in
                                           traceback.format_exc().splitlines()[-4:]]}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if case.get("remote_config") or case.get("vllm_config_class"):  # the model_type's own class again
            from transformers.models.auto.configuration_auto import CONFIG_MAPPING

            CONFIG_MAPPING._extra_content.pop(cfg.get("model_type"), None)
        if saved_v2 is None:
            os.environ.pop("VLLM_USE_V2_MODEL_RUNNER", None)
        else:
            os.environ["VLLM_USE_V2_MODEL_RUNNER"] = saved_v2
    return res


def _config_format(cfg_path: Path, tmp: str) -> str:
    """Patch 37: a Mistral-format params.json is written as such and read by vLLM's Mistral parser."""
    mistral = cfg_path.name == "params.json"
    shutil.copy(cfg_path, os.path.join(tmp, "params.json" if mistral else "config.json"))
    return "mistral" if mistral else "auto"


def _checkpoint_quant_file(cfg_path: Path, tmp: str) -> None:
    """Patch 39: a case whose config sits in a checkpoint folder with its hf_quant_config.json (ModelOpt
    re-uploads, tests/data/published_configs) gets it next to config.json, where vLLM reads it."""
    quant = cfg_path.parent / "hf_quant_config.json"
    if cfg_path.name == "config.json" and quant.is_file():
        shutil.copy(quant, os.path.join(tmp, "hf_quant_config.json"))


def _drop_case_keys(case: dict, tmp: str) -> None:
    """Patch 40: keys the case drops from its config.json copy (and from the language model's
    sub-config): a published re-upload's `quantization_config` (the CPU platform has no FP8 / NVFP4 /
    MXFP4 weight kernels; the answer is the checkpoint's layer geometry without weight quantization,
    its KV dtype decisions come from the attention-level oracle) or an `auto_map` whose remote code is
    not here (vLLM's or transformers' own config class of the model_type is used instead)."""
    drop = case.get("drop_keys") or ()
    if not drop:
        return
    path = os.path.join(tmp, "config.json")
    with open(path) as f:
        cfg = json.load(f)
    for d in (cfg, *(v for k, v in cfg.items() if k.endswith("_config") and isinstance(v, dict))):
        for key in drop:
            d.pop(key, None)
    with open(path, "w") as f:
        json.dump(cfg, f)


def _write_case_files(tmp: str, files: dict) -> None:
    """Patch 15: the checkpoint's processor files; patch 31: also in a subfolder of it."""
    for fname, content in files.items():
        target = Path(tmp, fname)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(content))


def _use_case_sub_configs(case: dict) -> None:
    """Patch 32: the case's extra sub-config keys, for patch 3's stand-in config class."""
    _SUB_CONFIG_KEYS.clear()
    _SUB_CONFIG_KEYS.update(case.get("sub_configs", ()))


def _muse_spark_without_cute_dsl() -> None:
    """Patch 34: Muse Spark's CuTe-DSL QK-norm kernel is unavailable when cutlass is a stand-in."""
    if "cutlass" not in _STUBBED:
        return
    from vllm.models.muse_spark.nvidia.ops.cute_dsl import qk_norm

    qk_norm.HAS_CUTEDSL = False


def _openpangu_vl_vit_backend() -> None:
    """Patch 36: openPangu-VL's vision tower gets the FLASH_ATTN ViT backend a GPU gives it."""
    from vllm.model_executor.models import openpangu_vl
    from vllm.v1.attention.backends.registry import AttentionBackendEnum

    openpangu_vl.get_vit_attn_backend = lambda *a, **k: AttentionBackendEnum.FLASH_ATTN


def _deepseek_v4_vl_on_cpu() -> None:
    """Patch 33: vLLM's common DeepSeek-V4 VL class instead of the CPU platform's refusing stub."""
    import importlib

    pkg = importlib.import_module("vllm.models.deepseek_v4")
    vl = importlib.import_module("vllm.models.deepseek_v4.common.vl_model")
    pkg.DeepseekV4ForConditionalGeneration = vl.DeepseekV4ForConditionalGeneration


def config_sha256(path: Path) -> str:
    """The answered config's hash: an answer whose config changed since is stale and re-run."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _stale(out: Path, cfg_path: Path) -> bool:
    try:
        return json.loads(out.read_text()).get("config_sha256") != config_sha256(cfg_path)
    except (OSError, ValueError):
        return True


def dumps_answer(res: dict) -> str:
    """Stable JSON, one layer per line (the answers are checked in; this keeps them small)."""
    head = [f"{json.dumps(k)}: {json.dumps(res[k], sort_keys=True, separators=(',', ':'))}"
            for k in sorted(res) if k != "layers"]
    layers = ",\n".join(json.dumps(rec, sort_keys=True, separators=(",", ":")) for rec in res["layers"])
    return "{\n" + ",\n".join(head) + ',\n"layers": [\n' + layers + "\n]}\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", required=True, type=Path)
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--force", action="store_true", help="rerun cases that have an answer")
    args = ap.parse_args(argv)
    base = args.cases.parent
    cases = json.loads(args.cases.read_text())["cases"]
    out_dir = base / "answers"
    out_dir.mkdir(exist_ok=True)
    real_stdout = sys.stdout
    sys.stdout = sys.stderr  # vLLM logs to stdout
    _install_patches()
    _deepseek_v4_vl_on_cpu()  # patch 33
    _muse_spark_without_cute_dsl()  # patch 34
    _openpangu_vl_vit_backend()  # patch 36
    n_ok = n_err = 0
    for case in cases:
        if args.only and case["name"] not in args.only:
            continue
        out = out_dir / f"{case['name']}.json"
        if out.exists() and not args.force and not _stale(out, base / case["config"]):
            continue  # answered for this very config
        t0 = time.time()
        res = run_case(case, base)
        out.write_text(dumps_answer(res))
        ok = res["error"] is None
        n_ok += ok
        n_err += not ok
        print(f"{case['name']}: {'ok' if ok else res['error']['type'] + ': ' + res['error']['message'][:150]}"
              f" ({time.time() - t0:.1f}s)", file=real_stdout, flush=True)
    print(f"{n_ok} answered, {n_err} errors", file=real_stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
