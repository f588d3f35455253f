#!/usr/bin/env python3
"""Capacity oracle: a vLLM release's own KV cache layout and capacity for a model, flags and KV memory.

Run by hand with the oracle interpreter (scripts/oracle/setup_venv.sh: vLLM 0.33.0 on the CPU; never in CI):

    VLLM_TARGET_DEVICE=cpu <venv>/bin/python scripts/oracle/capacity_oracle.py \
        --cases tests/data/vllm_oracle_capacity/cases.json [--release VERSION] [--only NAME ...] [--force]

Without --release the venv's own vLLM (0.33.0) answers, into <cases dir>/answers/. `--release VERSION`
imports that release's wheel in front of the venv's vLLM, from /tmp/kvplan-oracle-releases/vllm-VERSION
($ORACLE_WORK; `pip install --no-deps --target` there, as scripts/oracle/release_oracle.sh VERSION does) or
from `--site DIR`, and answers into <cases dir>/releases/VERSION/. vLLM itself is never patched; what the
harness does differently per release is a patch below that checks the release (patch 7).

For every case (a config.json, serving flags and an available KV memory in bytes) it runs vLLM's code:
  * `EngineArgs(...).create_engine_config()` (the model's config hooks: Mamba cache mode from prefix
    caching, the SSM state dtype of Nemotron-H / Qwen3.5),
  * `initialize_model` on the meta device (the real model class builds every attention and state layer),
    with the machinery of scripts/oracle/arch_oracle.py (its patches, imported from it),
  * `Platform.update_block_size_for_backend` as a CUDA GPU runs it: the attention backend is the case's
    `backend` (a vLLM backend enum name; its `gpu` is the GPU kvplan must select it on), else vLLM's
    FlashAttention backend class (TRITON_MLA for MLA models; no kernel runs), so the default block size
    (the release's CacheConfig.DEFAULT_BLOCK_SIZE, the backend's preference) and the hybrid alignment
    ("Setting attention block size to N tokens", state pages padded) are the ones a CUDA launch gets; the
    CPU platform's own block-size choice is undone first,
  * the GPU model runner's `get_kv_cache_spec` (every layer's spec, the backend's `customize_spec` packing
    such as Triton's inline per-token-head scales, fixed kernel-block strides), then vLLM's
    `resolve_kv_cache_layout`, `get_global_kv_cache_groups`, `get_kv_cache_configs` for the given memory
    and `get_kv_cache_capacity`: the KV cache groups, the block size and page of each, the blocks one
    request at max_model_len holds per group, the pool's blocks, and the "GPU KV cache size" / "Maximum
    concurrency" figures vLLM logs, or the error text when one request does not fit.

What is patched beyond arch_oracle.py's patches (no vLLM function body is changed):
  1. `Platform._find_non_ssm_backends` answers the CUDA backend class named above instead of the CPU one
     (which backend's kernel block sizes the alignment reads).
  2. The CPU platform's block size (its backends' kernel block) is reset to the release's default (16,
     64 from 0.34) before the CUDA alignment runs, and the Mamba block size with it (MambaModelConfig:
     block_size in align mode, max_model_len otherwise), as `create_engine_config` leaves them on a GPU.
  3. The CPU platform's `check_and_update_config` resets --mamba-ssm-cache-dtype to float32 for its
     accelerated GDN kernels on CPUs with AVX-512 BF16 (a CPU kernel choice): the run keeps the value the
     flags and the model's config hooks gave, as on a GPU.
  4. Attention layers answer their KV cache spec with the CUDA backend class named above instead of the CPU
     one they were built with: a sliding-window layer picks its block size from its backend's kernel block
     sizes (the CPU backend's would make it 32 where FlashAttention's make it 16).
  5. A case with `"gdn_prefill": "flashinfer"` resolves the gated-delta-net prefill kernel to FlashInfer's,
     what vLLM's `_resolve_gdn_prefill_backend` answers on a Hopper GPU (SM90) and on Blackwell with
     head_k_dim 128 and a CUDA 13 runtime: the GDN layers then export prefill checkpoints (one more state
     block per request in align mode, Mamba blocks aligned to 64 tokens). A kernel choice; no kernel runs.
  6. A case's `backend` is loaded by vLLM's AttentionBackendEnum (patch 8 lets FlashInfer's load).
  7. 0.34+: the CPU platform's `check_and_update_config` raises "requires Triton (triton-cpu)" where 0.33
     warned; that call sees Triton as present (as releases/vllm_oracle-0.34.0.patch does). Not applied
     when the release's Triton import succeeds.
  8. While a FlashInfer backend module is imported, `flashinfer` (absent from the CPU venv) is a
     placeholder module, removed right after: the class's kernel block sizes and preferences are read,
     no kernel runs, vLLM's has_flashinfer() stays False. FLASH_ATTN_MLA needs the CUDA flash-attn build at
     import and cannot be a case.
  9. A case with `tensor_parallel_size` N builds the model as rank 0 of N sees it (the one-rank TP group
     reports N ranks; the model is on the meta device, nothing communicates): heads, KV heads and state
     dims are split as on a GPU rank.
 10. While a case's backend module is imported, a tensor it allocates on "cuda" at import (CUTLASS MLA's
     128 MB SM100 workspace; 0.22's FlashInfer MLA workspace, torch.zeros) is allocated on the meta device
     instead; the workspace is never used here.
 11. A case with `speculative_config` (the --speculative-config JSON; its `model`, an EAGLE / draft model's
     config.json, is copied to a folder of its own) has the drafter's model built next to the target's, on
     the meta device, as the drafter's load_model builds it (0.33: llm_base_proposer.py::_get_model with
     _create_draft_vllm_config; 0.34: load_eagle_model with SpeculativeConfig.apply_draft_overrides); the
     attention layers it adds are marked as draft layers, as load_model marks them (their specs carry
     is_draft; the answer lists them in `draft_layer_names`). A `draft_model` checkpoint is built with its own
     model config, the draft parallel config and no quantization config, under the prefix draft_model
     (draft_model.py / standalone_ar/speculator.py). Methods without a draft model (ngram, suffix) build
     nothing.
 12. A case's `drop_keys` are left out of its config copy (arch_oracle.py patch 40: a quantization_config
     whose FP8 / NVFP4 weight kernels do not run on the CPU) and its `sub_configs` name the sub-configs of
     the stand-in config class arch_oracle.py registers for an unknown model_type (its patch 32);
     `disable_hybrid_kv_cache_manager` is passed on as the flag.
 13. Before 0.33 there is no `vllm.v1.core.kv_cache_planning`: `get_kv_cache_configs(vllm_config, specs,
     memory)` in `vllm/v1/core/kv_cache_utils.py` groups the layers itself (after merging the workers'
     specs and tagging sliding-window specs with the retained lookahead tokens); the answer's groups are
     the ones of the KV cache config it returns, or, where one request does not fit (ValueError), those
     of that release's `get_kv_cache_groups` run on the specs prepared the same way. Specs carry no
     `is_draft` before 0.33: the draft's layers are the ones patch 11 marked on the layers themselves.
 14. Before 0.31 `update_block_size_for_backend` asks `Platform._find_non_ssm_backend` for one backend
     class (not `_find_non_ssm_backends` for a list): patch 1 answers that one with the same class.
 15. Before 0.29 there is no per-model `resolve_kv_cache_layout`: the answer's `kv_cache_layout` is the
     release's one global `get_kv_cache_layout()` (None unless an override, VLLM_KV_CACHE_LAYOUT or a KV
     connector sets it).
 16. Before 0.30 SpeculativeConfig has no `uses_draft_kv_cache`: patch 11 asks the release's own
     `use_eagle() or uses_draft_model() or uses_extract_hidden_states()` (0.33's definition of it); before
     0.31 VllmConfig has no `num_prefill_lookahead_tokens`: the sliding-window retention of patch 13 is the
     release's own (num_speculative_tokens - 1 with multi-module MTP, kv_cache_utils.get_kv_cache_configs).
 17. Before 0.26 the CPU platform plugin answers only for a CPU build of vLLM: it answers vLLM's own
     CpuPlatform, as releases/vllm_oracle-pre-0.33.patch (1) does for the per-layer oracle.
 18. A case with a `gpu` and no `backend` (tests/data/vllm_oracle_capacity/cases_gpu_backends.json) runs on
     vLLM's CUDA platform for that GPU, faked by scripts/oracle/backend_oracle.py (imported, its PATCHES
     1-3, 5-6): each attention layer is built with the backend the GPU's selector picks (the sparse FlashMLA
     backend and the fp8_ds_mla cache it makes of fp8 for DeepSeek-V3.2 / GLM-5, DeepSeek-V4's sparse SWA
     backends), and the alignment, specs and capacity run with those backends (patches 1 and 4 not applied);
     the answer lists them under `backends`, and every cache's own spec (class, block, page, block-stride
     alignment, window, blocks per request) under `layer_specs`, in vLLM's order. A case's
     `gpu_model_module` (DeepSeek-V4's package, which imports its nvidia/ implementation only on a CUDA
     platform) is imported and built with the CUDA platform current. See _OnGpu. DeepSeek-V4's
     vision-language class is vLLM's common (CUDA / ROCm) one, not the CPU platform's refusing stub
     (arch_oracle.py patch 33), so that vLLM's registry sees a generative model.
 19. A case's `vllm_config_class` registers the config class vLLM ships for its model_type (arch_oracle.py
     patch 19: MiniMax-M3's text config), and `v2_model_runner` selects Model Runner V2 as a GPU launch
     does (arch_oracle.py patch 12: Step 5).
 20. A case carries the architecture-oracle keys of its config (tests/data/vllm_oracle_capacity/cases_arch.json,
     scripts/oracle/capacity_arch_cases.py), applied as scripts/oracle/arch_oracle.py applies them: its
     `remote_config` / `remote_config_base` stand-in config class (its patch 3), `as_published` (no stand-in,
     its patch 41), the checkpoint's processor `files` (patches 15, 31), a Mistral-format params.json read by
     vLLM's Mistral parser (patch 37), `flashinfer_impl_check` (patch 21) and `device_capability` (patch 22)
     while the model builds, and a model class that computes a buffer from a tensor at build time built on
     the CPU instead of the meta device (patch 10; weights reserved, never written); Muse Spark without its
     CuTe-DSL kernel and openPangu-VL's ViT backend as on a GPU (its patches 34, 36).
 21. A model without KV cache specs (an attention-free pooling model) gets no KV memory and logs no capacity,
     as EngineCore._initialize_kv_caches runs it (available memory 0; update_kv_cache_capacity only with
     KV cache groups): the answer has no groups, the pool's blocks and no tokens or concurrency.
 22. `tiktoken` (imported by Kimi-Audio's tokenizer module when its model class loads; not installed in the
     oracle venv) is a stand-in module like those of arch_oracle.py's STUB_MODULES (its patch 5), where it
     is not installed; no tokenizer runs (skip_tokenizer_init).
 23. A cache's layer index is the GPU model runner's: LongCat-Flash's `layers.N.self_attn.M` is N x 2 + M
     (gpu_model_runner.py: bind_kv_cache with num_attn_module 2 for longcat_flash).
 24. On a GPU (patch 18) a KDA layer (GLM-5 Next) resolves its prefill kernel with the CUDA platform current, as
     it does on the GPU (_resolve_kda_prefill_backend: FlashKDA on SM90 / SM10x / SM12x for bf16, head_dim 128
     and a bounded gate, whose layers export a prefill checkpoint); FlashKDA's extension (not built for the
     CPU) answers a workspace size of 0 (a runtime buffer, not in the KV cache).
 25. A case whose config is a Mistral-format `params.json` (Voxtral Realtime is published only so) is
     written under that name and read with `config_format="mistral"` (arch_oracle.py patch 37: vLLM's own
     Mistral parser), and a case's `files` (name -> a file next to the cases file: its `tekken.json`) are
     copied next to it, where vLLM's Mistral
     tokenizer is read from (arch_oracle.py patches 15 and 38: Voxtral Realtime's model class reads its
     audio settings at build time). This needs mistral_common (scripts/oracle/requirements.txt); a venv
     built without it takes it from a folder on PYTHONPATH (`pip install --no-deps --target DIR` of the
     pinned mistral_common, soundfile, soxr, tiktoken, jsonschema and their pins there).
 26. Before 0.31 Voxtral Realtime's causal audio encoder (whisper_causal.py::
     create_whisper_attention_backend_with_block_pooling) refuses the CPU attention backend its layers are
     built with ("is not yet supported"): where it refuses, it wraps TritonAttention, a CUDA backend it
     supports (FlashAttention's impl refuses an fp8 cache without a GPU). Only the wrapper's kernel class
     changes; the KV cache spec is the layer's own (get_kv_cache_spec: K/V heads x block_pool_size before
     0.31, tokens_per_state 1/block_pool_size from 0.31: the same page).
 27. Before 0.26 vLLM has no CPU MLA backend (AttentionBackendEnum.CPU_MLA, which arch_oracle.py's build-time
     backend answers for MLA layers): an MLA layer is built with TRITON_MLA, the class patch 4 gives it for
     its spec anyway; a sparse-MLA layer's top-k index buffer (a kernel argument TRITON_MLA's impl does not
     take) is not passed to it. No kernel runs.
 28. A release older than the oracle venv's transformers (5.20.2; 0.25.1 was built against 5.5+, before
     transformers' heterogeneous per-layer configs and its layer-type names): where the release's own code
     knows no `per_layer_config` (vllm/transformers_utils/model_arch_config_convertor.py), a per-layer
     attribute read on the whole config (Gemma 4's head_dim) answers the config's own value, as those
     transformers did, instead of raising AmbiguousGlobalPerLayerAttributeError, and Gemma 4's text config
     keeps its global_head_dim and num_global_key_value_heads fields (now folded into per-layer overrides),
     which the release's gemma4.py reads for its full-attention layers; and where a model's decoder
     layer table lacks the names transformers now writes for "mamba" and "attention" ("linear_attention",
     "full_attention": GraniteMoeHybrid's layer_types), they map to its Mamba and attention layers. The
     config and the model class are the release's own.
 29. Before 0.26 the CPU platform's MLA reset of max_num_batched_tokens (to max(max_model_len, 2048): a CPU
     scheduling choice) makes the speculative-decoding slot check fail when the drafter's VllmConfig is
     re-validated (patch 11: "does not have enough slots"); the run keeps the batch budget the flags gave,
     as a GPU launch does. (Later releases re-validate without failing; their answers are unchanged.)
 30. Before 0.25 there is no `get_kv_cache_capacity` (and no `register_all_kvcache_specs`: a static
     spec_manager_map): the "GPU KV cache size" tokens are the ones the release's own
     `kv_cache_utils._report_kv_cache_config` logs (its logger stood in for while it runs, so the release's
     formula of that line answers), the maximum concurrency is its `get_max_concurrency_for_kv_cache_config`
     (the float that line prints with %.2f).
 31. Before 0.25 the CPU platform has no `num_compute_units` (the base class raises), which TRITON_MLA's impl
     reads while patch 27 builds an MLA layer with it (an SM count for its kernel grid; no kernel runs): it
     answers torch's thread count, as 0.25's CpuPlatform.num_compute_units does.
 32. Before 0.25 FusedMoE refuses a non-gated MoE activation (Nemotron-H's relu2 experts) on a platform that
     is neither CUDA-alike nor XPU ("is_act_and_mul=False is supported only for CUDA and XPU for now", a
     kernel limit of the CPU platform; fused_moe/layer.py reads the platform for that check only): that
     check sees a CUDA platform. The experts' weights and the KV cache specs are untouched by it.
 33. Before 0.25 `import_utils._has_module` asks `importlib.util.find_spec` only, which raises for a module
     without a spec: arch_oracle.py's DeepGEMM stand-in (its patch 26, a module the CPU cannot load) made
     `has_deep_gemm()` raise while DeepSeek-V3.2 / GLM-5 build. It answers False there, as 0.25+'s own
     `_has_module` does for a module whose check or trial import fails (and as the 0.33 oracle ran).
 34. Before 0.19 EngineArgs has no `kv_cache_dtype_skip_layers`: the argument is passed only for a case that
     lists skip layers, which the release then refuses (an unexpected keyword, as its parser refuses the flag).

Answers carry the sha256 of the config they answer and the vLLM version;
tests/planner/test_vllm_capacity_parity.py compares kvplan at --engine vllm==VERSION with every answer.
"""
from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib.util
import json
import os
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

