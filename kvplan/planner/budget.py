"""The KV memory vLLM will find on a GPU: an estimate of what its startup profiling subtracts.

vLLM (vllm/v1/worker/gpu_worker.py::determine_available_memory) gives the KV cache
    requested memory (the GPU memory CUDA reports x --gpu-memory-utilization)
    - weights
    - the transient peak of a profiling run: a forward pass at --max-num-batched-tokens, then the sampler
      over --max-num-seqs requests x the vocabulary (the two do not overlap: the peak is the larger one)
    - non-torch memory (CUDA context, cuBLAS workspaces, NCCL buffers with tensor parallelism)
    - the CUDA graph memory it estimates before capture (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS, on by
      default from 0.20; 0.34's extensible KV cache measures the captured graphs instead).
It measures these on the GPU; kvplan estimates each from the model's dimensions, the flags and the release,
and gives each term the error band public startup logs show (tests/data/capacity/startup_logs.json,
`budget_logs`; docs/budget.md). Pure functions.
"""
from __future__ import annotations

from dataclasses import dataclass

from kvplan.backends.capabilities import EngineVersion
from kvplan.backends.defaults import extensible_kv_cache, resolved_gpu_memory_utilization
from kvplan.backends.gpus import GpuFacts
from kvplan.backends.vllm_rows import engine_feature
from kvplan.model.arch import ModelArch
from kvplan.model.flags import ServingFlags
from kvplan.model.plan import BudgetTerm

GIB = 2**30
MIB = 2**20

# The memory CUDA reports for a GPU (torch.cuda.mem_get_info()[1], what vLLM multiplies by
# --gpu-memory-utilization), as vLLM's startup logs print it; the datasheet figure is a little larger.
# profile -> (GiB, where it was logged, URL)
CUDA_VISIBLE_GIB: dict[str, tuple[float, str, str]] = {
    "h100-sxm": (79.19, "gateway-api-inference-extension#550",
                 "https://github.com/kubernetes-sigs/gateway-api-inference-extension/pull/550"),
    "b200": (178.36, "vllm#21489", "https://github.com/vllm-project/vllm/pull/21489"),
    "rtx-5090": (31.37, "vllm#14452", "https://github.com/vllm-project/vllm/issues/14452"),
    "l4": (22.03, "a PyTorch OOM message in the gemma-forge journal",
           "https://kenrollins.github.io/gemma-forge/journal/gotchas/nvfp4-vram-math/"),
}
# Elsewhere: the datasheet memory x this share (79.19 / 80 on H100, 178.36 / 180 on B200), off by up to
# 1% of the card (31.37 / 32 on the RTX 5090).
CUDA_VISIBLE_SHARE = 0.99
CUDA_VISIBLE_ERROR_SHARE = 0.01
# GDDR6 data-center cards run with ECC on by default, which keeps 1/16 of the memory: the L4's 24 GB shows as
# 22.03 GiB (24 x 15/16 x 0.98); the same share for the other ECC-by-default GDDR cards, off by up to 2%.
ECC_GDDR_CARDS = frozenset({"l4", "l40s", "a10"})
ECC_GDDR_SHARE = 15 / 16 * 0.98
ECC_GDDR_ERROR_SHARE = 0.02

# Sampler bytes per logit (requests x vocabulary) at its peak: float32 logits, probabilities, the random
# sample's exponentials; the PyTorch top-k/top-p path adds a full sort (values + int64 indices). Fitted to the
# logs in budget_logs and the memory columns of https://github.com/vllm-project/vllm/pull/32558 (PyTorch
# sort about 37 B, Triton kernel about 12 B per logit at 256 x 131072).
SAMPLER_SORT_BYTES = 36
SAMPLER_TRITON_BYTES = 16
SAMPLER_ERROR_SHARE = 0.35
# Forward pass: hidden states (a few copies) and the widest MLP's buffers. Within 10% of the activation
# peaks V0 logged for Llama-3.1-8B (https://github.com/vllm-project/vllm/issues/10517); fused-MoE and
# quantized-GEMM workspaces are not modelled.
FORWARD_ERROR_SHARE = 0.25
NON_TORCH_BYTES = 256 * MIB          # CUDA context + cuBLAS workspaces (logs: 0.03-0.35 GiB since 0.7)
NCCL_BYTES = 512 * MIB               # + NCCL / custom all-reduce buffers when the model is split over GPUs
NON_TORCH_ERROR_BYTES = 384 * MIB
# CUDA graphs: vLLM captures one graph per capture size and mode, and its estimate grows with their number
# (it measures two graphs per mode and extrapolates); a graph's buffers are split over tensor-parallel ranks.
# Fitted to logged estimates: 0.73 GiB for 51 piecewise + 35 full graphs on one GPU
# (https://github.com/vllm-project/vllm/pull/39559), 0.13 GiB for 5 piecewise at TP 2
# (https://github.com/noonghunna/club-3090/issues/104); cuda_graph_estimates in startup_logs.json.
CUDA_GRAPH_BASE_BYTES = 96 * MIB
CUDA_GRAPH_PER_GRAPH_BYTES = 8 * MIB
CUDA_GRAPH_ERROR_BYTES = 448 * MIB   # the furthest logged estimate: 0.54 GiB for 6 graphs (club-3090#37)


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


