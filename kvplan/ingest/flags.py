"""Engine flags, verbatim from a launch line -> ServingFlags.

Accepts what users paste: `vllm serve MODEL --kv-cache-dtype fp8 --kv-cache-dtype-skip-layers 0 2`,
`--flag=value`, `python -m vllm.entrypoints.openai.api_server --model M ...`. Flags kvplan does not
model are kept as `unknown_flags` (a finding, never a crash); invalid values of modelled flags are
input errors with the valid values listed.
"""
from __future__ import annotations

import difflib
import json
import shlex
from typing import Any, Iterable

from kvplan.errors import KvplanInputError
from kvplan.ingest.families import DTYPE_ALIASES
from kvplan.ingest.limits import check_argv, check_launch_line, input_boundary
from kvplan.model.flags import ServingFlags
from kvplan.model.vocab import VLLM_033_KV_CACHE_DTYPES

# Flags kvplan models: flag -> (ServingFlags field, kind).
MODELLED: dict[str, tuple[str, str]] = {
    "--kv-cache-dtype": ("kv_cache_dtype", "str"),
    "--kv-cache-dtype-skip-layers": ("kv_cache_dtype_skip_layers", "list"),
    "--dtype": ("dtype", "str"),
    "--tensor-parallel-size": ("tensor_parallel_size", "int"),
    "-tp": ("tensor_parallel_size", "int"),
    "--pipeline-parallel-size": ("pipeline_parallel_size", "int"),
    "-pp": ("pipeline_parallel_size", "int"),
    "--max-model-len": ("max_model_len", "len"),
    "--block-size": ("block_size", "int"),
    "--gpu-memory-utilization": ("gpu_memory_utilization", "float"),
    "--max-num-batched-tokens": ("max_num_batched_tokens", "int"),
    "--max-num-seqs": ("max_num_seqs", "int"),
    "--attention-backend": ("attention_backend", "str"),
    "--attention-config": ("attention_config", "json"),
    "-ac": ("attention_config", "json"),
    "--quantization": ("quantization", "str"),
    "-q": ("quantization", "str"),
    "--model": ("model", "str"),
}

# vLLM 0.33 flags that exist but do not change the KV plan (accepted silently).
# Boolean flags take no value; the others consume the next token.
_OTHER_BOOL = frozenset({
    "--trust-remote-code", "--enforce-eager", "--enable-prefix-caching", "--no-enable-prefix-caching",
    "--enable-chunked-prefill", "--no-enable-chunked-prefill", "--disable-log-requests",
    "--disable-log-stats", "--enable-log-requests", "--enable-auto-tool-choice",
    "--disable-hybrid-kv-cache-manager", "--enable-expert-parallel", "--enable-lora",
    "--disable-custom-all-reduce", "--skip-tokenizer-init", "--enable-sleep-mode",
    "--disable-frontend-multiprocessing", "--enable-prompt-tokens-details", "--headless",
    "--async-scheduling", "--no-async-scheduling", "--enable-eplb", "--enable-dbo",
})
_OTHER_VALUED = frozenset({
    "--host", "--port", "--served-model-name", "--tokenizer", "--revision", "--tokenizer-mode",
    "--download-dir", "--load-format", "--seed", "--swap-space", "--cpu-offload-gb",
    "--max-logprobs", "--chat-template", "--tool-call-parser", "--reasoning-parser",
    "--api-key", "--uvicorn-log-level", "--data-parallel-size", "-dp", "--distributed-executor-backend",
    "--speculative-config", "--compilation-config", "-O", "--kv-transfer-config", "--max-loras",
    "--max-lora-rank", "--lora-modules", "--limit-mm-per-prompt", "--mm-processor-kwargs",
    "--hf-overrides", "--override-generation-config", "--generation-config", "--mamba-ssm-cache-dtype",
    "--mamba-cache-dtype", "--num-gpu-blocks-override", "--kv-cache-memory-bytes", "--config",
    "--rope-scaling", "--rope-theta", "--max-seq-len-to-capture", "--scheduling-policy",
    "--long-prefill-token-threshold", "--max-num-partial-prefills", "--prefix-caching-hash-algo",
    "--kv-offloading-size", "--kv-offloading-backend", "--model-impl", "--task", "--runner",
    "--convert", "--response-role", "--ssl-keyfile", "--ssl-certfile", "--root-path",
    "--middleware", "--gpu-memory-utilization-bytes", "--kv-sharing-fast-prefill",
    "--data-parallel-address", "--data-parallel-rpc-port", "--data-parallel-size-local",
    "--data-parallel-start-rank", "--api-server-count", "--quantization-param-path",
    "--prefill-context-parallel-size", "--decode-context-parallel-size", "-dcp",
})
# Flags removed before 0.33: name -> (release note, takes a value).
REMOVED_FLAGS = {
    "--calculate-kv-scales": ("removed in vLLM 0.33 (PR #49389); scales now come from the checkpoint, else 1.0", False),
}
KNOWN_FLAGS = frozenset(MODELLED) | _OTHER_BOOL | _OTHER_VALUED


