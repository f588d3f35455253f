"""A container's or service's argv (command + args, `sh -c` scripts) -> vLLM launches, with positions."""
from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass, replace

from yaml.nodes import ScalarNode

from kvplan.lint.extracted import GO_ACTION, GO_TEMPLATE, Extracted, RawFinding
from kvplan.lint.shell import (
    Launch,
    Pos,
    ShellSyntaxError,
    Tok,
    VarValue,
    commands,
    expand,
    expand_k8s,
    find_launch,
    lex,
    lex_with_spans,
)
from kvplan.lint.yamlnodes import YamlDoc


@dataclass
class ArgItem:
    tok: Tok
    node: ScalarNode | None = None  # YAML scalar the item came from (for `sh -c` scripts)
    pos: Pos | None = None  # where each character of the item is, when not on one line (a Dockerfile JSON string)


_SHELLS = {"sh", "bash", "ash", "dash", "zsh"}
_FLAG_WITH_SPACE = re.compile(r"^--?[A-Za-z][\w-]*\s+\S")
_DECLARE = {"export", "local", "declare", "readonly", "typeset"}
_ASSIGN_WORD = re.compile(r"^([A-Za-z_]\w*)=")


def word_pos(t: Tok) -> Pos:
    return lambda k: (t.line, t.col + k)


def shell_script_arg(words: list[Tok]) -> int | None:
    """Index of the script in `sh -c SCRIPT` / `bash -lc SCRIPT` (wrappers before the shell allowed)."""
    i = 0
    while i < len(words) and (words[i].value in ("exec", "env", "nohup", "timeout")
                              or _ASSIGN_WORD.match(words[i].value)
                              or (words[i - 1].value == "timeout" if i else False)):
        i += 1
    if i >= len(words) or words[i].value.rsplit("/", 1)[-1] not in _SHELLS:
        return None
    for j in range(i + 1, len(words) - 1):
        v = words[j].value
        if v.startswith("-") and not v.startswith("--") and "c" in v[1:] and len(v) <= 5:
            return j + 2 if words[j + 1].value == "--" and j + 2 < len(words) else j + 1  # bash -lc -- SCRIPT
        if not v.startswith("-"):
            return None
    return None


def launches_from_argv(doc: YamlDoc | None, items: list[ArgItem], env: dict[str, VarValue], implicit: Tok | None,
                        out: Extracted, yaml_list: bool, k8s: bool = True, more_args: bool = False) -> list[Launch]:
    """Launches in one container/service argv (command + args), including `sh -c 'script'`.

    `k8s`: list items get Kubernetes' $(VAR) expansion (one argument each, never split);
    compose items were interpolated by the caller. `more_args`: something appends arguments at run
    time (a KServe runtime template), so a script's `$@` is unknown.
    """
    found: list[Launch] = []
    if yaml_list:
        if k8s:
            items = [ArgItem(t, it.node) for it in items for t in expand([it.tok], env, split=False)]
        for it in items:
            if _FLAG_WITH_SPACE.match(it.tok.value) and "\n" not in it.tok.value and not it.tok.unknown:
                flag, _, value = it.tok.value.partition(" ")
                out.findings.append(RawFinding(
                    "KV809", f"argument {it.tok.value!r} reaches vLLM as one argv entry; argparse reads it as a "
                             "positional and vLLM exits with 'unrecognized arguments'.", it.tok,
                    fix=f"Write {flag}={value.strip()} or split it into two list items."))
    words = [it.tok for it in items]
    j = shell_script_arg(words)
    if j is not None:
        script_item = items[j]
        if doc and script_item.node is not None:
            pos = doc.pos_in(script_item.node)
            script = script_item.node.value
            if k8s and "$" in script:  # Kubernetes expands $(VAR) and $$ before the shell runs
                script, pos = _k8s_text(script, pos, env)
        else:
            pos, script = script_item.pos or word_pos(script_item.tok), script_item.tok.value
        # `sh -c SCRIPT NAME ARG...`: NAME is $0, the ARGs are "$@"
        positional = None if more_args else words[j + 2:]
        return launches_in_script(script, pos, script_item.tok.yaml_path, env, out, positional=positional)
    if words and words[0].value.rsplit("/", 1)[-1] in _SHELLS:
        return found
    launch = find_launch(expand(words, env) if not yaml_list else words, implicit_vllm=False)
    if launch is None and implicit is not None:
        launch = Launch(implicit, tuple(words))
    if launch is not None:
        found.append(launch)
    return found


def _k8s_text(script: str, pos: Pos, env: dict[str, VarValue]) -> tuple[str, Pos]:
    """Kubernetes expansion of a script string, with positions mapped back to the file: original text
    to where it is written, a substituted value to the env value it came from."""
    out: list[str] = []
    src: list[int | tuple[int, int]] = []
    i = 0
    while i < len(script):
        if script.startswith("$$", i):
            out.append("$")
            src.append(i)
            i += 2
            continue
        if script.startswith("$(", i):
            close = script.find(")", i)
            value, unknown, whole = expand_k8s(script[i:close + 1], env) if close > 0 else ("", True, None)
            if close > 0 and not unknown:
                out.append(value)
                src += ([(whole.tok.line, whole.tok.col + k) for k in range(len(value))] if whole is not None
                        else [i] * len(value))
                i = close + 1
                continue
        out.append(script[i])
        src.append(i)
        i += 1
    end = len(script)

    def mapped(k: int) -> tuple[int, int]:
        at = src[k] if k < len(src) else end
        return at if isinstance(at, tuple) else pos(at)
    return "".join(out), mapped


