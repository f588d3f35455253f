"""Values only known at run time are never checked and never shift arguments; known ones are
substituted the way Kubernetes, docker compose and the shell do it (issue 24)."""
from __future__ import annotations

from pathlib import Path

from kvplan.lint.shell import Tok, VarValue, expand, expand_k8s, lex
from kvplan.lint.sources import LineIndex
from tests.lint.helpers import lint_text as _lint


def _by_code(report) -> dict[str, list]:
    out: dict[str, list] = {}
    for f in report.findings:
        out.setdefault(f.code, []).append(f)
    return out


def _words(text: str, env: dict[str, VarValue]) -> list[tuple[str, bool]]:
    toks = [t for t in lex(text, LineIndex(text).pos) if not t.op]
    return [(t.value, t.unknown) for t in expand(toks, env)]


def _vv(value: str, unknown: bool = False) -> VarValue:
    return VarValue(value, Tok(value, 9, 9), unknown)


# ----------------------------------------------------------------------------- the expansion functions
def test_shell_expands_inside_words_and_keeps_unknowns_as_one_unknown_word() -> None:
    env = {"MODEL": _vv("Qwen/Qwen3-8B"), "ARGS": _vv("--max-model-len 4096")}
    assert _words('vllm serve --model=${MODEL} $ARGS "$ARGS" --tp=$TP --x=$(nproc) \'$MODEL\'', env) == [
        ("vllm", False), ("serve", False), ("--model=Qwen/Qwen3-8B", False),
        ("--max-model-len", False), ("4096", False),         # unquoted: word-split
        ("--max-model-len 4096", False),                     # quoted: one word
        ("--tp=$TP", True), ("--x=$(nproc)", True),          # unset variable, command substitution
        ("$MODEL", False)]                                   # single quotes: literal
    assert _words("m ${UNSET:-auto} ${SECRET:-auto} $1", {"SECRET": _vv("", unknown=True)}) == [
        ("m", False), ("auto", False), ("${SECRET:-auto}", True), ("$1", True)]


def test_kubernetes_expansion_rules() -> None:
    env = {"MODEL_ID": _vv("google/gemma-3-1b-it"), "TOKEN": _vv("", unknown=True)}
    assert expand_k8s("--model=$(MODEL_ID)", env)[:2] == ("--model=google/gemma-3-1b-it", False)
    assert expand_k8s("$$(MODEL_ID)", env)[:2] == ("$(MODEL_ID)", False)      # $$ escapes
    assert expand_k8s("--nnodes=$(LWS_GROUP_SIZE)", env)[:2] == ("--nnodes=$(LWS_GROUP_SIZE)", True)
    assert expand_k8s("$(TOKEN)", env)[1] is True                               # set from a Secret
    assert expand_k8s("$MODEL_ID", env)[:2] == ("$MODEL_ID", False)            # not Kubernetes syntax


# ----------------------------------------------------------------------------- end to end
def test_k8s_var_inside_a_word_is_substituted_from_env_and_configmap_in_the_file(tmp_path: Path) -> None:
    r = _lint(tmp_path, "d.yaml", """
        apiVersion: v1
        kind: ConfigMap
        metadata: {name: serve}
        data:
          kv: fp9
        ---
        apiVersion: apps/v1
        kind: Deployment
        metadata: {name: d}
        spec:
          template:
            spec:
              containers:
                - name: inference-server
                  image: vllm/vllm-openai:v0.33.0
                  command: ["python3", "-m", "vllm.entrypoints.openai.api_server"]
                  args: ["--model=$(MODEL_ID)", "--kv-cache-dtype=$(KV)", "--port=$$(PORT)"]
                  env:
                    - name: MODEL_ID
                      value: Qwen/Qwen3-8B
                    - name: KV
                      valueFrom: {configMapKeyRef: {name: serve, key: kv}}
        """)
    codes = _by_code(r)
    assert r.files[0].launches[0].model == "Qwen/Qwen3-8B" and "KV804" not in codes  # bundled model: planned
    (bad,) = codes["KV803"]  # the ConfigMap value in the same file is known, and wrong
    assert "fp9" in bad.message


