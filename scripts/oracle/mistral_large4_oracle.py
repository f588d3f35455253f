#!/usr/bin/env python3
"""Ask vLLM 0.34+ what it builds for a Mistral Large 4 params.json (run by hand, never in CI; CPU only).

    scripts/oracle/release_oracle.sh 0.34.0 --install-only    # the release's wheel (/tmp/kvplan-oracle-releases)
    mkdir /tmp/oracle-0.34.0 && cp scripts/oracle/vllm_oracle.py /tmp/oracle-0.34.0/ \
      && patch -d /tmp/oracle-0.34.0 -p0 < scripts/oracle/releases/vllm_oracle-0.34.0.patch
    PYTHONPATH=/tmp/kvplan-oracle-releases/vllm-0.34.0:/tmp/kvplan-oracle-releases/deps VLLM_TARGET_DEVICE=cpu \
      /tmp/vllm-oracle-venv/bin/python scripts/oracle/mistral_large4_oracle.py \
      --oracle-dir /tmp/oracle-0.34.0 --out tests/data/vllm_oracle_releases/0.34.0

Every folder of tests/data/mistral_large4 holds a params.json; each runs through the release's
single-case oracle (vllm_oracle.py --config-format mistral, in a forked child as release_corpus.py
does) for the `--kv-cache-dtype` cases below. Output: <out>/mistral-large-4-<folder>.json in
release_corpus.py's format, plus per case the layers that read another layer's cache
(`kv_shared`: [index, source index]), the indexer key caches (`indexer`: [index, head_size, dtype]), the
cache dtype after create_engine_config (`cache_dtype`) and the oracle's notes (`build_notes`).

Harness steps (vLLM itself is not changed):
  * vllm/models/mistral/mistral_large4/__init__.py raises NotImplementedError on any platform but
    CUDA/ROCm. Its NVIDIA implementation is imported with CpuPlatform.is_cuda answering True for that
    one import (the modules it needs imported first, on the CPU platform), then registered with
    ModelRegistry.register_model so the registry inspects that class in this process instead of
    importing the package again in a subprocess; torch.cuda.Event (made by indexer layers for their
    forward, which never runs here) is a plain object. Everything else (the params.json remap,
    verify_and_update_config's dtype rewrite, the model's layers on the meta device) is vLLM's.
  * The platform is CpuPlatform, so `current_platform.is_rocm()` is False: the ROCm branch of
    MistralLarge4ForCausalLM.verify_and_update_config (fp8) is read from the source, not run.
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")

CASES: dict[str, list[str]] = {
    "auto": ["--kv-cache-dtype", "auto"],
    "fp8": ["--kv-cache-dtype", "fp8"],
    "bf16": ["--kv-cache-dtype", "bfloat16"],
    "fp8_ds_mla": ["--kv-cache-dtype", "fp8_ds_mla"],
}
_NEEDED_FIRST = ("vllm.model_executor.layers.logits_processor", "vllm.model_executor.layers.linear",
                 "vllm.model_executor.layers.fused_moe", "vllm.model_executor.layers.attention",
                 "vllm.model_executor.layers.sparse_attn_indexer", "vllm.v1.attention.backends.mla.indexer",
                 "vllm.model_executor.layers.quantization.utils.fp8_utils")


def import_nvidia_model() -> None:
    """The NVIDIA MistralLarge4ForCausalLM on the CPU platform, registered in-process."""
    for mod in _NEEDED_FIRST:
        importlib.import_module(mod)
    from vllm import ModelRegistry
    from vllm.platforms import current_platform
    cls = type(current_platform)
    is_cuda = cls.is_cuda
    cls.is_cuda = lambda self: True  # type: ignore[method-assign]
    try:
        ml4 = importlib.import_module("vllm.models.mistral.mistral_large4")
    finally:
        cls.is_cuda = is_cuda  # type: ignore[method-assign]
    ModelRegistry.register_model("MistralLarge4ForCausalLM", ml4.MistralLarge4ForCausalLM)
    # Indexer layers make two torch.cuda.Event()s for their forward's stream overlap; a CPU-only torch
    # cannot construct one. The model is only built here, never run: a plain object stands in.
    import torch
    torch.cuda.Event = lambda *a, **k: object()  # type: ignore[assignment,misc]


def route_sparse_mla(oracle) -> None:
    """After the oracle's own patches: a sparse MLA layer gets a sparse MLA backend (FLASHMLA_SPARSE).

    The oracle answers every MLA layer with CPU_MLA, which refuses KV-sharing layers ("KV sharing is
    only supported by sparse MLA backends"); on CUDA vLLM picks a sparse backend for these layers.
    The backend class is only constructed (the model is built on the meta device, never run)."""
    install = oracle._install_patches

    def install_then_route():
        install()
        from vllm.platforms import current_platform
        from vllm.v1.attention.backends.registry import AttentionBackendEnum
        cls = type(current_platform)
        chosen = cls.get_attn_backend_cls.__func__

        def get_attn_backend_cls(c, selected_backend, attn_selector_config, num_heads=None):
            path = chosen(c, selected_backend, attn_selector_config, num_heads)
            if getattr(attn_selector_config, "use_sparse", False):
                return AttentionBackendEnum.FLASHMLA_SPARSE.get_path()
            return path

        cls.get_attn_backend_cls = classmethod(get_attn_backend_cls)
        # Its impl sizes kernel grids from the device's SM count at construction: an H100's.
        import torch
        fms = importlib.import_module("vllm.v1.attention.backends.mla.flashmla_sparse")
        fms.num_compute_units = lambda index: 132  # type: ignore[attr-defined]
        torch.accelerator.current_device_index = lambda: 0  # type: ignore[assignment]
        torch.accelerator.empty_cache = lambda: None  # type: ignore[assignment]
        # and reserves its workspaces, which GPUModelRunner.__init__ sets up: on the meta device here.
        from vllm.v1.worker.workspace import init_workspace_manager
        init_workspace_manager(torch.device("meta"))

    oracle._install_patches = install_then_route


def collect_extra(vllm_config) -> dict:
    """KV-shared layers and indexer key caches, read from the built model's layer registry."""
    ctx = vllm_config.compilation_config.static_forward_context
    shared, indexer = [], []
    for name, layer in ctx.items():
        parts = name.split(".")
        idx = next((int(p) for p in parts if p.isdigit()), None)
        target = getattr(layer, "kv_sharing_target_layer_name", None)
        if target:
            src = next((int(p) for p in target.split(".") if p.isdigit()), None)
            shared.append([idx, src])
        if name.endswith(".indexer.k_cache"):
            indexer.append([idx, getattr(layer, "head_dim", None), str(getattr(layer, "dtype", None))])
    return {"kv_shared": sorted(shared), "indexer": sorted(indexer)}


def run_case(oracle, params: Path, flags: list[str]) -> dict:
    """One case in a forked child (release_corpus.fork_json): the release's vllm_oracle.run, plus the extra
    fields."""
    from release_corpus import fork_json  # this folder is on sys.path (main)

    def child(out: str) -> int:
        captured = {}
        from vllm.config import VllmConfig
        post_init = VllmConfig.__post_init__

        def keep(self, *a, **k):
            captured["config"] = self
            return post_init(self, *a, **k)

        VllmConfig.__post_init__ = keep  # type: ignore[method-assign]
        route_sparse_mla(oracle)
        args = oracle._parse_args(["--config", str(params), "--config-format", "mistral", *flags])
        res = oracle.run(args)
        if res.get("error") is None and "config" in captured:
            res["extra"] = collect_extra(captured["config"])
        Path(out).write_text(json.dumps(res))
        return 0

    return fork_json(child)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--oracle-dir", required=True, type=Path)
    ap.add_argument("--models", type=Path,
                    default=Path(__file__).resolve().parents[2] / "tests/data/mistral_large4")
    ap.add_argument("--out", required=True, type=Path)
    args = ap.parse_args(argv)
    sys.path.insert(0, str(args.oracle_dir))
    oracle = importlib.import_module("vllm_oracle")
    oracle._install_patches()
    for mod in ("vllm.config", "vllm.engine.arg_utils", "vllm.model_executor.model_loader.utils"):
        importlib.import_module(mod)
    import_nvidia_model()
    import vllm
    sys.path.insert(1, str(Path(__file__).resolve().parent))
    corpus = importlib.import_module("release_corpus")  # its compact() and answer FORMAT

    args.out.mkdir(parents=True, exist_ok=True)
    for folder in sorted(p for p in args.models.iterdir() if (p / "params.json").is_file()):
        answers = {}
        for case, flags in CASES.items():
            res = run_case(oracle, folder / "params.json", flags)
            answers[case] = {**corpus.compact(res), **(res.get("extra") or {"kv_shared": [], "indexer": []}),
                             "cache_dtype": (res.get("engine") or {}).get("cache_dtype_after_create_engine_config"),
                             "build_notes": [oracle._scrub([n])[0][:300] for n in res.get("notes") or []]}
        name = f"mistral-large-4-{folder.name}"
        doc = {"format": corpus.FORMAT, "vllm_version": vllm.__version__, "model": name,
               "notes": [f"params.json of tests/data/mistral_large4/{folder.name}; "
                         "NVIDIA model class imported on the CPU platform (mistral_large4_oracle.py)"],
               "cases": answers}
        (args.out / f"{name}.json").write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
        print(name + ": " + ", ".join(f"{c}:{'err' if a['error'] else a['mode']}" for c, a in answers.items()),
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
