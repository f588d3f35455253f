"""A shell word splitter that keeps the (line, column) of every word, and vLLM launch detection.

`shlex` loses positions, and lint findings must point at the exact token. This lexer covers what
launch scripts use: quotes, backslash escapes and line continuations, comments, control operators
(; && || | & newline), redirections, $(...) and ${...} kept verbatim, and `NAME=value` assignments
(so `vllm serve $MODEL` can be resolved). It is not a full POSIX shell.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

Pos = Callable[[int], tuple[int, int]]


@dataclass(frozen=True)
class Tok:
    """One argument (or shell operator) and where it starts in the file (1-based line and column)."""

    value: str
    line: int
    col: int
    yaml_path: str | None = None
    quoted: bool = False
    op: bool = False
    unknown: bool = False
    """Part of the value is only known at run time ($(VAR) from a Secret, $(cmd), an unset ${VAR})."""
    literal: tuple[int, ...] = ()
    """Offsets of `$` characters the shell takes literally (single-quoted or backslash-escaped)."""
    rendered: bool = False
    """A Helm template's token whose line and column are in the `helm template` output (no template line holds it)."""
    file: str | None = None
    """The file the token is in, when it is not the file the launch is in (a vLLM `--config` file's key)."""

    def at(self, offset: int) -> Tok:
        """A token for the text `offset` characters into this one (same line: `--flag=value`)."""
        return replace(self, value=self.value[offset:], col=self.col + offset,
                       literal=tuple(o - offset for o in self.literal if o >= offset))


class ShellSyntaxError(ValueError):
    """Unterminated quote or substitution; `offset` is where it starts."""

    def __init__(self, message: str, offset: int):
        super().__init__(message)
        self.offset = offset


_CONTROL = ("&&", "||", ";;", ";", "&", "|", "(", ")", "\n")
_ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def lex(s: str, pos: Pos, yaml_path: str | None = None) -> list[Tok]:
    """Split shell text into words and operators, each with its position (via `pos(offset)`)."""
    return _Lexer(s, pos, yaml_path).run()


def lex_with_spans(s: str, pos: Pos, yaml_path: str | None = None) -> tuple[list[Tok], dict[int, tuple[int, ...]]]:
    """`lex`, and for each word (by id) the offset in `s` of every character of its value (quotes, escapes and
    line continuations removed), so that text taken from a word (an assignment's value) keeps its positions."""
    lexer = _Lexer(s, pos, yaml_path)
    toks = lexer.run()
    return toks, lexer.spans