def _assign(words: list[Tok], env: dict[str, VarValue], char_pos: dict[int, Pos] | None = None) -> bool:
    """`A=1 B=$A`, `export A=1`, `local a=$1`: update env; False when the command is not an assignment."""
    values = [w.value for w in words]
    if not (all(_ASSIGN_WORD.match(v) for v in values) or (values[0] in _DECLARE and len(values) > 1)):
        return False
    for w in words:
        m = _ASSIGN_WORD.match(w.value)
        if not m:
            continue
        name = m.group(1)
        vtok = w.at(len(name) + 1)
        vtok = Tok(vtok.value, w.line, w.col + len(name) + 1 + (1 if w.quoted else 0), w.yaml_path,
                   quoted=True, literal=vtok.literal)
        expanded = _expand_value(vtok, env)
        wpos = (char_pos or {}).get(id(w))
        env[name] = VarValue(expanded.value, expanded, unknown=expanded.unknown, raw=vtok,
                             raw_pos=_offset_pos(wpos, len(name) + 1) if wpos is not None else None)
    return True


_DEFAULT_REF = re.compile(r"^\$\{([A-Za-z_]\w*)(:?)=([^}$`]*)\}$")
_LONE_REF = re.compile(r"^\$(?:\{([A-Za-z_]\w*)\}|([A-Za-z_]\w*))$")


def _defaults(words: list[Tok], env: dict[str, VarValue]) -> None:
    """`${NAME:=value}` assigns `value` when NAME is unset (`:=`: or empty): a static default."""
    for w in words:
        m = _DEFAULT_REF.match(w.value)
        if m is None or 0 in w.literal:
            continue
        name, colon, value = m.groups()
        cur = env.get(name)
        if cur is None or (colon and not cur.unknown and cur.value == ""):
            at = w.value.index("=") + 1
            t = Tok(value, w.line, w.col + at, w.yaml_path, quoted=True)
            env[name] = VarValue(value, t, raw=t)


def _held_command(words: list[Tok], env: dict[str, VarValue]) -> VarValue | None:
    """The assignment text of a variable that holds a launch line, run by `eval $CMD` or as `$CMD` itself."""
    ref = words[1] if words[0].value == "eval" and len(words) == 2 else (words[0] if len(words) == 1 else None)
    m = _LONE_REF.match(ref.value) if ref is not None and 0 not in ref.literal else None
    vv = env.get(m.group(1) or m.group(2)) if m else None
    if vv is None or vv.raw is None or not _HELD_LAUNCH.search(vv.raw.value):
        return None
    return vv


_HELD_LAUNCH = re.compile(r"vllm\s+serve|vllm\.entrypoints")


def _expand_value(t: Tok, env: dict[str, VarValue]) -> Tok:
    """An assignment's value: expanded like a quoted word (no word splitting)."""
    out = expand([t], env)
    return out[0] if out else t


_MASKED = re.compile("([\ue000-\uf8ff])\\1*")


def _mask(script: str) -> tuple[str, list[str]]:
    """Each template action -> a run of one private-use character as long as the action (positions
    stay put, the lexer sees one word part)."""
    actions: list[str] = []

    def sub(m: re.Match) -> str:
        actions.append(m.group(0))
        return chr(0xE000 + min(len(actions) - 1, 0x18FF)) * len(m.group(0))
    return GO_ACTION.sub(sub, script), actions


def _unmask(t: Tok, actions: list[str]) -> Tok:
    if not actions or not _MASKED.search(t.value):
        return t
    value = _MASKED.sub(lambda m: actions[ord(m.group(1)) - 0xE000] if ord(m.group(1)) - 0xE000 < len(actions)
                        else m.group(0), t.value)
    return replace(t, value=value, unknown=True)


_ALL_ARGS = ("$@", "${@}", "$*", "${*}")
_NTH_ARG = re.compile(r"^\$(?:(\d)|\{(\d+)\})$")


def _positional(words: list[Tok], positional: list[Tok] | None) -> list[Tok]:
    """`"$@"` / `$1` words -> the script's arguments when they are known (`sh -c SCRIPT NAME ARGS...`)."""
    if positional is None:
        return words
    out: list[Tok] = []
    for w in words:
        m = _NTH_ARG.match(w.value)
        if w.value in _ALL_ARGS and 0 not in w.literal:
            out += positional
        elif m and 0 not in w.literal and int(m.group(1) or m.group(2)) > 0:
            n = int(m.group(1) or m.group(2))
            out += positional[n - 1:n]
        else:
            out.append(w)
    return out


