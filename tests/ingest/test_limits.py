"""Hostile and absurd input (issue 23): bounded time and memory, one line, exit 2, nothing wrong printed.

One test per row of the issue's table, then the limits behind them: size before reading, JSON
depth, config value types/signs/ranges, flags and argv, safetensors headers, YAML alias budget,
the time budget in any thread.
"""
from __future__ import annotations

import json
import re
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from kvplan.errors import KvplanInputError
from kvplan.ingest.checkpoint import load_model_inputs
from kvplan.ingest.flags import parse_flags, split_launch_line
from kvplan.ingest.hf_config import load_json, parse_hf_config
from kvplan.ingest.limits import (
    InputLimitError,
    TimeBudgetExceeded,
    active_limits,
    check_yaml,
    loads_json,
    time_budget,
)
from kvplan.ingest.safetensors import read_header
from kvplan.model.limits import MAX_LAYERS
from tests.conftest import EXAMPLES, ROOT

LLAMA = json.loads((EXAMPLES / "Meta-Llama-3.1-8B" / "config.json").read_text())


def kvplan(*args: str) -> subprocess.CompletedProcess:
    """The real console entry point (exit code and stderr exactly as a user gets them)."""
    return subprocess.run([sys.executable, "-c", "from kvplan.cli.main import main; main()", *args],
                          capture_output=True, text=True, cwd=ROOT, timeout=120,
                          env={"NO_COLOR": "1", "COLUMNS": "10000", "PATH": "/usr/bin:/bin"})


def one_line_exit_2(r: subprocess.CompletedProcess) -> str:
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stdout == "" and "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kvplan: error: "), r.stderr
    return lines[0]


def _config(tmp_path: Path, **changes: object) -> Path:
    p = tmp_path / "config.json"
    p.write_text(json.dumps({**LLAMA, **changes}))
    return p


# ----------------------------------------------------------------------------- the table
def test_row_config_nesting_100000_arrays_is_one_line_exit_2(tmp_path: Path) -> None:
    p = tmp_path / "config.json"
    p.write_text("[" * 100_000 + "]" * 100_000)
    line = one_line_exit_2(kvplan("plan", str(p)))
    assert "nests deeper than kvplan's limit of 64 levels" in line and "RecursionError" not in line


def test_row_billion_layers_is_refused_naming_the_limit(tmp_path: Path) -> None:
    p = _config(tmp_path, num_hidden_layers=1_000_000_000)
    line = one_line_exit_2(kvplan("plan", str(p)))
    assert "num_hidden_layers is 1,000,000,000" in line and f"at most {MAX_LAYERS} layers" in line
    # Refused before any layer is built: the library raises at the boundary.
    with pytest.raises(InputLimitError):
        parse_hf_config({**LLAMA, "num_hidden_layers": 10**9}, p)


def test_row_zero_kv_heads_is_exit_2(tmp_path: Path) -> None:
    out = tmp_path / "plan.json"
    line = one_line_exit_2(kvplan("plan", str(_config(tmp_path, num_key_value_heads=0)), "--out", str(out)))
    assert "num_key_value_heads is 0; it must be at least 1" in line
    assert not out.exists()  # nothing written half-way


def test_row_negative_head_dim_is_exit_2(tmp_path: Path) -> None:
    line = one_line_exit_2(kvplan("plan", str(_config(tmp_path, head_dim=-64))))
    assert "head_dim is -64; it must be at least 1" in line


def test_row_yaml_alias_bomb_is_a_finding_and_the_run_goes_on(tmp_path: Path) -> None:
    (tmp_path / "bomb.yaml").write_text(alias_bomb())
    (tmp_path / "ok.sh").write_text("vllm serve meta-llama/Llama-3.1-8B --kv-cache-dtype fp9\n")
    r = kvplan("lint", str(tmp_path), "--isolated", "--format", "json")
    assert r.returncode == 1, r.stderr
    doc = json.loads(r.stdout)
    got = {(Path(f["location"]["path"]).name, f["code"]) for f in doc["findings"]}
    assert ("bomb.yaml", "KV821") in got and ("ok.sh", "KV803") in got
    bomb = next(f for f in doc["findings"] if f["code"] == "KV821")
    assert "alias" in bomb["message"] and "100,000 nodes" in bomb["message"]
    status = {Path(f["path"]).name: f["status"] for f in doc["files"]}
    assert status == {"bomb.yaml": "error", "ok.sh": "linted"}