class _Lexer:
    """One `lex` call: the text, the word being built (its pieces, start and literal `$`s) and the tokens so far."""

    def __init__(self, s: str, pos: Pos, yaml_path: str | None) -> None:
        self.s, self.n, self.pos, self.yaml_path = s, len(s), pos, yaml_path
        self.toks: list[Tok] = []
        self.buf: list[str] = []
        self.lit: list[int] = []
        self.src: list[int] = []  # offset in `s` of each character of the word being built
        self.spans: dict[int, tuple[int, ...]] = {}
        self.start: int | None = None
        self.quoted = False

    def run(self) -> list[Tok]:
        i = 0
        while i < self.n:
            i = self._step(i)
        self._flush()
        return self.toks

    def _flush(self) -> None:
        """End the word being built (if any) and start a new one."""
        if self.start is not None:
            line, col = self.pos(self.start)
            tok = Tok("".join(self.buf), line, col, self.yaml_path, self.quoted, literal=tuple(self.lit))
            self.toks.append(tok)
            self.spans[id(tok)] = tuple(self.src)
        self.buf, self.start, self.quoted, self.lit, self.src = [], None, False, [], []

    def _blen(self) -> int:
        return sum(len(b) for b in self.buf)

    def _emit_op(self, value: str, at: int) -> None:
        line, col = self.pos(at)
        self.toks.append(Tok(value, line, col, self.yaml_path, op=True))

    def _step(self, i: int) -> int:
        """Consume the text at offset `i`; the offset just after it."""
        s, c = self.s, self.s[i]
        if c == "\\" and s.startswith("\n", i + 1):  # line continuation
            return i + 2
        if c == "\\" and s.startswith("\r\n", i + 1):
            return i + 3
        if c in " \t\r":
            self._flush()
            return i + 1
        if c == "#" and self.start is None:  # a comment runs to the end of the line (the newline is an operator)
            end = s.find("\n", i)
            return self.n if end < 0 else end
        if c in ";&|()\n":
            return self._control(i)
        if c in "<>":
            return self._redirection(i)
        if self.start is None:
            self.start = i + 1 if c in "'\"" else i  # a quoted word's position is its first character
        if c == "'":
            return self._single_quoted(i)
        if c == '"':
            return self._double_quoted(i)
        if c == "\\" and i + 1 < self.n:
            if s[i + 1] == "$":
                self.lit.append(self._blen())
            self.buf.append(s[i + 1])
            self.src.append(i + 1)
            return i + 2
        if c == "$" and i + 1 < self.n and s[i + 1] in "({":
            return self._substitution(i)
        self.buf.append(c)
        self.src.append(i)
        return i + 1

    def _control(self, i: int) -> int:
        self._flush()
        op = next(o for o in _CONTROL if self.s.startswith(o, i))
        self._emit_op(op, i)
        return i + len(op)

    def _redirection(self, i: int) -> int:
        s = self.s
        if self.start is not None and "".join(self.buf).isdigit():  # 2>&1: the fd number belongs to the redirection
            self.buf, self.start, self.src = [], None, []
        self._flush()
        j = i
        while j < self.n and s[j] in "<>":
            j += 1
        if j < self.n and s[j] == "&":
            j += 1
            while j < self.n and (s[j].isdigit() or s[j] == "-"):
                j += 1
        self._emit_op(s[i:j], i)
        return j

    def _single_quoted(self, i: int) -> int:
        s = self.s
        j = s.find("'", i + 1)
        if j < 0:
            raise ShellSyntaxError("unterminated single quote", i)
        base = self._blen()
        self.lit += [base + k for k, ch in enumerate(s[i + 1:j]) if ch == "$"]
        self.buf.append(s[i + 1:j])
        self.src += range(i + 1, j)
        self.quoted = True
        return j + 1

    def _double_quoted(self, i: int) -> int:
        s = self.s
        self.quoted = True
        j = i + 1
        while j < self.n and s[j] != '"':
            if s[j] == "\\" and j + 1 < self.n and s[j + 1] in '"\\$`\n':
                if s[j + 1] == "$":
                    self.lit.append(self._blen())
                if s[j + 1] != "\n":
                    self.buf.append(s[j + 1])
                    self.src.append(j + 1)
                j += 2
                continue
            self.buf.append(s[j])
            self.src.append(j)
            j += 1
        if j >= self.n:
            raise ShellSyntaxError("unterminated double quote", i)
        return j + 1

    def _substitution(self, i: int) -> int:
        """$(...) or ${...}, kept verbatim."""
        s = self.s
        close = ")" if s[i + 1] == "(" else "}"
        depth, j = 0, i + 1
        while j < self.n:
            if s[j] == s[i + 1]:
                depth += 1
            elif s[j] == close:
                depth -= 1
                if depth == 0:
                    break
            j += 1
        if j >= self.n:
            raise ShellSyntaxError(f"unterminated ${s[i + 1]}", i)
        self.buf.append(s[i:j + 1])
        self.src += range(i, j + 1)
        return j + 1


def commands(toks: Sequence[Tok]) -> list[list[Tok]]:
    """Simple commands: words between control operators, redirections and their targets removed."""
    out: list[list[Tok]] = []
    cur: list[Tok] = []
    skip_next = False
    for t in toks:
        if t.op and t.value in _CONTROL:
            if cur:
                out.append(cur)
            cur, skip_next = [], False
            continue
        if t.op:  # redirection: its target is the next word unless written in (2>&1)
            skip_next = "&" not in t.value
            continue
        if skip_next:
            skip_next = False
            continue
        cur.append(t)
    if cur:
        out.append(cur)
    return out


# One shell parameter reference at a `$`: ${NAME}, ${NAME:-word} (and -, :=, =), $NAME.
_SHELL_REF = re.compile(r"\$(?:\{([A-Za-z_]\w*)(?:(:?[-=])([^}$`]*))?\}|([A-Za-z_]\w*))")
_K8S_REF = re.compile(r"\$\(([A-Za-z_][\w.-]*)\)")


@dataclass(frozen=True)
class VarValue:
    """A variable's value and where the value starts (for expanded-word positions).

    `unknown`: the variable is set, but from something only known at run time (a Secret, a
    ConfigMap outside the file, the downward API), so references to it are never checked.
    """

    value: str
    tok: Tok
    unknown: bool = False
    raw: Tok | None = None
    """A shell assignment's value as written, before expansion (`eval $CMD` runs it as a script)."""
    raw_pos: Pos | None = None
    """Where each character of `raw` is (it may span lines)."""


