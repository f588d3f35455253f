"""Engine flags are accepted verbatim from pasted launch lines."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvplan.errors import KvplanInputError
from kvplan.ingest.flags import parse_flags, split_launch_line
from kvplan.model.vocab import VLLM_033_KV_CACHE_DTYPES


def test_parse_flags_pasted_launch_line() -> None:
    line = """vllm serve openai/gpt-oss-20b \\
      --kv-cache-dtype fp8 --kv-cache-dtype-skip-layers sliding_window 0 2 \\
      --tensor-parallel-size=2 --max-model-len 32k --attention-config '{"use_prefill_query_quantization": true}' \\
      --enable-prefix-caching --port 8000"""
    f = parse_flags(split_launch_line(line))
    assert f.model == "openai/gpt-oss-20b"
    assert f.kv_cache_dtype == "fp8" and f.kv_cache_dtype_explicit
    assert f.kv_cache_dtype_skip_layers == ("sliding_window", "0", "2")
    assert f.tensor_parallel_size == 2 and f.max_model_len == 32000
    assert f.attention_config == {"use_prefill_query_quantization": True}
    assert f.unknown_flags == ()


def test_parse_flags_commas_and_python_module_launcher() -> None:
    f = parse_flags(["python", "-m", "vllm.entrypoints.openai.api_server", "--model", "m",
                     "--kv-cache-dtype-skip-layers", "0,2,sliding_window", "--kv_cache_dtype", "int8_per_token_head"])
    assert f.kv_cache_dtype_skip_layers == ("0", "2", "sliding_window")
    assert f.kv_cache_dtype == "int8_per_token_head"


def test_parse_flags_unknown_and_removed_are_recorded() -> None:
    f = parse_flags(["--kv-cache-type", "fp8", "--calculate-kv-scales"])
    assert f.unknown_flags == ("--kv-cache-type",) and f.calculate_kv_scales


def test_all_22_vllm_dtypes_accepted() -> None:
    assert len(VLLM_033_KV_CACHE_DTYPES) == 22
    for d in VLLM_033_KV_CACHE_DTYPES:
        assert parse_flags(["--kv-cache-dtype", d]).kv_cache_dtype == d


@pytest.mark.parametrize("bad", ["bf16", "fp8_e4m3fn", "int8", "half", "FP8", ""])
def test_invalid_dtype_is_input_error(bad: str) -> None:
    with pytest.raises(KvplanInputError, match="Valid values"):
        parse_flags(["--kv-cache-dtype", bad])


@given(st.lists(st.text(alphabet="-_=abcdefgkvpt0123456789 ,", max_size=12), max_size=8))
def test_parse_flags_never_crashes(argv: list[str]) -> None:
    try:
        parse_flags(argv)
    except KvplanInputError:
        pass