def test_unresolved_values_never_shift_arguments_or_get_checked(tmp_path: Path) -> None:
    # The model and port come from the environment at run time: no "needs a value", the port is not
    # the model, TP from a variable is not "expects an integer", the JSON option is not the model.
    r = _lint(tmp_path, "start.sh", """
        #!/bin/bash
        bash -c "vllm serve --port ${PORT} --model ${MODEL_ID} --tensor-parallel-size=$TP"
        vllm serve $MODEL --compilation-config '{"level": 3}' --max-model-len $LEN
        """)
    codes = _by_code(r)
    assert "KV803" not in codes, codes.get("KV803")
    assert [f.message.split(",")[0] for f in codes["KV804"]] == [
        "the served model comes from ${MODEL_ID}", "the served model comes from $MODEL"]
    assert sorted(f.message.split(" is set")[0] for f in codes["KV811"]) == [
        "--max-model-len $LEN", "--tensor-parallel-size $TP"]
    assert [li.model for li in r.files[0].launches] == ["${MODEL_ID}", "$MODEL"]


def test_script_variables_from_assignments_and_container_env(tmp_path: Path) -> None:
    r = _lint(tmp_path, "p.yaml", """
        apiVersion: v1
        kind: Pod
        metadata: {name: p}
        spec:
          containers:
            - name: vllm
              image: vllm/vllm-openai:v0.33.0
              command: ["/bin/sh", "-c"]
              args:
                - |
                  DTYPE=fp8_e5m3
                  vllm serve $MODEL_ID --kv-cache-dtype "$DTYPE" --served-model-name $MODEL_ID
              env:
                - name: MODEL_ID
                  value: Qwen/Qwen3-8B
        """)
    (bad,) = _by_code(r)["KV803"]
    assert (bad.location.line, bad.location.column) == (11, 17)  # the assignment's value
    assert r.files[0].launches[0].model == "Qwen/Qwen3-8B"


def test_compose_interpolation_defaults_and_unknowns(tmp_path: Path) -> None:
    r = _lint(tmp_path, "compose.yaml", """
        services:
          vllm:
            image: vllm/vllm-openai:v0.33.0
            command: ["--model", "${VLLM_MODEL:-Qwen/Qwen3-8B}", "--gpu-memory-utilization", "${UTIL}",
                      "--kv-cache-dtype", "$${LITERAL}"]
        """)
    codes = _by_code(r)
    assert r.files[0].launches[0].model == "Qwen/Qwen3-8B"
    assert [f.code for f in r.findings if f.code != "KV7"] and "${UTIL}" in codes["KV811"][0].message
    assert "'${LITERAL}'" in codes["KV803"][0].message  # $$ is compose's literal $, and that is not a dtype


def test_substituted_values_keep_their_place_in_the_argument_list(tmp_path: Path) -> None:
    # MODEL's and LEN's values are written below the script; they still sit where they are used
    # (sorting by file position made --max-model-len "need a value" and moved the model)
    r = _lint(tmp_path, "p.yaml", """
        apiVersion: v1
        kind: Pod
        metadata: {name: p}
        spec:
          containers:
            - name: vllm
              image: vllm/vllm-openai:v0.33.0
              command: ["sh", "-c", "vllm serve $MODEL --max-model-len $LEN
                        --compilation-config '{\\"level\\": 3}' --kv-cache-dtype fp9"]
              env:
                - name: MODEL
                  value: Qwen/Qwen3-8B
                - name: LEN
                  value: "4096"
        """)
    assert r.files[0].launches[0].model == "Qwen/Qwen3-8B"
    assert [(f.code, f.message[:26]) for f in r.findings] == [("KV803", "invalid --kv-cache-dtype '")]