def suggest_flag(flag: str) -> str | None:
    """Closest known vLLM flag, for typo findings."""
    m = difflib.get_close_matches(flag, sorted(KNOWN_FLAGS | frozenset(REMOVED_FLAGS)), n=1, cutoff=0.75)
    return m[0] if m else None


def validate_kv_cache_dtype(value: str) -> str:
    if value not in VLLM_033_KV_CACHE_DTYPES:
        close = difflib.get_close_matches(value, VLLM_033_KV_CACHE_DTYPES, n=1, cutoff=0.6)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise KvplanInputError(
            f"invalid --kv-cache-dtype {value!r}.{hint}",
            "Valid values (vLLM 0.33): " + ", ".join(VLLM_033_KV_CACHE_DTYPES) + ".")
    return value


def _skip_tokens(values: Iterable[str]) -> tuple[str, ...]:
    out: list[str] = []
    for v in values:
        out.extend(t.strip() for t in v.split(",") if t.strip())
    return tuple(out)


def _to_int(flag: str, v: str, minimum: int = 1) -> int:
    try:
        n = int(v)
    except ValueError:
        raise KvplanInputError(f"{flag} expects an integer, got {v!r}.", f"Pass e.g. {flag} 2.") from None
    if n < minimum:
        raise KvplanInputError(f"{flag} must be at least {minimum}, got {n}.", f"Pass a positive {flag}.")
    return n


def _to_len(flag: str, v: str) -> int:
    """vLLM accepts human-readable lengths: 32k, 1M (binary k = 1024 for 'K', 1000 for 'k')."""
    s = v.strip()
    mult = {"k": 1000, "K": 1024, "m": 1000**2, "M": 1024**2}.get(s[-1:], 1)
    if mult != 1:
        s = s[:-1]
    try:
        n = int(float(s) * mult)
    except (ValueError, OverflowError):  # OverflowError: inf
        raise KvplanInputError(f"{flag} expects a length like 8192 or 32k, got {v!r}.",
                               f"Pass e.g. {flag} 32768.") from None
    if n < 1:
        raise KvplanInputError(f"{flag} must be positive, got {v!r}.", f"Pass e.g. {flag} 32768.")
    return n


def split_launch_line(line: str) -> list[str]:
    """Shell-split a pasted launch line (backslash-newline continuations allowed)."""
    check_launch_line(line)
    try:
        return shlex.split(line.replace("\\\n", " "), comments=True)
    except ValueError as e:
        raise KvplanInputError(f"cannot parse the launch line: {e}.", "Check the quotes.") from None