HERE = Path(__file__).resolve().parent
BASE_RELEASE = "0.33.0"  # the oracle venv's vLLM (scripts/oracle/setup_venv.sh)
RELEASES_WORK = Path(os.environ.get("ORACLE_WORK", Path(os.environ.get("TMPDIR", "/tmp")) / "kvplan-oracle-releases"))


def _keep_ssm_dtype() -> None:
    """Patch 3: the CPU platform's SSM-dtype reset is undone."""
    from vllm.platforms import current_platform

    orig = type(current_platform).check_and_update_config

    def check_and_update_config(cls, vllm_config):
        keep = vllm_config.cache_config.mamba_ssm_cache_dtype
        orig(vllm_config)
        vllm_config.cache_config.mamba_ssm_cache_dtype = keep

    type(current_platform).check_and_update_config = classmethod(check_and_update_config)


@contextlib.contextmanager
def _gdn_prefill(case: dict):
    """Patch 5."""
    if case.get("gdn_prefill") != "flashinfer":
        yield
        return
    from vllm.model_executor.layers.mamba.gdn import qwen_gdn_linear_attn as q

    saved = q._resolve_gdn_prefill_backend
    q._resolve_gdn_prefill_backend = lambda vllm_config: ("auto", "flashinfer")
    try:
        yield
    finally:
        q._resolve_gdn_prefill_backend = saved


