"""Engine flags are accepted verbatim from pasted launch lines."""
from __future__ import annotations

import contextlib

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


def test_parse_flags_comma_is_one_token_as_in_vllm_and_python_module_launcher() -> None:
    # vLLM 0.33: nargs='+' without comma splitting, so '0,2,sliding_window' is one token (KV301 says so).
    f = parse_flags(["python", "-m", "vllm.entrypoints.openai.api_server", "--model", "m",
                     "--kv-cache-dtype-skip-layers", "0,2,sliding_window", "--kv_cache_dtype", "int8_per_token_head"])
    assert f.kv_cache_dtype_skip_layers == ("0,2,sliding_window",)
    assert f.kv_cache_dtype == "int8_per_token_head" and f.model == "m"


def test_parse_flags_unknown_and_removed_are_recorded() -> None:
    f = parse_flags(["--kv-cache-type", "fp8", "--calculate-kv-scales"])
    assert f.unknown_flags == ("--kv-cache-type",) and f.calculate_kv_scales
    assert [(e.kind, e.message, e.suggestion) for e in f.flag_errors] == [
        ("unknown", "unrecognized arguments: --kv-cache-type fp8", "--kv-cache-dtype")]


def test_parse_flags_last_occurrence_wins_and_json_replaces() -> None:
    f = parse_flags(["-ac", '{"backend": "FLASHINFER"}', "--attention-config",
                     '{"use_prefill_query_quantization": true}',
                     "-tp", "2", "--tensor-parallel-size=4"])
    assert f.attention_config == {"use_prefill_query_quantization": True} and f.tensor_parallel_size == 4


def test_parse_flags_dotted_json_keys_and_optimization_level() -> None:
    f = parse_flags(["--attention-config.use_prefill_query_quantization", "true", "-O3"])
    assert f.attention_config == {"use_prefill_query_quantization": True} and f.flag_errors == ()


@pytest.mark.parametrize("argv, message", [
    (["--dtype", "bf16"], "argument --dtype: invalid choice: 'bf16' (choose from 'auto', 'bfloat16', 'float', "
                          "'float16', 'float32', 'half')"),
    (["--max-model-len", "1.5K"], "argument --max-model-len: Decimals are not allowed with binary suffixes like K. "
                                  "Did you mean to use 1.5k instead?"),
    (["-tp", "two"], "argument --tensor-parallel-size/-tp: invalid int value: 'two'"),
    (["--kv-cache-dtype"], "argument --kv-cache-dtype: expected one argument"),
])
def test_parse_flags_rejected_values_of_planned_options_exit_2_with_vllm_wording(argv: list[str], message: str) -> None:
    with pytest.raises(KvplanInputError) as e:
        parse_flags(argv)
    assert e.value.problem.rstrip(".") == message.rstrip(".")


@pytest.mark.parametrize("argv, message", [
    (["--tokenizer-mode", "auto", "--enforce-eager=true"],
     "argument --enforce-eager/--no-enforce-eager: ignored explicit argument 'true'"),
    (["--port", "http"], "argument --port: invalid int value: 'http'"),
    (["--uvicorn-log-level", "loud"], "argument --uvicorn-log-level: invalid choice: 'loud' (choose from 'critical', "
                                      "'debug', 'error', 'info', 'trace', 'warning')"),
])
def test_parse_flags_rejected_values_of_other_options_are_recorded(argv: list[str], message: str) -> None:
    f = parse_flags(argv)
    assert [(e.kind, e.message) for e in f.flag_errors] == [("invalid_value", message)]


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
    with contextlib.suppress(KvplanInputError):
        parse_flags(argv)


def test_config_yaml_expands_like_vllm_and_command_line_wins(tmp_path) -> None:
    from kvplan.ingest.flags import expand_config_file
    (tmp_path / "serve.yaml").write_text("kv_cache_dtype: fp8\ntensor-parallel-size: 4\nkv-cache-dtype-skip-layers: "
                                         "[0, 1]\n"
                                         "enable-prefix-caching: false\nattention-config: "
                                         "{use_prefill_query_quantization: true}\n")
    argv = expand_config_file(["vllm", "serve", "m", "--config", "serve.yaml", "-tp", "2"], base=tmp_path)
    assert argv[:3] == ["vllm", "serve", "m"] and "--config" not in argv
    f = parse_flags(argv)
    assert f.kv_cache_dtype == "fp8" and f.tensor_parallel_size == 2 and f.kv_cache_dtype_skip_layers == ("0", "1")
    assert f.attention_config == {"use_prefill_query_quantization": True} and f.flag_errors == () and f.model == "m"
    with pytest.raises(KvplanInputError, match="not found"):
        expand_config_file(["--config", "missing.yaml"], base=tmp_path)
    with pytest.raises(KvplanInputError, match="only YAML"):
        expand_config_file(["--config", "serve.json"], base=tmp_path)


def test_library_dict_flags_turn_booleans_off_with_no_form() -> None:
    from kvplan.ingest.flags import flags_from
    f = flags_from({"kv_cache_dtype": "fp8", "enable_prefix_caching": False, "kv_cache_dtype_skip_layers": [0, 1],
                    "max_model_len": None})
    assert f.flag_errors == () and f.kv_cache_dtype_skip_layers == ("0", "1") and f.max_model_len is None


@given(st.lists(st.sampled_from(["--kv-cache", "--kv-cache-dtype", "fp8", "-tp", "2", "--x.y", "-O3", "--", "0,1",
                                 "--max-model", "32k", "=", "--enforce-eager=1", "-ac", "{}", "--model", "m",
                                 "--attention-config.backend", "--kv-cache-dtype-skip-layers"]), max_size=10))
def test_parse_flags_never_crashes_on_flag_soup(argv: list[str]) -> None:
    with contextlib.suppress(KvplanInputError):
        parse_flags(argv)


@pytest.mark.parametrize("launcher", [["vllm", "serve"], ["/opt/venv/bin/vllm", "serve"],
                                      ["python3", "-m", "vllm.entrypoints.cli.main", "serve"]])
def test_launchers_are_skipped_and_model_is_the_positional(launcher: list[str]) -> None:
    f = parse_flags([*launcher, "org/model", "--kv-cache-dtype", "fp8"])
    assert f.model == "org/model" and f.kv_cache_dtype == "fp8" and f.flag_errors == ()


def test_deeply_nested_json_value_is_an_input_error_not_a_crash() -> None:
    from kvplan.ingest.flags import scan_argv
    deep = "[" * 5000 + "]" * 5000
    assert "nests too deeply" in scan_argv(["--media-io-kwargs", deep]).errors[0].message
    with pytest.raises(KvplanInputError, match="nests too deeply"):
        parse_flags(["--attention-config", deep])
