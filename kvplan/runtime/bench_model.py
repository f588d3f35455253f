"""The bench result: what `kvplan bench --out` and `bench/bench_attention.py --out` write
(schema: schemas/bench-result.schema.json).

Pydantic only, for the published schema and its tests: `kvplan.runtime.bench` builds the same
document as plain dicts (it runs on GPU machines that have torch and triton but not pydantic),
so it keeps its own copy of the version and kind (tests hold the two equal and validate the
suite's output, stubbed on the CPU and recorded on a GPU, against this schema).
"""
from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from kvplan.model.base import Frozen

BENCH_SCHEMA_VERSION = "1.0"
BENCH_KIND = "kvplan.bench-result"


class Timing(Frozen):
    """How every timing of the run was taken."""

    l2_flush: str
    """What empties L2 before each repetition."""
    statistic: str
    """Statistic over repetitions."""
    decode: str
    """How decode calls are timed."""
    write: str
    """How cache writes are timed."""


class CopyBandwidth(Frozen):
    """A device-to-device copy, the bandwidth every `frac_copy` is relative to."""

    bytes: int
    """Bytes read plus bytes written by the copy."""
    ms: float
    """Its time in milliseconds."""
    bytes_per_s: float
    """bytes / time."""


class DecodeRow(Frozen):
    """One decode variant on one shape: SDPA bf16, a paged kernel, or the naive dequantize-then-SDPA path."""

    kind: Literal["decode"]
    """Row kind."""
    variant: str
    """sdpa_bf16, paged_<mode> or naive_dequant_sdpa_<mode>."""
    batch: int
    """Sequences (one query token each)."""
    context: int
    """Keys per sequence."""
    num_q_heads: int
    """Query heads."""
    num_kv_heads: int
    """KV heads."""
    head_size: int
    """Head dimension."""
    sliding_window: int | None
    """Sliding window in tokens, or null for full attention."""
    block_size: int
    """Cache page size in tokens."""
    ms: float
    """GPU milliseconds per call (CUDA-graph replay, L2 emptied before each; naive rows: eager)."""
    eager_ms: float
    """Milliseconds per eager call (no graph), same flush."""
    bytes: int
    """K+V bytes the call reads (data and inline scales)."""
    bytes_per_s: float
    """bytes / ms."""
    frac_copy: float
    """bytes_per_s as a fraction of the copy bandwidth."""
    ratio_to_sdpa: float
    """ms / the SDPA bf16 row's ms on the same shape."""
    rel_err: float | None
    """||out - ref|| / ||ref|| against fp32 attention on the unquantized K/V (null: not measured)."""
    host_us: float | None = None
    """Paged rows: host microseconds of one eager call issued to an idle GPU, median of 200."""
    host_us_queued: float | None = None
    """Paged rows: host microseconds per call of 100 calls back to back."""
    host_floor_us: float | None = None
    """Paged rows: host microseconds of torch's own `add_` on a tiny tensor, idle GPU, median of
    200, measured just before `host_us`: this host's pace at that moment."""
    eager_over_graph: float | None = None
    """Paged rows: eager_ms / ms."""
    nan_outputs: int | None = None
    """Paged rows: NaN elements in the output (0 expected)."""


class PrefillRow(Frozen):
    """One prefill variant on one shape: SDPA bf16 causal over the whole prompt, or a paged kernel."""

    kind: Literal["prefill"]
    """Row kind."""
    variant: str
    """sdpa_bf16_causal_whole_prompt or paged_<mode>."""
    batch: int
    """Sequences."""
    new_tokens: int
    """Query tokens per sequence."""
    cached_tokens: int
    """Earlier tokens per sequence already in the cache."""
    num_q_heads: int
    """Query heads."""
    num_kv_heads: int
    """KV heads."""
    head_size: int
    """Head dimension."""
    block_size: int
    """Cache page size in tokens."""
    ms: float
    """Milliseconds per eager call, L2 emptied before each."""
    flops: int
    """4 * D flops per visible (query head, key) pair of the call (SDPA: of the whole prompt)."""
    tflops: float
    """flops / time, in TFLOP/s."""
    ratio_to_sdpa: float
    """tflops / the SDPA row's tflops on the same shape."""
    rel_err: float | None
    """||out - ref|| / ||ref|| against fp32 attention on the unquantized K/V (null for SDPA)."""
    nan_outputs: int | None = None
    """Paged rows: NaN elements in the output (0 expected)."""
    kernel: str | None = None
    """Paged rows: the prefill kernel that ran (hopper, prefill or decode-form)."""


class WriteRow(Frozen):
    """Quantize-on-write of one batch of new tokens into a paged cache."""

    kind: Literal["write"]
    """Row kind."""
    variant: str
    """write_<mode>."""
    num_tokens: int
    """Tokens written per call."""
    num_kv_heads: int
    """KV heads."""
    head_size: int
    """Head dimension."""
    block_size: int
    """Cache page size in tokens."""
    ms: float
    """GPU milliseconds per call (CUDA-graph replay over inputs 4x the L2 size)."""
    launch_ms: float
    """Milliseconds per eager call."""
    bytes: int
    """New K/V read plus cache bytes written plus the slot indices."""
    bytes_per_s: float
    """bytes / ms."""
    frac_copy: float
    """bytes_per_s as a fraction of the copy bandwidth."""


Row = Annotated[DecodeRow | PrefillRow | WriteRow, Field(discriminator="kind")]


class BenchResult(Frozen):
    """One run of the runtime benchmark suite on one GPU."""

    schema_version: str = BENCH_SCHEMA_VERSION
    """Version of this JSON contract."""
    kind: Literal["kvplan.bench-result"] = "kvplan.bench-result"
    """Document kind."""
    kvplan_version: str | None = None
    """kvplan version that ran the suite (absent from the first results of this contract,
    round 23c)."""
    device: str
    """GPU name as torch reports it."""
    num_sms: int
    """Streaming multiprocessors of the GPU."""
    torch: str
    """torch version."""
    triton: str
    """triton version."""
    cuda: str | None
    """CUDA version torch was built with."""
    python: str
    """Python version."""
    date: str
    """Date of the run (ISO 8601)."""
    quick: bool
    """The short suite (--quick)."""
    timing: Timing
    """How the timings were taken."""
    copy_bandwidth: CopyBandwidth
    """The copy every bandwidth fraction is relative to."""
    rows: list[Row]
    """Decode rows by shape, then prefill rows by shape, then write rows by size, each shape's
    variants in the suite's order."""


def bench_result_schema() -> dict:
    """The published JSON Schema (schemas/bench-result.schema.json, drift-tested)."""
    s = BenchResult.model_json_schema(mode="serialization")
    s["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    s["$id"] = f"https://kvplan.dev/schemas/bench-result-{BENCH_SCHEMA_VERSION}.json"
    return s