@contextlib.contextmanager
def _kda_prefill(on_gpu, architecture: str):
    """Patch 24."""
    if on_gpu is None or not architecture.startswith("Glm5Next"):
        yield
        return
    import types

    import torch
    from vllm.models.glm5next.common import kda

    saved = kda._resolve_kda_prefill_backend

    def resolve(*args, **kwargs):
        with on_gpu.current():
            return saved(*args, **kwargs)

    kda._resolve_kda_prefill_backend = resolve
    ext = sys.modules.setdefault("vllm._flashkda_C", types.ModuleType("vllm._flashkda_C"))
    torch.ops._flashkda_C = types.SimpleNamespace(get_workspace_size=lambda *a: 0)
    try:
        yield
    finally:
        kda._resolve_kda_prefill_backend = saved
        del torch.ops._flashkda_C
        if sys.modules.get("vllm._flashkda_C") is ext:
            del sys.modules["vllm._flashkda_C"]


def _tp_rank0_view(tp: int) -> None:
    """Patch 9: a case with `tensor_parallel_size` N builds the model as rank 0 of N tensor-parallel ranks
    sees it: the process's TP group (one gloo rank) reports world size N and rank 0, so every layer splits
    its heads, KV heads and state dims as on a GPU rank. Nothing communicates: the model is built on the
    meta device and no forward runs; the KV cache specs and the capacity are rank 0's (every rank's is
    the same)."""
    from vllm.distributed import parallel_state as ps

    tp_group = ps.get_tp_group()
    tp_group.world_size, tp_group.rank_in_group = tp, 0
    tp_group.ranks = list(range(tp))