def alias_bomb(levels: int = 9, width: int = 9) -> str:
    """A Kubernetes Pod whose args are nine nested levels of nine aliases (9**9 strings)."""
    lines = ["apiVersion: v1", "kind: Pod", "metadata: {name: bomb}",
             "x0: &a0 [" + ", ".join(['"--kv-cache-dtype"'] * width) + "]"]
    for i in range(1, levels + 1):
        lines.append(f"x{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]")
    lines += ["spec:", "  containers:", "  - name: vllm", "    image: vllm/vllm-openai", f"    args: *a{levels}"]
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------- files and JSON
def test_oversized_config_is_refused_by_size_without_reading(tmp_path: Path) -> None:
    p = tmp_path / "config.json"
    with p.open("wb") as f:
        f.truncate(200 * 1024 * 1024)  # sparse: 200 MB by size, nothing on disk
    with pytest.raises(InputLimitError, match=r"is 209,715,200 bytes, over kvplan's limit of 16 MiB"):
        load_json(p)


def test_json_depth_limit_names_the_input() -> None:
    assert loads_json("[" * 64 + "]" * 64, "x") == loads_json("[" * 64 + "]" * 64, "x")
    with pytest.raises(InputLimitError, match="x nests deeper than kvplan's limit of 64 levels"):
        loads_json("[" * 65 + "]" * 65, "x")
    with pytest.raises(KvplanInputError, match="malformed JSON in x at line 1 column 2"):
        loads_json("{", "x")


# ----------------------------------------------------------------------------- config values
@pytest.mark.parametrize(("key", "value", "words"), [
    ("num_attention_heads", 0, "num_attention_heads is 0; it must be at least 1"),
    ("num_key_value_heads", -8, "num_key_value_heads is -8; it must be at least 1"),
    ("num_key_value_heads", 10**6, "num_key_value_heads is 1,000,000, over kvplan's plausibility limit of 4,096"),
    ("head_dim", "128", "head_dim must be an integer, got '128'"),
    ("head_dim", True, "head_dim must be an integer, got True"),
    ("hidden_size", 4096.5, "hidden_size must be an integer, got 4096.5"),
    ("max_position_embeddings", 0, "max_position_embeddings is 0; it must be at least 1"),
    ("sliding_window", 2**40, "sliding_window is 1,099,511,627,776, over kvplan's plausibility limit"),
    ("num_hidden_layers", -1, "num_hidden_layers is -1; it must be at least 0"),
])
def test_config_values_name_key_value_and_limit(key: str, value: object, words: str) -> None:
    with pytest.raises(KvplanInputError) as e:
        parse_hf_config({**LLAMA, key: value}, Path("m/config.json"))
    assert str(e.value).startswith("m/config.json: ") and words in str(e.value)


def test_nested_text_config_values_are_checked_too() -> None:
    cfg = {"model_type": "gemma3", "text_config": {"model_type": "gemma3_text", "num_hidden_layers": 4,
                                                   "num_attention_heads": 8, "num_key_value_heads": 0,
                                                   "head_dim": 64}}
    problem = "text_config.num_key_value_heads is 0; it must be at least 1"
    with pytest.raises(KvplanInputError, match=re.escape(problem)):
        parse_hf_config(cfg, Path("g/config.json"))


def test_derived_geometry_is_checked_by_the_model_types() -> None:
    # No head_dim: hidden_size // heads = 0, refused by LayerArch's constraint, with the user's key name.
    cfg = {k: v for k, v in LLAMA.items() if k != "head_dim"} | {"hidden_size": 16, "num_attention_heads": 32}
    with pytest.raises(KvplanInputError, match=r"m/config.json: head_dim is 0; it must be at least 1"):
        parse_hf_config(cfg, Path("m/config.json"))


def test_real_configs_are_unchanged_by_the_limits() -> None:
    for name in ("Meta-Llama-3.1-8B", "DeepSeek-V3", "gpt-oss-20b", "gemma-3-4b-it"):
        arch = load_model_inputs(EXAMPLES / name, read_safetensors=False).arch
        assert arch.num_layers == len(arch.layers) > 0