def _closing(s: str, i: int, open_: str, close: str) -> int:
    """Index just past the `close` that matches the `open_` at s[i] (len(s) when unbalanced)."""
    depth = 0
    for j in range(i, len(s)):
        if s[j] == open_:
            depth += 1
        elif s[j] == close:
            depth -= 1
            if depth == 0:
                return j + 1
    return len(s)


def expand_k8s(value: str, env: Mapping[str, VarValue]) -> tuple[str, bool, VarValue | None]:
    """Kubernetes' expansion of one command/args/env string: (result, unknown, whole).

    `$(NAME)` takes the value of an env entry defined in the container (earlier entries only, for
    env values); `$$` is a literal `$`; a reference to a variable the manifest does not define, or
    defines from a Secret/ConfigMap kvplan cannot see, stays as written and makes the result
    unknown (the kubelet, or a webhook such as LeaderWorkerSet's, fills it in at run time).
    `whole` is the variable when the string is exactly one known reference.
    """
    if "$" not in value:
        return value, False, None
    m = _K8S_REF.fullmatch(value)
    if m and m.group(1) in env and not env[m.group(1)].unknown:
        return env[m.group(1)].value, False, env[m.group(1)]
    def known(m: re.Match[str]) -> str | None:
        vv = env.get(m.group(1))
        return vv.value if vv is not None and not vv.unknown else None

    result, unknown = interpolate(value, _K8S_REF, known)
    return result, unknown, None


def interpolate(value: str, ref: re.Pattern[str], resolve: Callable[[re.Match[str]], str | None]) -> tuple[str, bool]:
    """Substitute the `ref` matches of `value` (`$$` is a literal `$`): (result, unknown).

    `resolve` gives a match's value, or None when it is only known at run time: the reference then
    stays as written and the result is unknown. Kubernetes' `$(VAR)` and compose's `${VAR:-x}` both
    scan this way.
    """
    out: list[str] = []
    unknown = False
    i = 0
    while i < len(value):
        if value.startswith("$$", i):
            out.append("$")
            i += 2
            continue
        m = ref.match(value, i)
        if m:
            got = resolve(m)
            if got is None:
                out.append(m.group(0))
                unknown = True
            else:
                out.append(got)
            i = m.end()
            continue
        out.append(value[i])
        i += 1
    return "".join(out), unknown


def expand_k8s_tok(t: Tok, env: Mapping[str, VarValue]) -> Tok:
    """`expand_k8s` on one token; a whole-item reference points at the variable's value."""
    value, unknown, whole = expand_k8s(t.value, env)
    if whole is not None:
        return replace(whole.tok, value=value, quoted=True, yaml_path=whole.tok.yaml_path or t.yaml_path,
                       unknown=whole.unknown)
    if value == t.value and not unknown:
        return t
    return replace(t, value=value, unknown=unknown or t.unknown, literal=())


def _expand_shell_word(w: Tok, env: Mapping[str, VarValue], split: bool) -> list[Tok]:
    """Shell parameter expansion of one word: known values substituted (a lone unquoted reference
    word-splits), anything only known at run time ($(cmd), $1, an unset or Secret-backed variable)
    kept as written and marking the word unknown."""
    if "$" not in w.value:
        return [w]
    whole = _SHELL_REF.fullmatch(w.value) if 0 not in w.literal else None
    if whole is not None:
        return _expand_lone_reference(w, whole, env, split)
    return [_expand_within_word(w, env)]


def _expand_lone_reference(w: Tok, ref: re.Match[str], env: Mapping[str, VarValue], split: bool) -> list[Tok]:
    """A word that is one reference ($NAME, ${NAME}, ${NAME:-default}): it takes the value's position."""
    name, op, default = ref.group(1) or ref.group(4), ref.group(2), ref.group(3)
    vv = env.get(name)
    if vv is not None and not vv.unknown and not (op and op.startswith(":") and vv.value == ""):
        if w.quoted or not split:
            return [replace(vv.tok, value=vv.value, quoted=True, yaml_path=vv.tok.yaml_path or w.yaml_path)]
        return split_value(vv.value, vv.tok)
    if op is not None and (vv is None or (not vv.unknown and vv.value == "")):
        if vv is None and default == "":  # ${VAR:-}: whatever the environment has, else nothing
            return [replace(w, unknown=True)]
        if w.quoted or not split:
            return [replace(w, value=default, literal=())]
        return split_value(default, w)
    return [replace(w, unknown=True)]


