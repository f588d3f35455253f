"""Hugging Face model ids resolve through the real huggingface_hub client against a loopback Hub
(tests/hubserver.py): same plan as the files on disk, no weights downloaded, offline from the cache,
revisions, and one-line errors."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import kvplan
from kvplan.errors import KvplanInputError
from kvplan.pipeline import run as compile_with_quant
from kvplan.report.json_report import dumps
from tests.conftest import EXAMPLES, ROOT
from tests.hubserver import FakeHub, _clear_memo, fake_hub_fixture, fp8_checkpoint, go_offline  # noqa: F401 - fixture

FP8 = EXAMPLES / "nvidia-Llama-3.1-70B-Instruct-FP8"
LLAMA = EXAMPLES / "Meta-Llama-3.1-8B"
GIB = 1 << 30


def _without_source(plan) -> dict:
    d = plan.model_dump(mode="json")
    d["model"].pop("source")
    d["model"].pop("hub", None)
    return d


def _config_only(tmp: Path, src: Path = LLAMA, **changes) -> Path:
    tmp.mkdir(parents=True, exist_ok=True)
    cfg = json.loads((src / "config.json").read_text())
    cfg.update(changes)
    (tmp / "config.json").write_text(json.dumps(cfg, indent=2))
    return tmp


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "from kvplan.cli.main import main; main()", *args],
                          capture_output=True, text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT), **env})


def test_config_only_repo_plans_like_the_file(fake_hub: FakeHub, tmp_path: Path) -> None:
    sha = fake_hub.add("meta-llama/Llama-3.1-8B", _config_only(tmp_path / "repo"))
    hub_plan = kvplan.compile("meta-llama/Llama-3.1-8B", "--kv-cache-dtype fp8", gpu="h100")
    disk_plan = kvplan.compile(str(tmp_path / "repo" / "config.json"), "--kv-cache-dtype fp8", gpu="h100")
    assert _without_source(hub_plan) == _without_source(disk_plan)
    assert hub_plan.model.source == "meta-llama/Llama-3.1-8B"
    assert hub_plan.model.hub is not None
    assert hub_plan.model.hub.model_dump() == {"repo_id": "meta-llama/Llama-3.1-8B", "revision": None,
                                               "commit": sha, "files": ["config.json"]}
    # the library's cache holds the file, under the HF_HOME the fixture set
    assert (Path(os.environ["HF_HOME"]) / "hub" / "models--meta-llama--Llama-3.1-8B" / "snapshots" / sha
            / "config.json").is_file()


def test_checkpoint_scales_read_by_ranges_without_the_weights(fake_hub: FakeHub, tmp_path: Path) -> None:
    ck = fp8_checkpoint(tmp_path / "ck", FP8, layers=6, weight_bytes=4 * GIB)
    fake_hub.add("nvidia/Llama-3.1-70B-Instruct-FP8", ck)
    hub_plan, quant = compile_with_quant("nvidia/Llama-3.1-70B-Instruct-FP8", "--kv-cache-dtype fp8", gpu="h100")
    disk_plan, _ = compile_with_quant(str(ck), "--kv-cache-dtype fp8", gpu="h100")
    assert _without_source(hub_plan) == _without_source(disk_plan)
    # the calibrated values came through (checkpoint scales, read from the tensor bytes)
    k = {s.layer: s.vmax for s in quant.scales if s.kind == "k_scale"}
    assert k == pytest.approx({i: 0.02 + i / 1000 for i in range(6)})
    assert {lp.scale_source.value for lp in hub_plan.layers} == {"checkpoint_per_tensor"}
    assert hub_plan.totals.kv_budget_bytes == disk_plan.totals.kv_budget_bytes  # weight size from the header
    # 4 GiB of weights sit between the scales: a few hundred KB moved, every weight-file GET a range
    assert (ck / "model.safetensors").stat().st_size > 4 * GIB
    assert fake_hub.bytes_served < 1 << 20
    gets = [(p, st) for m, p, st in fake_hub.requests if m == "GET" and p.endswith(".safetensors")]
    assert gets and all(st == 206 for _, st in gets)
    assert hub_plan.model.hub.files == ["config.json", "hf_quant_config.json", "model.safetensors"]


def test_sharded_checkpoint_with_index(fake_hub: FakeHub, tmp_path: Path) -> None:
    ck = fp8_checkpoint(tmp_path / "ck", FP8, layers=9, weight_bytes=GIB, shards=3)
    fake_hub.add("nvidia/sharded", ck)
    hub_plan, quant = compile_with_quant("nvidia/sharded", "--kv-cache-dtype fp8")
    disk_plan, _ = compile_with_quant(str(ck), "--kv-cache-dtype fp8")
    assert _without_source(hub_plan) == _without_source(disk_plan)
    assert sorted({s.file for s in quant.scales}) == [f"model-0000{i}-of-00003.safetensors" for i in (1, 2, 3)]
    assert len(quant.scales) == 18
    assert hub_plan.model.hub.files == ["config.json", "hf_quant_config.json", "model-00001-of-00003.safetensors",
                                        "model-00002-of-00003.safetensors", "model-00003-of-00003.safetensors",
                                        "model.safetensors.index.json"]
    assert fake_hub.bytes_served < 1 << 20


def test_same_commit_same_bytes_then_offline_from_the_cache(fake_hub: FakeHub, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    ck = fp8_checkpoint(tmp_path / "ck", FP8, layers=4, weight_bytes=GIB, shards=2)
    fake_hub.add("org/model", ck)
    first = dumps(kvplan.compile("org/model", "--kv-cache-dtype fp8"))
    _clear_memo()
    fake_hub.reset_counts()
    second = dumps(kvplan.compile("org/model", "--kv-cache-dtype fp8"))
    assert second == first
    # warm cache online: the model info and one HEAD (has the branch moved?), nothing downloaded again
    assert fake_hub.count("GET", "/resolve/") == 0 and fake_hub.count("GET", "/api/models/") == 1
    # offline, with the server gone: the same bytes, from the cache alone
    fake_hub.stop()
    go_offline(monkeypatch)
    assert dumps(kvplan.compile("org/model", "--kv-cache-dtype fp8")) == first
    r = _cli("plan", "org/model", "--kv-cache-dtype", "fp8",
             env={"HF_HUB_OFFLINE": "1", "HF_HOME": os.environ["HF_HOME"], "HF_ENDPOINT": os.environ["HF_ENDPOINT"]})
    assert r.returncode == 0, r.stderr
    assert r.stdout == first
    # the Hub unreachable without HF_HUB_OFFLINE: falls back to the cache too
    go_offline(monkeypatch, False)
    assert dumps(kvplan.compile("org/model", "--kv-cache-dtype fp8")) == first


def test_cli_offline_option_reads_the_cache_only(fake_hub: FakeHub, tmp_path: Path) -> None:
    fake_hub.add("org/cfg", _config_only(tmp_path / "repo"))
    env = {"HF_HUB_OFFLINE": "0", "HF_HOME": os.environ["HF_HOME"], "HF_ENDPOINT": os.environ["HF_ENDPOINT"]}
    r = _cli("plan", "org/cfg", "--offline", env=env)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "org/cfg" in r.stderr and "not in the Hugging Face cache" in r.stderr and "HF_HUB_OFFLINE" in r.stderr
    assert fake_hub.count() == 0
    assert _cli("plan", "org/cfg", env=env).returncode == 0
    fake_hub.reset_counts()
    r = _cli("explain", "org/cfg", "--offline", env=env)
    assert r.returncode == 0, r.stderr
    assert fake_hub.count() == 0


def test_revision_pinning(fake_hub: FakeHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    v1 = fake_hub.add("org/evolving", _config_only(tmp_path / "v1", num_hidden_layers=8), tags=("v1.0",))
    v2 = fake_hub.add("org/evolving", _config_only(tmp_path / "v2", num_hidden_layers=12))
    assert kvplan.compile("org/evolving").model.num_layers == 12
    tagged = kvplan.compile("org/evolving", "--revision v1.0")
    assert (tagged.model.num_layers, tagged.model.hub.commit, tagged.model.hub.revision) == (8, v1, "v1.0")
    pinned = kvplan.compile("org/evolving", ["--revision", v1])
    assert (pinned.model.num_layers, pinned.model.hub.commit) == (8, v1)
    fake_hub.reset_counts()
    _clear_memo()
    assert kvplan.compile("org/evolving", ["--revision", v1]).model.hub.commit == v1
    assert fake_hub.count() == 0  # a commit already in the cache needs no request, even online
    # vLLM's launch line spelling, and a commit resolved earlier, offline
    assert kvplan.compile("org/evolving", f"vllm serve org/evolving --revision {v2}").model.num_layers == 12
    go_offline(monkeypatch)
    assert kvplan.compile("org/evolving", "--revision v1.0").model.hub.commit == v1
    assert kvplan.compile("org/evolving").model.hub.commit == v2


def test_hf_overrides_apply_before_planning(fake_hub: FakeHub, tmp_path: Path) -> None:
    fake_hub.add("org/cfg", _config_only(tmp_path / "repo"))
    plan = kvplan.compile("org/cfg", """vllm serve org/cfg --hf-overrides '{"num_hidden_layers": 4}'""")
    assert plan.model.num_layers == 4
    assert plan.flags["hf_overrides"] == {"num_hidden_layers": 4}
    local = kvplan.compile(str(tmp_path / "repo"), ["--hf-overrides", '{"num_hidden_layers": 4}'])
    assert _without_source(local) == _without_source(plan)


def test_private_repo_needs_a_token(fake_hub: FakeHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_hub.add("acme/private", _config_only(tmp_path / "repo"), private=True, granted=("hf_good",))
    with pytest.raises(KvplanInputError) as e:
        kvplan.compile("acme/private")
    assert "'acme/private' was not found" in str(e.value) and "no token was sent" in str(e.value)
    assert "HF_TOKEN" in str(e.value) and "hf auth login" in str(e.value)
    monkeypatch.setenv("HF_TOKEN", "hf_good")
    assert kvplan.compile("acme/private").model.hub.repo_id == "acme/private"


def test_gated_repo_says_how_to_get_access(fake_hub: FakeHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_hub.add("meta-llama/Gated", _config_only(tmp_path / "repo"), gated=True, granted=("hf_accepted",))
    monkeypatch.setenv("HF_TOKEN", "hf_not_accepted")
    with pytest.raises(KvplanInputError) as e:
        kvplan.compile("meta-llama/Gated")
    msg = str(e.value)
    assert "meta-llama/Gated is a gated repository" in msg and "accept its licence" in msg
    assert f"{os.environ['HF_ENDPOINT']}/meta-llama/Gated" in msg and "hf auth login" in msg
    monkeypatch.setenv("HF_TOKEN", "hf_accepted")
    assert kvplan.compile("meta-llama/Gated").model.num_layers == 32


@pytest.mark.parametrize("case", ["missing", "gguf-only", "bad-revision", "malformed", "network-down",
                                  "offline-uncached", "gated"])
def test_errors_are_one_line_exit_2(fake_hub: FakeHub, tmp_path: Path, case: str) -> None:
    gguf = tmp_path / "gguf"
    gguf.mkdir()
    (gguf / "model-Q4_K_M.gguf").write_bytes(b"GGUF" + b"\0" * 64)
    fake_hub.add("bartowski/Model-GGUF", gguf)
    fake_hub.add("org/cfg", _config_only(tmp_path / "repo"))
    fake_hub.add("org/gated", _config_only(tmp_path / "repo"), gated=True)
    env = {"HF_HUB_OFFLINE": "0", "HF_HOME": os.environ["HF_HOME"], "HF_ENDPOINT": os.environ["HF_ENDPOINT"]}
    args, expect = {
        "missing": (["nobody/nothing"], ["'nobody/nothing' was not found", "HF_TOKEN"]),
        "gguf-only": (["bartowski/Model-GGUF"],
                      ["bartowski/Model-GGUF has no config.json", "model-Q4_K_M.gguf", "GGUF"]),
        "bad-revision": (["org/cfg", "--revision", "v9"], ["org/cfg has no revision 'v9'", "--revision"]),
        "malformed": (["org/bad--id"], ["'org/bad--id' is neither an existing path nor a valid Hugging Face model id"]),
        "network-down": (["org/cfg"], ["cannot reach http://127.0.0.1:9 to resolve org/cfg", "HF_HUB_OFFLINE"]),
        "offline-uncached": (["org/cfg"], ["org/cfg is not in the Hugging Face cache", "HF_HUB_OFFLINE=1"]),
        "gated": (["org/gated"], ["org/gated is a gated repository", "accept its licence"]),
    }[case]
    if case == "network-down":
        env["HF_ENDPOINT"] = "http://127.0.0.1:9"
    if case == "offline-uncached":
        env["HF_HUB_OFFLINE"] = "1"
    r = _cli("plan", *args, env=env)
    assert r.returncode == 2, r.stdout + r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    for text in expect:
        assert text in lines[0], lines[0]
    assert r.stdout == ""


def test_local_paths_win_and_path_like_strings_are_not_ids(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kvplan.ingest.hub import hub_id
    monkeypatch.chdir(tmp_path)
    _config_only(tmp_path / "org" / "name")
    # an existing folder named like an id is planned from disk (no Hub: the conftest's endpoint refuses)
    assert kvplan.compile("org/name").model.source == "org/name"
    assert kvplan.compile("org/name").model.hub is None
    assert hub_id("models/config.json") is None and hub_id("./org/name") is None and hub_id("/abs/path") is None
    assert hub_id("a/b/c") is None and hub_id("hf://org/name") == "org/name"
    with pytest.raises(KvplanInputError, match="path not found"):
        kvplan.compile("missing/config.json")


def test_plan_of_a_local_path_never_imports_huggingface_hub() -> None:
    code = ("import sys; from kvplan.cli.main import app; from typer.testing import CliRunner; "
            f"r = CliRunner().invoke(app, ['plan', r'{LLAMA}']); assert r.exit_code == 0, r.output; "
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('huggingface_hub', 'httpx', 'httpx2')); "
            "assert not bad, bad")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stdout + r.stderr


def test_hf_hub_cache_is_where_files_and_header_bytes_go(fake_hub: FakeHub, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    ck = fp8_checkpoint(tmp_path / "ck", FP8, layers=2, weight_bytes=1 << 20)
    sha = fake_hub.add("org/fp8", ck)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "shared-cache"))
    kvplan.compile("org/fp8")
    repo = tmp_path / "shared-cache" / "models--org--fp8"
    assert (repo / "snapshots" / sha / "hf_quant_config.json").is_file()
    assert (repo / "refs" / "main").read_text().strip() == sha
    assert (repo / "kvplan" / sha / "model.safetensors.ranges.json").is_file()
    assert not (Path(os.environ["HF_HOME"]) / "hub" / "models--org--fp8").exists()