# EXAONE 4.0 32B's config.json keys as published: a string sliding_window_pattern beside layer_types.
_EXAONE4 = {"architectures": ["Exaone4ForCausalLM"], "model_type": "exaone4", "hidden_size": 5120,
            "num_hidden_layers": 8, "num_attention_heads": 40, "num_key_value_heads": 8, "head_dim": 128,
            "max_position_embeddings": 131072, "sliding_window": 4096, "sliding_window_pattern": "LLLG",
            "layer_types": (["sliding_attention"] * 3 + ["full_attention"]) * 2,
            "torch_dtype": "bfloat16"}


def test_keys_nobody_reads_are_never_an_input_error() -> None:
    # Llama's readers look at none of these keys: whatever they hold, the plan is Llama's.
    junk = {"sliding_window_pattern": "LLLG", "attention_chunk_size": [8192], "no_rope_layer_interval": -3,
            "max_window_layers": "28", "index_topk": "all"}
    plain = parse_hf_config(LLAMA, Path("m/config.json"))
    assert parse_hf_config({**LLAMA, **junk}, Path("m/config.json")).layers == plain.layers
    assert parse_hf_config({**LLAMA, "_sliding_window_pattern": 0}, Path("m/config.json")).layers == plain.layers


def test_string_sliding_window_pattern_beside_layer_types_plans_as_layer_types_say(tmp_path: Path) -> None:
    arch = parse_hf_config(_EXAONE4, Path("e/config.json"))
    assert [la.kind for la in arch.layers] == [
        "sliding_attention", "sliding_attention", "sliding_attention", "full_attention"] * 2
    assert "sliding_window_pattern" not in arch.keys_read
    p = tmp_path / "config.json"
    p.write_text(json.dumps(_EXAONE4))
    r = kvplan("plan", str(p), "--format", "json")
    assert r.returncode == 0, r.stderr
    assert [lp["sliding_window"] for lp in json.loads(r.stdout)["layers"][:4]] == [4096, 4096, 4096, None]


def test_a_key_read_is_checked_with_the_types_its_reader_accepts() -> None:
    # Without layer_types the config class derives the layer kinds as (i + 1) % sliding_window_pattern.
    no_types = {k: v for k, v in _EXAONE4.items() if k != "layer_types"}
    with pytest.raises(KvplanInputError, match=r"sliding_window_pattern is 'LLLG' and layer_types is absent"):
        parse_hf_config(no_types, Path("e/config.json"))
    arch = parse_hf_config({**no_types, "sliding_window_pattern": 4}, Path("e/config.json"))
    assert [la.kind for la in arch.layers] == [la.kind for la in parse_hf_config(_EXAONE4, Path("e")).layers]
    # Exaone4Config's own default pattern (4) when the key is absent too.
    del no_types["sliding_window_pattern"]
    assert [la.kind for la in parse_hf_config(no_types, Path("e")).layers][:4] == [
        "sliding_attention", "sliding_attention", "sliding_attention", "full_attention"]
    # A value the planner reads keeps its type and range check.
    with pytest.raises(KvplanInputError, match="sliding_window_pattern is 5,000, over kvplan's plausibility limit"):
        parse_hf_config({**LLAMA, "model_type": "gemma3_text", "sliding_window": 512,
                         "sliding_window_pattern": 5000}, Path("g/config.json"))


def test_layer_count_limit_stays_at_the_boundary_for_every_spelling() -> None:
    # Protective: refused before anything is read, whichever spelling the layer count uses.
    with pytest.raises(InputLimitError, match="n_layer is 100,000"):
        parse_hf_config({**LLAMA, "n_layer": 100_000}, Path("m/config.json"))


def test_service_layer_limit_narrows_the_same_check() -> None:
    cfg = {**LLAMA, "num_hidden_layers": 2000}
    assert parse_hf_config(cfg, Path("c")).num_layers == 2000
    with active_limits(max_layers=1024), pytest.raises(InputLimitError, match="at most 1024 layers"):
        parse_hf_config(cfg, Path("c"))