@input_boundary(fix="Pass a plausible value (limits: docs/limits.md).")
def parse_flags(argv: list[str]) -> ServingFlags:
    """Parse engine flags; the leading `vllm serve MODEL` / python -m ... part is skipped."""
    check_argv(argv)  # argument count and size, before anything is parsed
    args = list(argv)
    # Drop a launcher prefix: vllm serve [MODEL] | python -m vllm.entrypoints.openai.api_server
    if args[:2] == ["vllm", "serve"]:
        args = args[2:]
        if args and not args[0].startswith("-"):
            args = ["--model", *args]
    elif len(args) >= 3 and args[1] == "-m" and args[2].startswith("vllm."):
        args = args[3:]
    fields: dict[str, Any] = {}
    unknown: list[str] = []
    i = 0
    while i < len(args):
        tok = args[i]
        if not tok.startswith("-"):
            if "model" not in fields:
                fields["model"] = tok
            i += 1
            continue
        flag, eq, inline = tok.partition("=")
        if flag.startswith("--") and "_" in flag:
            flag = flag.replace("_", "-")  # vLLM accepts underscores too
        values: list[str] = []
        if eq:
            values = [inline]
            i += 1
        elif flag in MODELLED and MODELLED[flag][1] == "list":
            i += 1
            while i < len(args) and not args[i].startswith("--"):
                values.append(args[i])
                i += 1
        elif flag in _OTHER_BOOL or (flag in REMOVED_FLAGS and not REMOVED_FLAGS[flag][1]):
            i += 1
        else:
            i += 1
            if i < len(args) and (not args[i].startswith("-") or _looks_negative_number(args[i])):
                values = [args[i]]
                i += 1
        if flag in REMOVED_FLAGS:
            if flag == "--calculate-kv-scales":
                fields["calculate_kv_scales"] = True
            continue
        if flag not in MODELLED:
            if flag not in KNOWN_FLAGS:
                unknown.append(flag)
            continue
        field, kind = MODELLED[flag]
        if kind != "list" and not values:
            raise KvplanInputError(f"{flag} needs a value.", f"Pass e.g. {flag} <value>.")
        v = values[0] if values else ""
        if kind == "str":
            fields[field] = v
        elif kind == "int":
            fields[field] = _to_int(flag, v)
        elif kind == "len":
            fields[field] = _to_len(flag, v)
        elif kind == "float":
            try:
                fields[field] = float(v)
            except ValueError:
                raise KvplanInputError(f"{flag} expects a number, got {v!r}.", f"Pass e.g. {flag} 0.9.") from None
            if not 0 < fields[field] <= 1:
                raise KvplanInputError(f"{flag} must be in (0, 1], got {v}.", f"Pass e.g. {flag} 0.9.")
        elif kind == "json":
            try:
                obj = json.loads(v)
            except json.JSONDecodeError as e:
                raise KvplanInputError(f"{flag} is not valid JSON ({e.msg}): {v!r}.",
                                       f"""Quote it for the shell, e.g. {flag} '{{"use_prefill_query_quantization": true}}'.""") from None
            if not isinstance(obj, dict):
                raise KvplanInputError(f"{flag} must be a JSON object, got {v!r}.",
                                       f"""Pass e.g. {flag} '{{"backend": "FLASHINFER"}}'.""")
            fields[field] = {**fields.get(field, {}), **obj}
        elif kind == "list":
            fields[field] = tuple(fields.get(field, ())) + _skip_tokens(values)
    if "kv_cache_dtype" in fields:
        validate_kv_cache_dtype(fields["kv_cache_dtype"])
        fields["kv_cache_dtype_explicit"] = True
    if "dtype" in fields and fields["dtype"] != "auto" and fields["dtype"] not in DTYPE_ALIASES:
        raise KvplanInputError(f"invalid --dtype {fields['dtype']!r}.",
                               "Valid values: auto, bfloat16, float16, half, float32, float.")
    fields["unknown_flags"] = tuple(unknown)
    return ServingFlags(**fields)


def _looks_negative_number(tok: str) -> bool:
    try:
        float(tok)
        return True
    except ValueError:
        return False