def launches_in_script(script: str, pos: Pos, yaml_path: str | None, env: dict[str, VarValue],
                        out: Extracted, depth: int = 0, positional: list[Tok] | None = None) -> list[Launch]:
    """Launches in a shell script. `positional`: the script's arguments ($@), None when unknown."""
    env = dict(env)
    found: list[Launch] = []
    actions: list[str] = []
    if GO_TEMPLATE.search(script):  # template actions: unknown word parts, positions kept
        script, actions = _mask(script)
    char_pos: dict[int, Pos] = {}
    for words in commands([_unmask(t, actions) for t in lex_resilient(script, pos, yaml_path, out,
                                                                     char_pos=char_pos)]):
        if _assign(words, env, char_pos):
            continue
        if words[0].value == ":":  # `: "${MODEL:=org/name}"`: a default for a variable the caller did not set
            _defaults(words[1:], env)
            continue
        held = _held_command(words, env)
        if held is not None and held.raw is not None and depth < 3:  # CMD="vllm serve ..."; eval $CMD, or $CMD
            found += launches_in_script(held.raw.value, held.raw_pos or word_pos(held.raw), yaml_path, env, out,
                                        depth + 1, positional)
            continue
        if words[0].value == "eval" and len(words) > 1 and depth < 3:  # eval "exec vllm serve ..."
            inner = " ".join(w.value for w in words[1:])
            if positional is not None:  # "$@" inside the eval string joins the arguments; eval re-splits them
                joined = " ".join(p.value for p in positional)
                inner = inner.replace("${@}", joined).replace("$@", joined)
            inner_pos = char_pos.get(id(words[1])) if len(words) == 2 and inner == words[1].value else None
            found += launches_in_script(inner, inner_pos or word_pos(words[1]), yaml_path, env, out, depth + 1,
                                        positional)
            continue
        j = shell_script_arg(words)
        if j is not None and depth < 3:  # bash -c "..." inside a script
            w = words[j]
            found += launches_in_script(w.value, char_pos.get(id(w)) or word_pos(w), yaml_path, env, out, depth + 1,
                                         _positional(words, positional)[j + 2:] if positional is not None else None)
            continue
        written = _positional(words, positional)
        expanded: list[Tok] = []
        origin: dict[int, Tok] = {}
        for w in written:
            for t in expand([w], env):
                origin[id(t)] = w
                expanded.append(t)
        launch = find_launch(expanded)
        if launch is not None:
            if origin.get(id(launch.launcher), launch.launcher) is not launch.launcher:
                # "$VLLM" serve: the launch is where it is written, not where the variable was set
                w0 = origin[id(launch.launcher)]
                launch = replace(launch, launcher=replace(launch.launcher, line=w0.line, col=w0.col))
            found.append(launch)
    return found


def _offset_pos(pos: Pos, base: int) -> Pos:
    """`pos` for text that starts `base` characters into the text `pos` maps."""
    return lambda k: pos(base + k)


def lex_resilient(s: str, pos: Pos, yaml_path: str | None, out: Extracted, base: int = 0,
                  char_pos: dict[int, Pos] | None = None) -> list[Tok]:
    """lex(), but an unterminated quote becomes finding KV802 and lexing resumes on the next line. `char_pos`
    (when given) gets, for each word by id, where each character of its value is (it may span lines)."""
    toks: list[Tok] = []
    for _ in range(1000):
        try:
            seg_pos = _offset_pos(pos, base)
            got, spans = lex_with_spans(s[base:], seg_pos, yaml_path)
            if char_pos is not None:
                char_pos.update({id(t): _span_pos(seg_pos, spans[id(t)]) for t in got if id(t) in spans})
            toks += got
            return toks
        except ShellSyntaxError as e:
            at = base + e.offset
            line, col = pos(at)
            out.findings.append(RawFinding(
                "KV802", f"{e} in the launch line: the shell stops here and the command does not run as written.",
                Tok("", line, col, yaml_path)))
            line_start = s.rfind("\n", 0, at) + 1
            if line_start > base:
                with contextlib.suppress(ShellSyntaxError):
                    toks += lex(s[base:line_start], _offset_pos(pos, base), yaml_path)
            nl = s.find("\n", at)
            if nl < 0:
                return toks
            toks.append(Tok("\n", *pos(nl), yaml_path, op=True))
            base = nl + 1
    return toks



def _span_pos(pos: Pos, span: tuple[int, ...]) -> Pos:
    end = span[-1] + 1 if span else 0
    return lambda k: pos(span[k] if k < len(span) else end)


def referenced(name: str, texts: list[str]) -> bool:
    pat = re.compile(r"\$(?:\(" + name + r"\)|\{" + name + r"[}:]|" + name + r"\b)")
    return any(pat.search(t) for t in texts)


# Flags that only vLLM takes: a container (or patch) whose args hold one of them is a vLLM launch.
ENGINE_ONLY = re.compile(r"^--(?:model|served-model-name|kv-cache-dtype|max-model-len|tensor-parallel-size|"
                          r"gpu-memory-utilization|max-num-seqs|max-num-batched-tokens|enable-prefix-caching|"
                          r"quantization|enforce-eager|trust-remote-code)(?:=|$)")