def _expand_within_word(w: Tok, env: Mapping[str, VarValue]) -> Tok:
    """References inside a longer word: substituted in place, never split."""
    s, lit = w.value, set(w.literal)
    out: list[str] = []
    unknown = w.unknown
    i = 0
    while i < len(s):
        if s[i] != "$" or i in lit or i + 1 >= len(s):
            out.append(s[i])
            i += 1
            continue
        m = _SHELL_REF.match(s, i)
        if m:
            value = _reference_value(m, env)
            out.append(m.group(0) if value is None else value)
            unknown = unknown or value is None
            i = m.end()
            continue
        j = _runtime_only_end(s, i)
        if j is None:  # a lone `$` is literal
            out.append("$")
            i += 1
            continue
        out.append(s[i:j])
        unknown = True
        i = j
    return replace(w, value="".join(out), unknown=unknown, literal=())


def _reference_value(m: re.Match[str], env: Mapping[str, VarValue]) -> str | None:
    """The value of one reference inside a word, or None when only known at run time."""
    name, op, default = m.group(1) or m.group(4), m.group(2), m.group(3)
    vv = env.get(name)
    if vv is not None and not vv.unknown:
        return vv.value
    if vv is None and op is not None:
        return default
    return None


def _runtime_only_end(s: str, i: int) -> int | None:
    """End of the `$(cmd)`, `${...}`, `$1` or `$?` at s[i] (known only at run time); None for a lone `$`."""
    nxt = s[i + 1]
    if nxt == "(":
        return _closing(s, i + 1, "(", ")")
    if nxt == "{":
        return _closing(s, i + 1, "{", "}")
    if nxt.isdigit() or nxt in "@*#?$!-":
        return i + 2
    return None


def expand(words: Sequence[Tok], env: Mapping[str, VarValue], split: bool = True) -> list[Tok]:
    """Expand variable references in words.

    `split=True` is the shell: `$NAME`, `${NAME}` and `${NAME:-default}` anywhere in a word take
    the variable's value, a lone unquoted reference word-splits, and `$(cmd)`, `$1`, unset or
    Secret-backed variables keep the word but mark it unknown (never checked, never shifting the
    arguments after it). `split=False` is Kubernetes' `$(NAME)` in a command/args list item:
    substituted, never split, `$$` an escaped `$`.
    """
    out: list[Tok] = []
    for w in words:
        if w.op:
            out.append(w)
        elif split:
            out.extend(_expand_shell_word(w, env, split))
        else:
            out.append(expand_k8s_tok(w, env))
    return out


def split_value(value: str, tok: Tok) -> list[Tok]:
    """Word-split a value that starts at `tok` (same-line positions; later lines approximated)."""
    def pos(k: int) -> tuple[int, int]:
        line = tok.line + value.count("\n", 0, k)
        nl = value.rfind("\n", 0, k)
        return (line, tok.col + k) if nl < 0 else (line, k - nl)
    try:
        return [t for t in lex(value, pos, tok.yaml_path) if not t.op]
    except ShellSyntaxError:
        return [t for t in (replace(tok, value=p) for p in value.split()) if t.value]


# ----------------------------------------------------------------------------- launch detection
_WRAPPERS = {"exec", "nohup", "time", "sudo", "command", "stdbuf", "nice", "taskset", "numactl"}
_PY = re.compile(r"^(?:.*/)?python(?:\d+(?:\.\d+)?)?$")
VLLM_IMAGE = re.compile(r"(^|/)vllm[-_/a-z0-9.]*(:|@|$)|vllm-openai", re.I)
_OPENAI_MODULES = ("vllm.entrypoints.openai.api_server", "vllm.entrypoints.api_server")


@dataclass(frozen=True)
class Launch:
    """A vLLM server start found in a command: the launcher word and the engine arguments after it."""

    launcher: Tok
    args: tuple[Tok, ...]
    dialect: str = "vllm"  # vllm | kserve-hf (KServe's huggingfaceserver: own flags, vLLM flags passed on)
    image: Tok | None = None  # `docker run IMAGE ...`: the image (its tag names the vLLM release)