def _arch_oracle():
    spec = importlib.util.spec_from_file_location("kvplan_arch_oracle", HERE / "arch_oracle.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _backend_oracle():
    spec = importlib.util.spec_from_file_location("kvplan_backend_oracle", HERE / "backend_oracle.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class _OnGpu:
    """Patch 18: a case with `"gpu"` (a backend_oracle.py GPU name: h100, b200, ...) and no `backend` runs with
    vLLM's CUDA platform answering that GPU's compute capability, set up by backend_oracle.py's own fakes (its patches
    1-3, 5-6: import-level stubs for compiled extensions, NonNvmlCudaPlatform with the capability, FlashInfer
    features, torch.empty(device="cuda") on the meta device). While the model is built, every attention
    layer's backend is chosen by `CudaPlatform.get_attn_backend_cls`, and the platform reports the GPU's compute
    capability to the model classes (arch_oracle.py patch 22: Step 5's DSA checks it); the model class's config
    hooks see the GPU too (model_hooks) (the CUDA platform current for that one
    call), so the layer keeps what the GPU's selector picks and what follows from it (the sparse FlashMLA
    backend serving fp8 as fp8_ds_mla); the block-size alignment, the specs and the capacity then run with
    the CUDA platform current and the layers' own backends (patches 1 and 4 are not applied). The workspace
    manager the GPU model runner creates before building the model is created on the meta device (the
    sparse FlashMLA layers reserve their workspace in it; torch.accelerator.empty_cache is a no-op and
    current_device_index answers 0)."""

    def __init__(self, gpu: str) -> None:
        import torch

        bo = _backend_oracle()
        self.cc = bo.GPUS[gpu]
        self.bo = bo
        _, _, self.platform = bo.cuda_platform(self.cc, gpu)
        self.torch = torch
        from vllm.v1.worker import workspace

        for name in [m for m in sys.modules if m.startswith("vllm.vllm_flash_attn")]:
            del sys.modules[name]  # re-imported with the stubs: FA2/FA3 available, as on a CUDA install (patch 1)
        if workspace._manager is None:  # GPUModelRunner.__init__ sets it up before the model is built
            workspace.init_workspace_manager(torch.device("meta"))

    @contextlib.contextmanager
    def current(self):
        """The CUDA platform current (and torch.cuda answering the GPU) inside the block."""
        torch = self.torch
        saved = (torch.cuda.get_device_capability, torch.cuda.is_available)
        torch.cuda.get_device_capability = lambda device=None: self.cc
        torch.cuda.is_available = lambda: True
        before = self.bo.make_current(self.platform)
        try:
            with self._meta_cuda_empty():
                yield
        finally:
            self.bo.make_current(before)
            torch.cuda.get_device_capability, torch.cuda.is_available = saved

    @contextlib.contextmanager
    def model_hooks(self):
        """Inside the block the model class's config hooks (`VllmConfig.try_verify_and_update_config`: GLM-5's
        fp8 cache by default on the SM100 family) run with the CUDA platform current."""
        from vllm.config import VllmConfig

        orig = VllmConfig.__dict__["try_verify_and_update_config"]
        gpu = self

        def try_verify_and_update_config(vc):
            with gpu.current():
                return orig(vc)

        VllmConfig.try_verify_and_update_config = try_verify_and_update_config
        try:
            yield
        finally:
            VllmConfig.try_verify_and_update_config = orig

    @contextlib.contextmanager
    def model_module(self, package: str):
        """A model package that picks its implementation by platform at import (DeepSeek-V4:
        vllm/models/deepseek_v4/__init__.py imports nvidia/, amd/ or cpu/: the case's `gpu_model_module`) is
        imported afresh with the CUDA platform current, and the model is built with it current (its layers
        read the platform as they build); the CPU's copy is restored afterwards."""
        saved = sys.modules.pop(package, None)  # its submodules stay (their ops are registered once)
        try:
            with self.current():
                yield
        finally:
            if saved is not None:
                sys.modules[package] = saved

    @contextlib.contextmanager
    def selecting(self):
        """Inside the block the CPU platform's attention selector answers as the CUDA platform's."""
        from vllm.platforms import current_platform
        from vllm.v1.attention import selector

        cpu_cls = type(current_platform)
        orig = cpu_cls.__dict__["get_attn_backend_cls"]
        gpu = self

        def get_attn_backend_cls(cls, selected_backend, attn_selector_config, num_heads=None):
            with gpu.current():
                return type(gpu.platform).get_attn_backend_cls(selected_backend, attn_selector_config, num_heads)

        selector._cached_get_attn_backend.cache_clear()
        cpu_cls.get_attn_backend_cls = classmethod(get_attn_backend_cls)
        try:
            with self._meta_cuda_empty():
                yield
        finally:
            cpu_cls.get_attn_backend_cls = orig
            selector._cached_get_attn_backend.cache_clear()

    @contextlib.contextmanager
    def _meta_cuda_empty(self):
        torch = self.torch
        empty = torch.empty

        def meta_empty(*args, **kwargs):
            if str(kwargs.get("device", "")).startswith("cuda"):
                kwargs["device"] = "meta"
            return empty(*args, **kwargs)

        acc = torch.accelerator
        # the workspace manager flushes the device cache as it grows; 0.34's sparse FlashMLA layer counts the
        # SMs of the current device (answered by the faked platform's num_compute_units)
        saved = (acc.empty_cache, acc.current_device_index)
        torch.empty, acc.empty_cache, acc.current_device_index = meta_empty, lambda: None, lambda: 0
        try:
            yield
        finally:
            torch.empty = empty
            acc.empty_cache, acc.current_device_index = saved


def _layer_backends(vc) -> list:
    """The distinct non-SSM attention backends of the built layers, in layer order."""
    from vllm.platforms.interface import Platform

    return Platform._find_non_ssm_backends.__func__(Platform, vc)


class _ImportOnlyFlashInfer:
    """Patch 8: while a FlashInfer backend module is imported, `flashinfer` (not installed with the CPU
    oracle venv) is a placeholder module, so that vLLM's backend class loads; the harness reads only the
    class's kernel block sizes, preferences and spec packing. No kernel is ever called; the placeholder is
    removed from sys.modules right after the import (vLLM's has_flashinfer() stays False)."""

    def find_spec(self, name, path=None, target=None):
        import importlib.machinery

        if name == "flashinfer" or name.startswith("flashinfer."):
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):
        from unittest import mock

        module = mock.MagicMock(name=spec.name)
        module.__path__, module.__spec__ = [], spec
        return module

    def exec_module(self, module) -> None:
        return None


def _cuda_backend(use_mla: bool, name: str | None = None):
    """The CUDA attention backend class the case runs with: its `backend` (a vLLM backend enum name,
    patch 6), else FlashAttention (TRITON_MLA for MLA models)."""
    if name is not None:
        import torch
        from vllm.v1.attention.backends.registry import AttentionBackendEnum

        finder = _ImportOnlyFlashInfer()
        sys.meta_path.insert(0, finder)
        empty, zeros = torch.empty, torch.zeros

        def on_meta(alloc):  # patch 10
            def meta_alloc(*args, **kwargs):
                if str(kwargs.get("device", "")).startswith("cuda"):
                    kwargs["device"] = "meta"
                return alloc(*args, **kwargs)
            return meta_alloc

        torch.empty, torch.zeros = on_meta(empty), on_meta(zeros)
        try:
            return AttentionBackendEnum[name].get_class()
        finally:
            torch.empty, torch.zeros = empty, zeros
            sys.meta_path.remove(finder)
            for mod in [m for m in sys.modules if m == "flashinfer" or m.startswith("flashinfer.")]:
                del sys.modules[mod]
    if use_mla:
        from vllm.v1.attention.backends.mla.triton_mla import TritonMLABackend
        return TritonMLABackend
    from vllm.v1.attention.backends.flash_attn import FlashAttentionBackend
    return FlashAttentionBackend


def _align_as_on_cuda(vc, backend_name: str | None, on_gpu: bool = False) -> None:
    """Patches 1-2, then vLLM's own Platform.update_block_size_for_backend (patch 18: the layers' own
    backends, patch 1 not applied)."""
    from vllm.config import set_current_vllm_config
    from vllm.config.cache import CacheConfig
    from vllm.platforms.interface import Platform

    backend = None if on_gpu else _cuda_backend(vc.model_config.use_mla, backend_name)
    cc = vc.cache_config
    if not cc.user_specified_block_size:
        cc.block_size = CacheConfig.DEFAULT_BLOCK_SIZE
    if cc.mamba_cache_mode == "align":
        cc.mamba_block_size = cc.block_size
    elif vc.model_config.is_hybrid or cc.mamba_block_size is not None:
        cc.mamba_block_size = vc.model_config.max_model_len
    # patch 1 (patch 14 before 0.31: the platform asks `_find_non_ssm_backend` for one backend class); on a
    # GPU (patch 18) the platform's own answer stands
    name, answer = (("_find_non_ssm_backends", [backend]) if "_find_non_ssm_backends" in Platform.__dict__
                    else ("_find_non_ssm_backend", backend))
    saved = Platform.__dict__[name]
    if backend is not None:
        setattr(Platform, name, classmethod(lambda cls, vllm_config: answer))
    try:
        with set_current_vllm_config(vc):
            Platform.update_block_size_for_backend.__func__(Platform, vc)
    finally:
        setattr(Platform, name, saved)


def _index(name: str) -> int | None:
    """The layer index of a cache's layer name; patch 23: a name with two integers (LongCat-Flash's two attention
    modules per decoder layer, `layers.N.self_attn.M`) is numbered as the GPU model runner binds it
    (extract_layer_index with num_attn_module 2: N x 2 + M)."""
    from vllm.model_executor.models.utils import extract_layer_index
    for modules in (1, 2):
        try:
            return extract_layer_index(name, modules)
        except Exception:
            continue
    return None


def _group_record(group, vc) -> dict:
    from vllm.utils.math_utils import cdiv
    from vllm.v1.kv_cache_interface import UniformTypeKVCacheSpecs

    spec = group.kv_cache_spec
    one = next(iter(spec.kv_cache_specs.values())) if isinstance(spec, UniformTypeKVCacheSpecs) else spec
    return {"spec": type(one).__name__, "layers": sorted(i for i in map(_index, group.layer_names) if i is not None),
            "layer_names": list(group.layer_names), "block_size": one.block_size,
            "page_size_bytes": one.page_size_bytes,
            "blocks_per_request": cdiv(spec.max_memory_usage_bytes(vc), spec.page_size_bytes)}


def _spec_record(spec, vc) -> dict:
    """One cache's KVCacheSpec (listed in vLLM's order, which its grouping follows): its class, block, page,
    block-stride alignment, window, tokens per stored state and the blocks one request at max_model_len
    holds (max_memory_usage_bytes)."""
    from vllm.utils.math_utils import cdiv

    rec = {"spec": type(spec).__name__, "block_size": spec.block_size, "page_size_bytes": spec.page_size_bytes,
           "stride_alignment": spec.get_block_stride_alignment() if hasattr(spec, "get_block_stride_alignment")
           else 1,
           "blocks_per_request": cdiv(spec.max_memory_usage_bytes(vc), spec.page_size_bytes)}
    for key in ("sliding_window", "tokens_per_state", "num_kv_heads", "head_size", "dtype"):
        value = getattr(spec, key, None)
        if value is not None:
            rec[key] = value if isinstance(value, int) else str(value)
    return rec


def _groups_pre_033(vc, specs: dict) -> list:
    """Patch 13: the KV cache groups a release before 0.33 forms inside get_kv_cache_configs (its preamble:
    the one worker's specs, sliding-window specs tagged with the retained lookahead tokens)."""
    from dataclasses import replace

    from vllm.v1.core.kv_cache_utils import get_kv_cache_groups
    from vllm.v1.kv_cache_interface import SlidingWindowSpec

    if hasattr(vc, "num_prefill_lookahead_tokens"):
        extra = max(0, vc.num_prefill_lookahead_tokens - 1)
    else:  # patch 16, before 0.31: multi-module MTP retains num_speculative_tokens - 1 tokens
        sc = vc.speculative_config
        extra = sc.num_speculative_tokens - 1 if sc is not None and sc.use_multi_module_mtp() else 0
    merged = {name: replace(spec, extra_retained_tokens=extra) if isinstance(spec, SlidingWindowSpec) else spec
              for name, spec in specs.items()}
    return get_kv_cache_groups(vc, merged)


def _kv_cache_configs(vc, specs: dict, available: int):
    """(groups, configs or the ValueError's first line): 0.33+ kv_cache_planning, else patch 13."""
    try:
        from vllm.v1.core.kv_cache_planning import get_global_kv_cache_groups, get_kv_cache_configs
    except ModuleNotFoundError:
        from vllm.v1.core.kv_cache_utils import get_kv_cache_configs as configs_pre_033
        try:
            configs = configs_pre_033(vc, [specs], [available])
        except ValueError as e:
            return _groups_pre_033(vc, specs), str(e).splitlines()[0]
        return configs[0].kv_cache_groups, configs
    groups = get_global_kv_cache_groups(vc, [specs])
    try:
        return groups, get_kv_cache_configs(vc, [specs], [available], groups)
    except ValueError as e:
        return groups, str(e).splitlines()[0]


def _layout_name(vc, specs: dict, backends: list) -> str | None:
    """vLLM's resolved KV cache layout; patch 15: before 0.29 one global layout (`get_kv_cache_layout`: the
    override, VLLM_KV_CACHE_LAYOUT or the KV connector's; None without them)."""
    from vllm.v1.attention.backends import utils

    if not hasattr(utils, "resolve_kv_cache_layout"):
        return utils.get_kv_cache_layout()
    supported = [[x.name for x in utils.get_supported_kv_cache_layouts(backends)]]
    return utils.resolve_kv_cache_layout(vc, supported, list(specs.values())).name


class _LoggedFigures:
    """Patch 30: stands in for kv_cache_utils' logger while the release's `_report_kv_cache_config` runs, and
    keeps the figures it logs (the "GPU KV cache size" line by the release's own formula)."""

    def __init__(self) -> None:
        self.lines: dict[str, tuple] = {}

    def info_once(self, msg: str, *args, **kwargs) -> None:
        self.lines[msg.split(":")[0]] = args

    info = debug = warning = warning_once = info_once


def _kv_cache_capacity(vc, config) -> tuple[int, float]:
    """(the "GPU KV cache size" tokens, the maximum concurrency) of a KV cache config: 0.25+
    `get_kv_cache_capacity`; patch 30 before it, the tokens the release's `_report_kv_cache_config` logs and
    the concurrency of its `get_max_concurrency_for_kv_cache_config` (the float that line prints with %.2f)."""
    from vllm.v1.core import kv_cache_utils as kcu

    if hasattr(kcu, "get_kv_cache_capacity"):
        return kcu.get_kv_cache_capacity(vc, config)
    saved, kcu.logger = kcu.logger, _LoggedFigures()
    try:
        kcu._report_kv_cache_config(vc, config)
        tokens = int(kcu.logger.lines["GPU KV cache size"][0].replace(",", ""))
    finally:
        kcu.logger = saved
    return tokens, kcu.get_max_concurrency_for_kv_cache_config(vc, config)


def _capacity(vc, specs: dict, available: int, backend_name: str | None, on_gpu: bool = False) -> dict:
    from vllm.v1.core import single_type_kv_cache_manager as managers

    if hasattr(managers, "register_all_kvcache_specs"):  # patch 30: before 0.25 a static spec_manager_map
        managers.register_all_kvcache_specs(vc)
    backends = _layer_backends(vc) if on_gpu else [_cuda_backend(vc.model_config.use_mla, backend_name)]
    layout = _layout_name(vc, specs, backends)
    if not specs:  # patch 21: an attention-free model gets no KV memory
        available = 0
    groups, configs = _kv_cache_configs(vc, specs, available)
    out: dict = {"kv_cache_layout": layout, "groups": [_group_record(g, vc) for g in groups],
                 "num_blocks": None, "gpu_kv_cache_tokens": None, "max_concurrency": None, "startup_error": None}
    if on_gpu:  # every cache's own spec, before grouping (the layouts set by the GPU's backends)
        out["layer_specs"] = [{"name": name, **_spec_record(spec, vc)} for name, spec in specs.items()]
    ctx = vc.compilation_config.static_forward_context  # patch 13: before 0.33 specs carry no is_draft
    drafts = sorted(name for name, spec in specs.items()
                    if getattr(spec, "is_draft", getattr(ctx.get(name), "is_draft_layer", False)))
    if drafts:  # the draft model's layers (speculative decoding), in the groups above by name
        out["draft_layer_names"] = drafts
    if isinstance(configs, str):
        out["startup_error"] = configs
        return out
    if not configs[0].kv_cache_groups:  # patch 21: no capacity to log
        out["num_blocks"] = configs[0].num_blocks
        return out
    tokens, conc = _kv_cache_capacity(vc, configs[0])
    out.update({"num_blocks": configs[0].num_blocks, "gpu_kv_cache_tokens": tokens, "max_concurrency": conc})
    return out


def _speculative_config(flags: dict, base: Path, tmp: str) -> dict | None:
    """The case's --speculative-config; a draft model given as a config file is copied to a folder of its own."""
    spec = flags.get("speculative_config")
    if spec is None:
        return None
    spec = dict(spec)
    if spec.get("model"):
        draft = Path(tmp) / "draft"
        draft.mkdir()
        shutil.copy((base / spec["model"]).resolve(), draft / "config.json")
        spec["model"] = str(draft)
    return spec


def _build_drafter(vc):
    """Patch 11: the draft model the speculative config names is built on the meta device as the drafter's
    load_model builds it, so its attention layers join the static forward context and are marked as draft
    layers, as load_model marks them. The draft VllmConfig: 0.33 llm_base_proposer.py::_create_draft_vllm_config,
    0.34 SpeculativeConfig.apply_draft_overrides (worker/gpu/spec_decode/eagle/utils.py::load_eagle_model).
    Methods without a draft model (ngram, suffix) build nothing."""
    from types import SimpleNamespace

    from vllm.model_executor.layers.attention_layer_base import AttentionLayerBase
    from vllm.model_executor.model_loader.utils import initialize_model

    sc = vc.speculative_config
    if sc is None:
        return None
    if hasattr(sc, "uses_draft_kv_cache"):
        uses_draft = sc.uses_draft_kv_cache()
    else:  # patch 16: before 0.30, 0.33's definition from the release's own predicates
        uses_draft = sc.use_eagle() or sc.uses_draft_model() or sc.uses_extract_hidden_states()
    if not uses_draft:
        return None
    if hasattr(sc, "apply_draft_overrides"):
        draft_vc = sc.apply_draft_overrides(vc)
    else:
        from vllm.v1.spec_decode.llm_base_proposer import SpecDecodeBaseProposer
        draft_vc = SpecDecodeBaseProposer._create_draft_vllm_config(SimpleNamespace(speculative_config=sc,
                                                                                   vllm_config=vc))
    before = set(vc.compilation_config.static_forward_context)
    if sc.uses_draft_model():  # a separate draft checkpoint: its own model and parallel config, no quant config
        from dataclasses import replace

        draft_vc = replace(draft_vc, model_config=sc.draft_model_config, quant_config=None,
                           parallel_config=replace(sc.draft_parallel_config, rank=vc.parallel_config.rank))
        model = initialize_model(vllm_config=draft_vc, prefix="draft_model")
    else:
        model = initialize_model(vllm_config=draft_vc, model_config=sc.draft_model_config)
    for name, layer in vc.compilation_config.static_forward_context.items():
        if name not in before and isinstance(layer, AttentionLayerBase):
            layer.is_draft_layer = True
    return model


def _build(vc, case: dict, ao, on_gpu: _OnGpu | None):
    """The model and the drafter, built on the meta device (patch 20: on the CPU for a model class that
    computes a buffer from a tensor at build time, arch_oracle.py patch 10)."""
    import torch
    from vllm.model_executor.model_loader.utils import initialize_model
    from vllm.utils.torch_utils import set_default_torch_dtype

    cap = on_gpu.cc if on_gpu else case.get("device_capability")
    for device in ("meta", "cpu"):
        try:
            with set_default_torch_dtype(vc.model_config.dtype), torch.device(device), \
                    (on_gpu.selecting() if on_gpu else contextlib.nullcontext()), \
                    ao._device_capability({"device_capability": cap}), ao._flashinfer_impl_check(case), \
                    (on_gpu.model_module(case["gpu_model_module"]) if on_gpu and case.get("gpu_model_module")
                     else contextlib.nullcontext()), _kda_prefill(on_gpu, vc.model_config.architecture):
                model = initialize_model(vllm_config=vc)
                return model, _build_drafter(vc)
        except (NotImplementedError, RuntimeError) as e:
            if device == "cpu" or "meta tensor" not in str(e):
                raise
            vc.compilation_config.static_forward_context.clear()
    raise AssertionError("unreachable")


def run_case(ao, case: dict, base: Path) -> dict:
    import vllm
    from vllm.config import set_current_vllm_config
    from vllm.distributed.parallel_state import (
        destroy_model_parallel,
        ensure_model_parallel_initialized,
        init_distributed_environment,
    )
    from vllm.engine.arg_utils import EngineArgs
    from vllm.v1.worker.gpu.attn_utils import get_kv_cache_spec

    cfg_path = (base / case["config"]).resolve()
    cfg = json.loads(cfg_path.read_text())
    res: dict = {"kind": "kvplan.vllm_capacity_answer", "vllm_version": vllm.__version__, "case": case["name"],
                 "config": case["config"], "config_sha256": hashlib.sha256(cfg_path.read_bytes()).hexdigest(),
                 "flags": case["flags"], "available_bytes": case["available_bytes"],
                 "backend": case.get("backend"), "engine": None,
                 **({"gpu": case["gpu"]} if case.get("gpu") else {}),
                 "answer": None, "error": None}
    ao._use_case_sub_configs(case)  # patch 12 (arch_oracle.py patch 32: sub-configs of a stand-in config class)
    if not case.get("vllm_config_class") and not case.get("as_published"):  # patch 20 (arch_oracle.py 3, 41)
        ao._register_unknown_model_type(cfg, bool(case.get("remote_config")), case.get("remote_config_base"))
    saved_v2 = os.environ.get("VLLM_USE_V2_MODEL_RUNNER")
    if case.get("v2_model_runner"):  # patch 19 (arch_oracle.py patch 12)
        os.environ["VLLM_USE_V2_MODEL_RUNNER"] = "1"
    tmp = tempfile.mkdtemp(prefix="kvplan-capacity-")
    stage = "create_engine_config"
    try:
        if case.get("vllm_config_class"):  # patch 19 (arch_oracle.py patch 19); a release without it: an error
            ao._register_shipped_config_class(case, cfg)
        fmt = ao._config_format(cfg_path, tmp)  # patches 20, 25 (arch_oracle.py patch 37)
        _case_files(case, base, tmp)  # patches 20, 25 (arch_oracle.py patches 15, 31)
        ao._drop_case_keys(case, tmp)  # patch 12 (arch_oracle.py patch 40)
        f = case["flags"]
        ea = EngineArgs(model=tmp, config_format=fmt, skip_tokenizer_init=True, trust_remote_code=True,
                        enforce_eager=True, load_format="dummy", kv_cache_dtype=f.get("kv_cache_dtype", "auto"),
                        dtype=f.get("dtype", "auto"), max_model_len=f["max_model_len"],
                        enable_prefix_caching=f.get("enable_prefix_caching"),
                        max_num_batched_tokens=f.get("max_num_batched_tokens", 8192),
                        **_skip_layers_arg(f),
                        tensor_parallel_size=f.get("tensor_parallel_size", 1),
                        speculative_config=_speculative_config(f, base, tmp),
                        disable_hybrid_kv_cache_manager=f.get("disable_hybrid_kv_cache_manager"),
                        **({"mamba_ssm_cache_dtype": f["mamba_ssm_cache_dtype"]}
                           if "mamba_ssm_cache_dtype" in f else {}))
        on_gpu = _OnGpu(case["gpu"]) if case.get("gpu") and not case.get("backend") else None  # patch 18
        with on_gpu.model_hooks() if on_gpu else contextlib.nullcontext():
            vc = ea.create_engine_config()
        stage = "build_model"
        with set_current_vllm_config(vc):
            if not ao._DIST_READY:
                init_distributed_environment(world_size=1, rank=0, local_rank=0, backend="gloo",
                                             distributed_init_method=f"tcp://127.0.0.1:{ao._free_port()}")
                ao._DIST_READY = True
            destroy_model_parallel()
            ensure_model_parallel_initialized(1, 1)
            _tp_rank0_view(f.get("tensor_parallel_size", 1))
        mc = vc.model_config
        gdn = _gdn_prefill(case)
        gdn.__enter__()
        model, drafter = _build(vc, case, ao, on_gpu)
        stage = "align_block_size"
        gpu_current = on_gpu.current() if on_gpu else contextlib.nullcontext()
        gpu_current.__enter__()
        _align_as_on_cuda(vc, case.get("backend"), on_gpu is not None)
        stage = "specs"
        with set_current_vllm_config(vc):
            for layer in vc.compilation_config.static_forward_context.values():
                backend = getattr(layer, "attn_backend", None)
                if on_gpu is None and backend is not None and not backend.is_ssm():  # patch 4
                    layer.attn_backend = _cuda_backend(backend.is_mla(), case.get("backend"))
            # the GPU model runner's own spec collection: each layer's spec, the backend's packing
            # (customize_attention_spec: inline per-token-head scales, fixed kernel-block strides), drafts
            # (patch 11 marks the draft's layers; their specs carry is_draft)
            specs = get_kv_cache_spec(vc)
            stage = "capacity"
            res["answer"] = _capacity(vc, specs, case["available_bytes"], case.get("backend"), on_gpu is not None)
            if on_gpu is not None:  # the backends the GPU's selector gave the layers
                res["answer"]["backends"] = [b.get_name() for b in _layer_backends(vc)]
        gpu_current.__exit__(None, None, None)
        gdn.__exit__(None, None, None)
        cc = vc.cache_config
        res["engine"] = {"architecture": mc.architecture, "model_dtype": ao._dtype_name(mc.dtype),
                         "max_model_len": mc.max_model_len, "block_size": cc.block_size,
                         "mamba_cache_mode": cc.mamba_cache_mode, "mamba_block_size": cc.mamba_block_size,
                         "mamba_page_size_padded": cc.mamba_page_size_padded,
                         "mamba_ssm_cache_dtype": cc.mamba_ssm_cache_dtype,
                         "enable_prefix_caching": cc.enable_prefix_caching}
        del model, drafter
    except Exception as e:
        res["error"] = {"stage": stage, "type": type(e).__name__,
                        "message": str(e).replace(tmp, "<model dir>").splitlines()[0][:400] if str(e) else "",
                        "traceback_tail": [ln.strip().replace(tmp, "<model dir>")[:300]
                                           for ln in traceback.format_exc().splitlines()[-4:]]}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if case.get("vllm_config_class"):  # the model_type's own class again
            from transformers.models.auto.configuration_auto import CONFIG_MAPPING

            CONFIG_MAPPING._extra_content.pop(cfg.get("model_type"), None)
        if saved_v2 is None:
            os.environ.pop("VLLM_USE_V2_MODEL_RUNNER", None)
        else:
            os.environ["VLLM_USE_V2_MODEL_RUNNER"] = saved_v2
    return res


def _mla_build_backend_before_026() -> None:
    """Patch 27: without a CPU MLA backend, MLA layers are built with TRITON_MLA (arch_oracle.py answers the
    CPU backends at build time)."""
    from vllm.platforms import current_platform
    from vllm.v1.attention.backends.registry import AttentionBackendEnum

    if "CPU_MLA" in AttentionBackendEnum.__members__:
        return
    plat = type(current_platform)
    orig = plat.get_attn_backend_cls

    def get_attn_backend_cls(cls, selected_backend, attn_selector_config, num_heads=None):
        if getattr(attn_selector_config, "use_mla", False):
            return AttentionBackendEnum.TRITON_MLA.get_path()
        return orig(selected_backend, attn_selector_config, num_heads)

    plat.get_attn_backend_cls = classmethod(get_attn_backend_cls)
    impl = AttentionBackendEnum.TRITON_MLA.get_class().get_impl_cls()
    init = impl.__init__

    def init_without_topk(self, *args, **kwargs):
        kwargs.pop("topk_indices_buffer", None)
        init(self, *args, **kwargs)

    impl.__init__ = init_without_topk


def _skip_layers_arg(flags: dict) -> dict:
    """Patch 34: the --kv-cache-dtype-skip-layers argument; before 0.19 EngineArgs has no such field, so it is
    passed only where the case lists skip layers (the release then refuses it, as its parser refuses the flag)."""
    import dataclasses

    from vllm.engine.arg_utils import EngineArgs

    skip = list(flags.get("kv_cache_dtype_skip_layers", []))
    known = any(f.name == "kv_cache_dtype_skip_layers" for f in dataclasses.fields(EngineArgs))
    return {"kv_cache_dtype_skip_layers": skip} if skip or known else {}


def _cpu_compute_units_before_025() -> None:
    """Patch 31: the CPU platform's compute units, as 0.25's CpuPlatform.num_compute_units answers them."""
    import torch
    from vllm.platforms import current_platform

    plat = type(current_platform)
    if plat.__name__ == "CpuPlatform" and "num_compute_units" not in plat.__dict__:
        plat.num_compute_units = classmethod(lambda cls, device_id=0: torch.get_num_threads())


class _CudaAlikeForMoeCheck:
    """Patch 32: the platform fused_moe/layer.py reads, answering CUDA-alike for its non-gated-activation check."""

    def __init__(self, platform) -> None:
        self._platform = platform

    def is_cuda_alike(self) -> bool:
        return True

    def __getattr__(self, name: str):
        return getattr(self._platform, name)


def _moe_activation_check_before_025() -> None:
    """Patch 32."""
    import inspect

    from vllm.model_executor.layers.fused_moe import layer

    if "is_act_and_mul=False is supported only for CUDA" in inspect.getsource(layer):
        layer.current_platform = _CudaAlikeForMoeCheck(layer.current_platform)


def _module_check_without_spec_before_025() -> None:
    """Patch 33: a stand-in module without a spec is not available (0.25+'s _has_module answers so)."""
    from vllm.utils import import_utils

    orig = import_utils._has_module
    if "import_module" in getattr(orig, "__wrapped__", orig).__code__.co_names:  # 0.25+: a trial import
        return

    def has_module(module_name: str) -> bool:
        try:
            return orig(module_name)
        except ValueError:
            return False

    import_utils._has_module = has_module


def _transformers_as_the_release_read_them() -> None:
    """Patch 28: a release from before transformers' heterogeneous configs reads a per-layer attribute on the
    whole config and the layer-type names of its time."""
    import vllm

    conv = Path(vllm.__file__).parent / "transformers_utils" / "model_arch_config_convertor.py"
    if conv.is_file() and "per_layer_config" in conv.read_text():
        return
    with contextlib.suppress(ImportError):
        from transformers.integrations.heterogeneity import configuration_utils as het

        mixin = het.HeterogeneousConfigMixin
        get = mixin.__getattribute__

        def getattribute(self, key):
            try:
                return get(self, key)
            except het.AmbiguousGlobalPerLayerAttributeError:
                return super(mixin, self).__getattribute__(key)

        mixin.__getattribute__ = getattribute
    with contextlib.suppress(ImportError):
        from transformers.models.gemma4 import configuration_gemma4 as g4

        post_init = g4.Gemma4TextConfig.__post_init__

        def gemma4_post_init(self, **kwargs):
            legacy = {k: kwargs[k] for k in ("global_head_dim", "num_global_key_value_heads") if k in kwargs}
            post_init(self, **kwargs)
            for key, value in legacy.items():  # the fields transformers 5.5 kept (now per-layer overrides)
                setattr(self, key, value)

        g4.Gemma4TextConfig.__post_init__ = gemma4_post_init
    with contextlib.suppress(ImportError):
        from vllm.model_executor.models import granitemoehybrid as gmh

        for new_name, old_name in (("linear_attention", "mamba"), ("full_attention", "attention")):
            gmh.ALL_DECODER_LAYER_TYPES.setdefault(new_name, gmh.ALL_DECODER_LAYER_TYPES[old_name])


def _keep_batch_budget_before_026() -> None:
    """Patch 29: before 0.26 the CPU platform's MLA batch-budget reset is undone."""
    import vllm
    from vllm.platforms import current_platform

    if tuple(int(x) for x in vllm.__version__.split(".")[:2]) >= (0, 26):
        return
    orig = type(current_platform).check_and_update_config

    def check_and_update_config(cls, vllm_config):
        sc = vllm_config.scheduler_config
        keep = sc.max_num_batched_tokens, sc.enable_chunked_prefill
        orig(vllm_config)
        sc.max_num_batched_tokens, sc.enable_chunked_prefill = keep

    type(current_platform).check_and_update_config = classmethod(check_and_update_config)


def _whisper_pooling_on_cuda_backend() -> None:
    """Patch 26: a release whose block-pooling wrapper refuses the CPU backend wraps the CUDA one instead."""
    try:
        from vllm.model_executor.models import whisper_causal as wc
    except ImportError:  # a release without Voxtral Realtime
        return
    orig = getattr(wc, "create_whisper_attention_backend_with_block_pooling", None)
    if orig is None:
        return

    def create(underlying, *args, **kwargs):
        try:
            return orig(underlying, *args, **kwargs)
        except NotImplementedError:
            return orig(_cuda_backend(False, "TRITON_ATTN"), *args, **kwargs)

    wc.create_whisper_attention_backend_with_block_pooling = create


def _case_files(case: dict, base: Path, tmp: str) -> None:
    """The checkpoint files a case carries next to its config: patch 25, name -> a file relative to the cases file
    (Voxtral Realtime's tekken.json); patch 20, name -> its JSON content (the architecture oracle's processor
    files, arch_oracle.py patches 15, 31)."""
    for name, value in case.get("files", {}).items():
        target = Path(tmp) / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(value, str):
            shutil.copy((base / value).resolve(), target)
        else:
            target.write_text(json.dumps(value))


def _cpu_platform_before_026() -> None:
    """Patch 17 (as releases/vllm_oracle-pre-0.33.patch (1)): before 0.26 the CPU platform plugin activates only
    for a CPU build of vLLM and VLLM_TARGET_DEVICE is not read, so no platform resolves ("Device string must not
    be empty"); the plugin answers vLLM's own CpuPlatform, as on a CPU build, and a platform resolved as
    unspecified during `import vllm` is resolved again."""
    import vllm.platforms as plats

    if type(plats._current_platform).__name__ != "UnspecifiedPlatform" and plats._current_platform is not None:
        return
    plats.builtin_platform_plugins["cpu"] = lambda: "vllm.platforms.cpu.CpuPlatform"
    plats._current_platform = None


def _triton_present_for_cpu_checks() -> None:
    """Patch 7 (0.34+): the CPU platform's check_and_update_config raises "vLLM on x86 CPUs requires
    Triton (triton-cpu)" where 0.33 only warned; that one call sees Triton as present (the same harness
    change as releases/vllm_oracle-0.34.0.patch). No KV cache decision reads it."""
    import vllm
    import vllm.triton_utils as tu
    from vllm.platforms import current_platform

    if tu.HAS_TRITON or tuple(int(x) for x in vllm.__version__.split(".")[:2]) < (0, 34):
        return
    orig = type(current_platform).check_and_update_config

    def check_and_update_config(cls, vllm_config):
        saved, tu.HAS_TRITON = tu.HAS_TRITON, True
        try:
            orig(vllm_config)
        finally:
            tu.HAS_TRITON = saved

    type(current_platform).check_and_update_config = classmethod(check_and_update_config)


def _import_release(release: str | None, site: Path | None) -> str | None:
    """Put the release's vLLM (a `pip --target` folder, scripts/oracle/release_oracle.sh) in front of the
    oracle venv's; the problem as one line when it cannot be used, else None."""
    if site is None and release is not None and release != BASE_RELEASE:
        site = RELEASES_WORK / f"vllm-{release}"
    if site is None:
        return None
    if not (site / "vllm").is_dir():
        return (f"no vLLM in {site}: install the wheel there first (scripts/oracle/release_oracle.sh {release} "
                f"installs it), or pass --site DIR")
    if not any(site.glob("vllm-*.dist-info")):  # pip --target writes it with the package; DONE follows it
        return f"{site} is still being installed (no vllm-*.dist-info there yet): wait for it"
    if (site.parent / "deps").is_dir():
        sys.path.insert(0, str(site.parent / "deps"))
    sys.path.insert(0, str(site))
    return None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=f"""Answers for a release:
  vLLM {BASE_RELEASE} (the oracle venv's own vLLM; answers in <cases dir>/answers/):
    VLLM_TARGET_DEVICE=cpu $ORACLE_VENV/bin/python scripts/oracle/capacity_oracle.py \\
        --cases tests/data/vllm_oracle_capacity/cases.json
  another release (its wheel `pip install --no-deps --target {RELEASES_WORK}/vllm-VERSION vllm==VERSION`,
  as scripts/oracle/release_oracle.sh VERSION does; answers in <cases dir>/releases/VERSION/):
    VLLM_TARGET_DEVICE=cpu $ORACLE_VENV/bin/python scripts/oracle/capacity_oracle.py \\
        --cases tests/data/vllm_oracle_capacity/cases.json --release VERSION [--site DIR]
Exit status: 0 when every case was answered, 1 when a case ran into an error (recorded in its answer;
the parity test fails on it), 2 for bad input
(a missing cases file, a release folder without vLLM or still being installed, a version mismatch).
tests/planner/test_vllm_capacity_parity.py compares kvplan at --engine vllm==VERSION with every answer.""")
    ap.add_argument("--cases", required=True, type=Path, help="cases.json (tests/data/vllm_oracle_capacity)")
    ap.add_argument("--release", default=None, metavar="VERSION",
                    help=f"the vLLM release to answer with (default: the interpreter's own, {BASE_RELEASE})")
    ap.add_argument("--site", default=None, type=Path, metavar="DIR",
                    help=f"folder holding that release's vllm package (default {RELEASES_WORK}/vllm-VERSION)")
    ap.add_argument("--only", nargs="*", default=None, metavar="NAME", help="run only these cases")
    ap.add_argument("--force", action="store_true", help="rerun cases that have an answer")
    args = ap.parse_args(argv)
    if not args.cases.is_file():
        print(f"capacity_oracle: no cases file {args.cases}: pass --cases tests/data/vllm_oracle_capacity/cases.json",
              file=sys.stderr)
        return 2
    problem = _import_release(args.release, args.site)
    if problem is not None:
        print(f"capacity_oracle: {problem}", file=sys.stderr)
        return 2
    import vllm

    if args.release is not None and vllm.__version__ != args.release:
        print(f"capacity_oracle: imported vLLM {vllm.__version__} from {vllm.__file__}, not {args.release}: "
              "pass --site with the folder holding that release", file=sys.stderr)
        return 2
    base = args.cases.parent
    cases = json.loads(args.cases.read_text())["cases"]
    out_dir = base / "answers" if vllm.__version__ == BASE_RELEASE else base / "releases" / vllm.__version__
    out_dir.mkdir(parents=True, exist_ok=True)
    real_stdout = sys.stdout
    sys.stdout = sys.stderr  # vLLM logs to stdout
    _cpu_platform_before_026()
    ao = _arch_oracle()
    ao.STUB_MODULES += ("tiktoken",)  # patch 22
    ao._install_patches()
    for patch in (ao._muse_spark_without_cute_dsl, ao._openpangu_vl_vit_backend):  # patch 20 (arch_oracle 34, 36)
        with contextlib.suppress(ImportError, AttributeError):  # a release without the model
            patch()
    with contextlib.suppress(ImportError, AttributeError):  # patch 18 (arch_oracle.py patch 33); a release
        ao._deepseek_v4_vl_on_cpu()  # without DeepSeek-V4's VL model
    _keep_ssm_dtype()
    _triton_present_for_cpu_checks()
    _whisper_pooling_on_cuda_backend()
    _mla_build_backend_before_026()
    _transformers_as_the_release_read_them()
    _keep_batch_budget_before_026()
    _cpu_compute_units_before_025()
    _moe_activation_check_before_025()
    _module_check_without_spec_before_025()
    failed = 0
    for case in cases:
        if args.only and case["name"] not in args.only:
            continue
        out = out_dir / f"{case['name']}.json"
        digest = hashlib.sha256((base / case["config"]).resolve().read_bytes()).hexdigest()
        with contextlib.suppress(Exception):
            if out.exists() and not args.force and json.loads(out.read_text())["config_sha256"] == digest:
                continue
        t0 = time.time()
        res = run_case(ao, case, base)
        out.write_text(json.dumps(res, indent=1, sort_keys=True) + "\n")
        err = res["error"]
        failed += err is not None
        print(f"{case['name']}: {'ok' if err is None else err['type'] + ': ' + err['message'][:150]}"
              f" ({time.time() - t0:.1f}s)", file=real_stdout, flush=True)
    if failed:
        print(f"capacity_oracle: {failed} case(s) answered with an error (recorded in their answers; "
              "the parity test fails on them): fix the harness for this release (a patch above)", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