def cuda_visible_bytes(gpu: GpuFacts) -> tuple[int, int, str]:
    """(bytes CUDA reports, error, basis). A GPU profile's memory is its datasheet figure; hand-built facts
    (no profile) carry the CUDA figure itself."""
    mem = gpu.memory_gib or 0
    if gpu.profile is None:
        return int(mem * GIB), 0, f"{mem} GiB"
    if gpu.name in CUDA_VISIBLE_GIB:
        gib, where, _ = CUDA_VISIBLE_GIB[gpu.name]
        return int(gib * GIB), 0, f"{gib} GiB as CUDA reports it (logged: {where})"
    if gpu.name in ECC_GDDR_CARDS:
        return (int(mem * ECC_GDDR_SHARE * GIB), int(mem * ECC_GDDR_ERROR_SHARE * GIB),
                f"{mem} GiB datasheet x 15/16 (ECC) x 0.98")
    return (int(mem * CUDA_VISIBLE_SHARE * GIB), int(mem * CUDA_VISIBLE_ERROR_SHARE * GIB),
            f"{mem} GiB datasheet x {CUDA_VISIBLE_SHARE} (CUDA keeps about 1%)")


def _forward_bytes(arch: ModelArch, tokens: int, tp: int, act_bytes: int) -> int:
    """Profiling forward pass at `tokens`: hidden states (a few copies) and the widest MLP's buffers
    (gate/up output + activation; fused MoE: per routed expert, + its output)."""
    d = arch.profile_dims
    if d is None:
        return 0
    dense = 3 * d.intermediate_size // tp
    moe = d.experts_per_token * (3 * d.moe_intermediate_size // tp + d.hidden_size) if d.moe_intermediate_size else 0
    return tokens * act_bytes * (4 * d.hidden_size + max(dense, moe))


def _sampler_bytes(arch: ModelArch, seqs: int, engine: EngineVersion) -> tuple[int, int]:
    """(peak bytes, bytes per logit) of the dummy sampler run (top-k and top-p on, as vLLM profiles it)."""
    d = arch.profile_dims
    per = SAMPLER_TRITON_BYTES if engine_feature("triton_topk_topp_sampler").holds_for(engine) \
        else SAMPLER_SORT_BYTES
    return (0 if d is None else seqs * d.vocab_size * per), per


def _platform(gpu: GpuFacts) -> str:
    """vLLM's platform for the GPU: cuda, rocm or another (the extensible KV cache is CUDA/ROCm only)."""
    vendor = gpu.profile.vendor if gpu.profile is not None else "nvidia"
    return {"nvidia": "cuda", "amd": "rocm"}.get(vendor, vendor)


def _gib(n: int) -> str:
    return f"{n / GIB:.2f} GiB"


def _requested(gpu: GpuFacts, flags: ServingFlags, engine: EngineVersion) -> BudgetTerm:
    share = resolved_gpu_memory_utilization(engine, _platform(gpu), flags.gpu_memory_utilization)
    said = "" if flags.gpu_memory_utilization is not None else f" (vLLM {engine.version_str}'s default)"
    total, err, basis = cuda_visible_bytes(gpu)
    return BudgetTerm(name="requested", bytes=int(total * share), error_bytes=int(err * share),
                      basis=f"{basis} x --gpu-memory-utilization {share}{said}")


def _activation(arch: ModelArch, flags: ServingFlags, gpu: GpuFacts, model_dtype: str,
                engine: EngineVersion) -> BudgetTerm:
    defaults = serving_defaults(gpu)
    tokens = flags.max_num_batched_tokens or defaults.max_num_batched_tokens
    seqs = min(flags.max_num_seqs or defaults.max_num_seqs, tokens)
    forward = _forward_bytes(arch, tokens, flags.tensor_parallel_size, 4 if model_dtype == "float32" else 2)
    sampler, per = _sampler_bytes(arch, seqs, engine)
    peak = max(forward, sampler)
    err = int(forward * FORWARD_ERROR_SHARE) if forward >= sampler else int(sampler * SAMPLER_ERROR_SHARE)
    vocab = arch.profile_dims.vocab_size if arch.profile_dims is not None else 0
    return BudgetTerm(
        name="activation peak", bytes=-peak, error_bytes=err,
        basis=f"the larger of the forward pass at --max-num-batched-tokens {tokens} ({_gib(forward)}) and the "
              f"sampler over {seqs} requests x {vocab} logits at {per} B each ({_gib(sampler)})")


def cuda_graph_count(flags: ServingFlags, gpu: GpuFacts) -> tuple[int, int]:
    """(piecewise, full) graphs vLLM captures by default (VllmConfig._set_cudagraph_sizes): sizes 1, 2, 4, then
    every 8 up to 256 and every 16 up to max-num-seqs x decode query length x 2, at most 512 (1024 on
    data-center Blackwell) and --max-num-batched-tokens; full graphs for the decode batches (up to max-num-seqs
    x query length; FULL_AND_PIECEWISE, the default mode)."""
    defaults = serving_defaults(gpu)
    seqs = flags.max_num_seqs or defaults.max_num_seqs
    query = 1 + flags.num_speculative_tokens
    cap = 1024 if gpu.compute_capability is not None and gpu.compute_capability[0] == 10 else 512
    largest = min(seqs * query * 2, cap, flags.max_num_batched_tokens or defaults.max_num_batched_tokens)
    sizes = [s for s in (1, 2, 4, *range(8, 256, 8), *range(256, cap + 1, 16)) if s <= largest]
    return len(sizes), sum(1 for s in sizes if s <= seqs * query)


def cuda_graph_bytes(graphs: int, tp: int) -> int:
    """The CUDA graph term for this many graphs on one of `tp` ranks."""
    return CUDA_GRAPH_BASE_BYTES + CUDA_GRAPH_PER_GRAPH_BYTES * graphs // tp


def _cuda_graphs(flags: ServingFlags, gpu: GpuFacts, engine: EngineVersion) -> BudgetTerm:
    if flags.enforce_eager:
        return BudgetTerm(name="CUDA graphs", bytes=0, basis="--enforce-eager: no graphs captured")
    piecewise, full = cuda_graph_count(flags, gpu)
    size = cuda_graph_bytes(piecewise + full, flags.tensor_parallel_size)
    graphs = f"{piecewise} piecewise + {full} full graphs" + (
        f" per rank of {flags.tensor_parallel_size}" if flags.tensor_parallel_size > 1 else "")
    if extensible_kv_cache(engine, _platform(gpu)):
        return BudgetTerm(name="CUDA graphs", bytes=-size, error_bytes=CUDA_GRAPH_ERROR_BYTES,
                          basis=f"the extensible KV cache is sized after capture: the pool of {graphs}")
    if not engine_feature("cudagraph_memory_estimate").holds_for(engine):
        return BudgetTerm(name="CUDA graphs", bytes=0,
                          basis=f"vLLM {engine.version_str} captures graphs after sizing the KV cache")
    return BudgetTerm(name="CUDA graphs", bytes=-size, error_bytes=CUDA_GRAPH_ERROR_BYTES,
                      basis=f"vLLM's estimate before capture for {graphs}")


def estimate_budget(arch: ModelArch, flags: ServingFlags, gpu: GpuFacts, weight_bytes: int,
                    model_dtype: str, engine: EngineVersion,
                    draft_weight_bytes: int | None = None) -> tuple[int, list[BudgetTerm]]:
    """KV memory per GPU and the terms it is made of (signed: requested memory +, the rest -).
    Can be negative: vLLM then logs a negative 'Available KV cache memory' and refuses to start.
    `draft_weight_bytes`: the checkpoint weights of the draft model --speculative-config names (an EAGLE head, a
    draft model), which the drafter loads before profiling (GPUModelRunner.load_model: drafter.load_model)."""
    ranks = flags.tensor_parallel_size * flags.pipeline_parallel_size
    terms = [
        _requested(gpu, flags, engine),
        BudgetTerm(name="weights", bytes=-(weight_bytes // ranks), basis=f"checkpoint weights / {ranks} GPU(s)"),
        *([BudgetTerm(name="draft weights", bytes=-(draft_weight_bytes // flags.tensor_parallel_size),
                      basis=f"{flags.speculative_model}'s checkpoint weights / {flags.tensor_parallel_size} "
                            "GPU(s): the drafter loads them before profiling")]
          if draft_weight_bytes else []),
        _activation(arch, flags, gpu, model_dtype, engine),
        _cuda_graphs(flags, gpu, engine),
        BudgetTerm(name="non-torch", bytes=-(NON_TORCH_BYTES + (NCCL_BYTES if ranks > 1 else 0)),
                   error_bytes=NON_TORCH_ERROR_BYTES,
                   basis="CUDA context, cuBLAS" + (" and NCCL buffers" if ranks > 1 else "") + " (typical)"),
    ]
    return sum(t.bytes for t in terms), terms


def fixed_budget(flags: ServingFlags) -> tuple[int, list[BudgetTerm]] | None:
    """--kv-cache-memory-bytes: vLLM skips profiling and sizes the KV cache with it (no GPU or weights needed)."""
    if flags.kv_cache_memory_bytes is None:
        return None
    return flags.kv_cache_memory_bytes, [BudgetTerm(
        name="--kv-cache-memory-bytes", bytes=flags.kv_cache_memory_bytes,
        basis="vLLM skips memory profiling and gives the KV cache this much per GPU "
              "(gpu_worker.determine_available_memory; it does not respect --gpu-memory-utilization)")]


def budget_error(terms: list[BudgetTerm]) -> int:
    """How far the sum of the terms can be off: the terms' error bands added up."""
    return sum(t.error_bytes for t in terms)