# ----------------------------------------------------------------------------- flags and argv
@pytest.mark.parametrize(("argv", "words"), [
    (["--max-model-len", "inf"], "argument --max-model-len: invalid human_readable_int_or_auto value: 'inf'"),
    (["--max-model-len", "1e300"], "argument --max-model-len: invalid human_readable_int_or_auto value: '1e300'"),
    (["--max-model-len", "1" + "0" * 300], "--max-model-len is 1000000000000000000000000000000000000000000000000000"),
    (["--tensor-parallel-size", "100000"], "--tensor-parallel-size is 100000; it must be at most 4,096"),
    (["--block-size", str(2**20)], "--block-size is 1048576; it must be at most 65,536"),
    (["--attention-config", "[" * 5000 + "]" * 5000], "the input nests too deeply to read"),
    (["--attention-config", '{"a":' * 100 + "1" + "}" * 100], "--attention-config is"),
    (["--kv-cache-dtype", "fp8"] * 6000, "12,000 arguments, over kvplan's limit of 10,000"),
    (["--served-model-name", "x" * 70_000], "70,000 characters, over kvplan's limit of 65,536"),
])
def test_flags_over_the_limits_are_input_errors(argv: list[str], words: str) -> None:
    with pytest.raises(KvplanInputError) as e:
        parse_flags(argv)
    assert words in str(e.value)


def test_launch_line_size_limit() -> None:
    with pytest.raises(InputLimitError, match="launch line is 2,000,001 characters"):
        split_launch_line("vllm serve m " + "x" * 1_999_988)


# ----------------------------------------------------------------------------- safetensors headers
def test_deeply_nested_safetensors_header_is_one_line(tmp_path: Path) -> None:
    raw = ("{" + '"a":' + "[" * 50_000 + "]" * 50_000 + "}").encode()
    p = tmp_path / "model.safetensors"
    p.write_bytes(struct.pack("<Q", len(raw)) + raw)
    with pytest.raises(InputLimitError, match="nests deeper than kvplan's limit of 64 levels"):
        read_header(p)


def test_safetensors_scale_with_absurd_layer_index_is_an_input_error(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(LLAMA))
    header = {"model.layers.99999999.self_attn.k_proj.k_scale": {"dtype": "F32", "shape": [], "data_offsets": [0, 4]}}
    raw = json.dumps(header).encode()
    (tmp_path / "model.safetensors").write_bytes(struct.pack("<Q", len(raw)) + raw + struct.pack("<f", 1.0))
    with pytest.raises(KvplanInputError, match=r"safetensors header: scale tensor layer index is 99999999"):
        load_model_inputs(tmp_path)


# ----------------------------------------------------------------------------- YAML
def test_yaml_alias_bomb_is_refused_before_composing() -> None:
    with pytest.raises(InputLimitError) as e:  # (a walk of the 387-million-node document never ends)
        check_yaml(alias_bomb(), "bomb.yaml")
    assert e.value.code == "KV821" and e.value.line == 9 and "alias-expansion budget" in str(e.value)


def test_yaml_recursive_alias_and_depth_are_refused() -> None:
    with pytest.raises(InputLimitError, match="refers to a node that contains it"):
        check_yaml("a: &x [1, *x]\n", "r.yaml")
    with pytest.raises(InputLimitError, match="nests deeper than kvplan's limit of 128 levels"):
        check_yaml("[" * 200 + "]" * 200, "d.yaml")
    check_yaml("a: &x [1, 2]\nb: *x\nc: *x\n", "ok.yaml")  # ordinary anchors are fine
    check_yaml("a: [unclosed\n", "bad.yaml")  # syntax errors are left to the composer's message


def test_yaml_node_budget_counts_aliases_as_what_they_expand_to() -> None:
    text = "a: &x [" + ", ".join(["1"] * 100) + "]\n" + "".join(f"b{i}: *x\n" for i in range(20))
    with (active_limits(max_yaml_alias_nodes=1000),
          pytest.raises(InputLimitError, match="expand to more than 1,000 nodes")):
        check_yaml(text, "t.yaml")
    check_yaml(text, "t.yaml")  # 2,121 nodes: within the default budget


# ----------------------------------------------------------------------------- time budget
def _spin() -> None:
    while True:
        pass


def test_time_budget_interrupts_python_code_in_the_main_thread() -> None:
    t0 = time.monotonic()
    with pytest.raises(TimeBudgetExceeded), time_budget(0.2):
        _spin()
    assert time.monotonic() - t0 < 10


def test_time_budget_works_in_a_worker_thread_and_never_fires_after_the_block() -> None:
    out: list[str] = []

    def worker() -> None:
        try:
            with time_budget(0.2):
                _spin()
        except TimeBudgetExceeded:
            out.append("stopped")
        with time_budget(0.1):
            pass  # finished in time: nothing is raised later
        time.sleep(0.3)
        out.append("after")

    t = threading.Thread(target=worker)
    t.start()
    t.join(timeout=20)
    assert out == ["stopped", "after"]