def find_launch(words: Sequence[Tok], implicit_vllm: bool = False) -> Launch | None:
    """The vLLM launch in one simple command, if it is one.

    Recognises `vllm serve`, `python -m vllm.entrypoints.openai.api_server`, `python -m
    huggingfaceserver` (KServe), `docker run ... vllm/vllm-openai[:tag] ARGS` and wrappers (exec,
    env, nohup, uv run). With `implicit_vllm` (a container whose image's entrypoint is vLLM),
    plain arguments are the engine arguments.
    """
    w = _unwrapped(list(words))
    if not w:
        return None
    head = w[0].value.rsplit("/", 1)[-1]
    if head == "vllm" and len(w) > 1 and w[1].value == "serve":
        return Launch(w[0], tuple(w[2:]))
    if _PY.match(w[0].value):
        return _python_module_launch(w)
    if head in ("docker", "podman", "nerdctl") and len(w) > 1 and w[1].value == "run":
        return _container_launch(w)
    if (head == "docker-compose" and len(w) > 1 and w[1].value == "run") or (
            head in ("docker", "podman") and len(w) > 2 and w[1].value == "compose" and w[2].value == "run"):
        return _compose_run_launch(w[2 if head == "docker-compose" else 3:])
    if w[0].unknown and _VLLM_VARIABLE.fullmatch(w[0].value) and len(w) > 1 and w[1].value == "serve":
        return Launch(w[0], tuple(w[2:]))  # "$VLLM" serve, "${VLLM_BIN}" serve: the binary in a variable
    if implicit_vllm:
        return Launch(w[0], tuple(w))
    return None


# A variable that holds the vllm binary ("$VLLM", "${VLLM_BIN}", "$VLLM_CMD"), set outside the script.
_VLLM_VARIABLE = re.compile(r"\$\{?\w*vllm\w*\}?", re.I)
# `docker compose run` options that take a value (the others are switches).
_COMPOSE_RUN_VALUED = frozenset({"-e", "--env", "--env-from-file", "-v", "--volume", "-p", "--publish", "--name",
                                 "-w", "--workdir", "--entrypoint", "-u", "--user", "-l", "--label", "--pull",
                                 "--cap-add", "--cap-drop"})


def _compose_run_launch(w: list[Tok]) -> Launch | None:
    """`docker compose run [opts] SERVICE COMMAND...`: the launch in the command that replaces the service's;
    a run with no command runs the service's own, which is the compose file's launch."""
    i = 0
    while i < len(w) and w[i].value.startswith("-"):
        i += 1 if "=" in w[i].value or w[i].value not in _COMPOSE_RUN_VALUED else 2
    rest = w[i + 1:]
    return find_launch(rest) if rest else None


def _unwrapped(w: list[Tok]) -> list[Tok]:
    """The command after its wrappers: assignments, exec/nohup/sudo/..., `env [-opts] [NAME=value]`, `uv run`."""
    i = 0
    while i < len(w):
        v = w[i].value
        if _ASSIGN.match(v) or v in _WRAPPERS:
            i += 1
        elif v == "env":
            i += 1
            while i < len(w) and (w[i].value.startswith("-") or _ASSIGN.match(w[i].value)):
                i += 1
        elif v == "uv" and i + 1 < len(w) and w[i + 1].value == "run":
            i += 2
            while i < len(w) and w[i].value.startswith("-"):
                i += 1
        else:
            break
    return w[i:]


def _python_module_launch(w: list[Tok]) -> Launch | None:
    """`python [-opts] -m MODULE ARGS`: vLLM's OpenAI server or KServe's huggingfaceserver."""
    for j in range(1, len(w) - 1):
        if w[j].value == "-m":
            mod = w[j + 1].value
            if mod in _OPENAI_MODULES:
                return Launch(w[0], tuple(w[j + 2:]))
            if mod == "huggingfaceserver":
                return Launch(w[0], tuple(w[j + 2:]), "kserve-hf")
            return None
        if not w[j].value.startswith("-"):
            return None
    return None


def _container_launch(w: list[Tok]) -> Launch | None:
    """`docker run [-opts] IMAGE ARGS` with a vLLM image: the launch inside it, or the image's entrypoint."""
    for j in range(2, len(w)):
        if not w[j].value.startswith("-") and VLLM_IMAGE.search(w[j].value) \
                and not w[j - 1].value.startswith(("-e", "--env", "-v", "--volume", "--name", "-p")):
            rest = w[j + 1:]
            inner = find_launch(rest) if rest else None
            return replace(inner, image=w[j]) if inner else Launch(w[j], tuple(rest), image=w[j])
    return None
