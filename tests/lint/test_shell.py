"""The position-keeping shell splitter and vLLM launch detection."""
from __future__ import annotations

import shlex

from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.lint.shell import Tok, VarValue, commands, expand, find_launch, lex
from kvplan.lint.sources import LineIndex


def _lex(text: str) -> list[Tok]:
    return lex(text, LineIndex(text).pos)


def test_lex_positions_follow_backslash_continuations() -> None:
    text = "vllm serve m \\\n  --kv-cache-dtype fp8 \\\n  --max-model-len 4096\n"
    words = [(t.value, t.line, t.col) for t in _lex(text) if not t.op]
    assert words == [("vllm", 1, 1), ("serve", 1, 6), ("m", 1, 12), ("--kv-cache-dtype", 2, 3), ("fp8", 2, 20),
                     ("--max-model-len", 3, 3), ("4096", 3, 19)]


def test_lex_quoted_word_points_at_first_character_inside_the_quote() -> None:
    t = [x for x in _lex("vllm serve \"$MODEL\" --attention-config '{\"a\": 1}'") if not x.op]
    assert (t[2].value, t[2].col, t[2].quoted) == ("$MODEL", 13, True)
    assert t[4].value == '{"a": 1}'


def test_lex_comments_operators_and_redirections() -> None:
    text = "# start\nray start --head && vllm serve m --port 8000 > /tmp/log 2>&1 & wait # done\n"
    cmds = [[w.value for w in c] for c in commands(_lex(text))]
    assert cmds == [["ray", "start", "--head"], ["vllm", "serve", "m", "--port", "8000"], ["wait"]]


def test_find_launch_recognises_launchers() -> None:
    def launch(line: str):
        return find_launch([t for t in _lex(line) if not t.op])
    assert [t.value for t in launch("exec vllm serve m --kv-cache-dtype fp8").args] == ["m", "--kv-cache-dtype", "fp8"]
    assert launch("python3 -u -m vllm.entrypoints.openai.api_server --model m").args[0].value == "--model"
    assert launch("CUDA_VISIBLE_DEVICES=0,1 nohup vllm serve m").args[0].value == "m"
    docker = launch("docker run --gpus all -v ~/.cache/vllm:/root vllm/vllm-openai:v0.33.0 --model m")
    assert docker.args[1].value == "m"
    assert launch("python -m huggingfaceserver --model_id m").dialect == "kserve-hf"
    assert launch("ray start --head") is None and launch("python train.py") is None


def test_expand_splits_unquoted_and_keeps_quoted_and_k8s_list_items() -> None:
    env = {"ARGS": VarValue("--kv-cache-dtype fp8", Tok("--kv-cache-dtype fp8", 7, 10))}
    words = [Tok("$ARGS", 1, 1), Tok("${ARGS}", 1, 7, quoted=True)]
    out = expand(words, env)
    assert [(t.value, t.line, t.col) for t in out] == [("--kv-cache-dtype", 7, 10), ("fp8", 7, 27),
                                                        ("--kv-cache-dtype fp8", 7, 10)]
    assert [t.value for t in expand([Tok("$(ARGS)", 1, 1)], env, split=False)] == ["--kv-cache-dtype fp8"]
    assert [t.value for t in expand([Tok("${MISSING:-auto}", 2, 3)], {})] == ["auto"]


_ARG = st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="\x00"), min_size=1,
               max_size=12)


@settings(max_examples=200, deadline=None)
@given(st.lists(_ARG, min_size=1, max_size=8))
def test_lex_round_trips_shlex_quoted_argv(argv: list[str]) -> None:
    line = " ".join(shlex.quote(a) for a in argv)
    toks = [t for t in _lex(line) if not t.op]
    assert [t.value for t in toks] == argv
    for t in toks:  # every position lands inside the line, on the word or just inside its quote
        assert t.line == 1 and 1 <= t.col <= len(line) + 1
