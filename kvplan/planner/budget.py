"""The KV memory vLLM will find on a GPU: an estimate of what its startup profiling subtracts.

vLLM 0.33 (vllm/v1/worker/gpu_worker.py::determine_available_memory) gives the KV cache
    requested memory (GPU memory x --gpu-memory-utilization)
    - weights - the activation peak of a profiling forward pass at --max-num-batched-tokens
      (its sampler run included: logits over --max-num-seqs requests x the vocabulary, float32)
    - non-torch memory (CUDA context, cuBLAS / NCCL buffers)
    - the CUDA graph memory it estimates before capture (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS, on by
      default since 0.21).
It measures these on the GPU; kvplan estimates each from the model's dimensions and the flags, and says how
far the sum can be off. Pure functions.
"""
from __future__ import annotations

from dataclasses import dataclass

from kvplan.backends.capabilities import EngineVersion
from kvplan.backends.defaults import resolved_gpu_memory_utilization
from kvplan.backends.gpus import GpuFacts
from kvplan.model.arch import ModelArch
from kvplan.model.flags import ServingFlags
from kvplan.model.plan import BudgetTerm

GIB = 2**30
# Not measured per model: typical sizes seen in vLLM startup logs ("non_torch_memory", "Estimated CUDA graph
# memory"), and the error band of the whole estimate.
NON_TORCH_BYTES = int(0.5 * GIB)          # CUDA context + cuBLAS workspaces, one GPU
NCCL_BYTES = int(0.5 * GIB)               # + NCCL buffers when the model is split over GPUs
CUDA_GRAPH_BYTES = int(0.25 * GIB)        # piecewise graphs at the default capture sizes
ESTIMATE_ERROR_BYTES = int(1.0 * GIB)     # activation peaks of fused kernels / MoE workspaces vary


@dataclass(frozen=True)
class ServingDefaults:
    """vLLM's defaults for `vllm serve` on a GPU (EngineArgs._set_default_max_num_seqs_and_batched_tokens_args)."""

    max_num_batched_tokens: int
    max_num_seqs: int


def serving_defaults(gpu: GpuFacts | None) -> ServingDefaults:
    """--max-num-batched-tokens / --max-num-seqs when not passed: by GPU memory (and A100 kept small)."""
    mem = (gpu.memory_gib or 0) if gpu is not None else 0
    if mem >= 160:
        return ServingDefaults(16384, 1024)
    if mem >= 70 and "a100" not in (gpu.name if gpu is not None else "").lower():
        return ServingDefaults(8192, 1024)
    if gpu is None:
        return ServingDefaults(8192, 256)  # no GPU given: the H100-class token budget, the small seq count
    return ServingDefaults(2048, 256)


def _activation_bytes(arch: ModelArch, tokens: int, tp: int, act_bytes: int) -> int:
    """Profiling forward pass at `tokens`: hidden states (a few copies) and the widest MLP's buffers
    (gate/up output + activation; fused MoE: per routed expert, + its output)."""
    d = arch.profile_dims
    if d is None:
        return 0
    dense = 3 * d.intermediate_size // tp
    moe = d.experts_per_token * (3 * d.moe_intermediate_size // tp + d.hidden_size) if d.moe_intermediate_size else 0
    return tokens * act_bytes * (4 * d.hidden_size + max(dense, moe))


def _sampler_bytes(arch: ModelArch, seqs: int) -> int:
    """The dummy sampler run: float32 logits and probabilities for every request over the whole vocabulary."""
    d = arch.profile_dims
    return 0 if d is None else 2 * seqs * d.vocab_size * 4


def _platform(gpu: GpuFacts) -> str:
    """vLLM's platform for the GPU: cuda, rocm or another (the extensible KV cache is CUDA/ROCm only)."""
    vendor = gpu.profile.vendor if gpu.profile is not None else "nvidia"
    return {"nvidia": "cuda", "amd": "rocm"}.get(vendor, vendor)


def estimate_budget(arch: ModelArch, flags: ServingFlags, gpu: GpuFacts, weight_bytes: int,
                    model_dtype: str, engine: EngineVersion) -> tuple[int, list[BudgetTerm]]:
    """KV memory per GPU and the terms it is made of (signed: requested memory +, the rest -)."""
    ranks = flags.tensor_parallel_size * flags.pipeline_parallel_size
    defaults = serving_defaults(gpu)
    tokens = flags.max_num_batched_tokens or defaults.max_num_batched_tokens
    seqs = min(flags.max_num_seqs or defaults.max_num_seqs, tokens)
    act_bytes = 4 if model_dtype == "float32" else 2
    share = resolved_gpu_memory_utilization(engine, _platform(gpu), flags.gpu_memory_utilization)
    said = "" if flags.gpu_memory_utilization is not None else f" (vLLM {engine.version_str}'s default)"
    requested = int((gpu.memory_gib or 0) * GIB * share)
    terms = [
        BudgetTerm(name="requested", bytes=requested,
                   basis=f"{gpu.memory_gib} GiB x --gpu-memory-utilization {share}{said}"),
        BudgetTerm(name="weights", bytes=-(weight_bytes // ranks),
                   basis=f"checkpoint weights / {ranks} GPU(s)"),
        BudgetTerm(name="activation peak", bytes=-_activation_bytes(arch, tokens, flags.tensor_parallel_size,
                                                                    act_bytes),
                   basis=f"profiling forward pass at --max-num-batched-tokens {tokens}"),
        BudgetTerm(name="sampler logits", bytes=-_sampler_bytes(arch, seqs),
                   basis=f"{seqs} requests x vocabulary, float32 logits + probabilities"),
        BudgetTerm(name="CUDA graphs", bytes=-CUDA_GRAPH_BYTES,
                   basis="vLLM estimates graph memory before capture (typical 0.1-0.5 GiB)"),
        BudgetTerm(name="non-torch", bytes=-(NON_TORCH_BYTES + (NCCL_BYTES if ranks > 1 else 0)),
                   basis="CUDA context, cuBLAS" + (" and NCCL buffers" if ranks > 1 else "") + " (typical)"),
    ]
    return max(sum(t.bytes for t in terms), 0), terms
