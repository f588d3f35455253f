"""Dockerfiles -> the launch the image runs, with positions (any file whose content is a Dockerfile).

Docker's semantics, as hadolint reads them: instructions are case-insensitive, `\\` continues a
line (comment lines inside a continuation are dropped), a JSON array is the exec form and anything
else the shell form (`/bin/sh -c "..."`). The container runs the last stage's ENTRYPOINT with its
CMD appended, exec form; a shell-form ENTRYPOINT ignores CMD; setting ENTRYPOINT drops the CMD a
base image had. A stage built `FROM` another stage of the file inherits its ENTRYPOINT, CMD and
ENV; one built `FROM vllm/vllm-openai:TAG` inherits that image's entrypoint (the vLLM server), so
its CMD holds engine arguments, and the tag names the release. Launch scripts the build writes
(`RUN echo '...vllm serve...' > /start.sh`, `RUN cat > start.sh <<EOF`, `COPY <<EOF start.sh`) are
launches at the line they are written on.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from kvplan.lint.argv import ArgItem, launches_from_argv, launches_in_script
from kvplan.lint.extracted import Extracted, LineIndex, Site
from kvplan.lint.shell import VLLM_IMAGE, Pos, ShellSyntaxError, Tok, VarValue, commands, expand, lex

_INSTRUCTIONS = frozenset({"FROM", "RUN", "CMD", "ENTRYPOINT", "ENV", "ARG", "COPY", "ADD", "WORKDIR", "EXPOSE",
                           "LABEL", "USER", "VOLUME", "HEALTHCHECK", "SHELL", "STOPSIGNAL", "ONBUILD",
                           "MAINTAINER"})
_INSTRUCTION = re.compile(r"^[ \t]*([A-Za-z]+)(?=[ \t]|$)")
_FROM = re.compile(r"^\s*FROM\s+(?:--platform=\S+\s+)?(\S+)(?:\s+AS\s+(\S+))?\s*$", re.I)
_HEREDOC = re.compile(r"<<(-?)[\"']?([A-Za-z_]\w*)[\"']?")
_ARG_REF = re.compile(r"\$(?:\{([A-Za-z_]\w*)(?::?-([^}]*))?\}|([A-Za-z_]\w*))")
_WRITES_SCRIPT = re.compile(r"^(?:echo|printf)$")
_LAUNCH_HINT = re.compile(r"vllm\s+serve|vllm\.entrypoints|huggingfaceserver")


def is_dockerfile(text: str) -> bool:
    """The text is a Dockerfile: its first instruction (after comments and parser directives) is FROM or
    ARG, every line that starts an instruction names one Docker knows, and a FROM line is there."""
    first = None
    count = 0
    for line in text.splitlines()[:400]:
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        m = _INSTRUCTION.match(line)
        if first is None:
            if m is None or m.group(1).upper() not in ("FROM", "ARG"):
                return False
            first = m.group(1).upper()
        if m and m.group(1).upper() in _INSTRUCTIONS and not line[:1].isspace():
            count += 1
    return first is not None and count >= 2 and any(_FROM.match(x) for x in text.splitlines())


@dataclass
class _Instruction:
    """One logical instruction: its keyword, its argument text and where each character of it is."""

    keyword: str
    text: str
    pos: Pos
    line: int
    heredocs: list[tuple[str, Pos, int]] = field(default_factory=list)
    """Here-documents it carries: (body, positions, first line)."""


def _instructions(text: str) -> list[_Instruction]:
    """Logical instructions, continuation lines joined; positions of every argument character kept."""
    li = LineIndex(text)
    lines = text.split("\n")
    starts = li.starts
    out: list[_Instruction] = []
    i = 0
    while i < len(lines):
        m = _INSTRUCTION.match(lines[i])
        if not lines[i].strip() or lines[i].lstrip().startswith("#") or m is None:
            i += 1
            continue
        first = i
        chars: list[str] = []
        offsets: list[int] = []
        seg_start = starts[i] + m.end()
        seg = lines[i][m.end():]
        while True:
            body = seg.rstrip("\r")
            cont = body.rstrip().endswith("\\")
            if cont:
                body = body.rstrip()[:-1]
            chars += list(body)
            offsets += range(seg_start, seg_start + len(body))
            i += 1
            if not cont:
                break
            while i < len(lines) and lines[i].lstrip().startswith("#"):  # comments inside a continuation
                i += 1
            if i >= len(lines):
                break
            chars.append(" ")
            offsets.append(starts[i])
            seg_start, seg = starts[i], lines[i]
        joined = "".join(chars)
        lead = len(joined) - len(joined.lstrip())
        joined, offsets = joined[lead:], offsets[lead:]
        end = offsets[-1] + 1 if offsets else seg_start

        def pos(k: int, offsets: list[int] = offsets, end: int = end) -> tuple[int, int]:
            return li.pos(offsets[k] if k < len(offsets) else end)
        ins = _Instruction(m.group(1).upper(), joined.rstrip(), pos, first + 1)
        for hd in _HEREDOC.finditer(joined):  # bodies follow the instruction, up to their delimiter line
            body_start = i
            while i < len(lines) and (lines[i].strip() if hd.group(1) else lines[i].rstrip("\r")) != hd.group(2):
                i += 1
            body = "\n".join(lines[body_start:i])
            base = starts[body_start] if body_start < len(starts) else len(text)
            ins.heredocs.append((body, _from(li, base), body_start + 1))
            i += 1
        out.append(ins)
    return out


def _from(li: LineIndex, base: int) -> Pos:
    """Positions of text that starts `base` characters into the file."""
    return lambda k: li.pos(base + k)


Word = tuple[Tok, Pos]
"""An exec-form word and where each of its characters is (a JSON string may span continuation lines)."""


def _json_array(text: str, pos: Pos) -> list[Word] | None:
    """The exec form `["a", "b"]`: each string as a token at its position; None when it is not a JSON array
    of strings (Docker then runs the text in a shell)."""
    s = text.strip()
    lead = len(text) - len(text.lstrip())
    if not (s.startswith("[") and s.endswith("]")):
        return None
    words: list[Word] = []
    i = 1
    expect_value = True
    while i < len(s) - 1:
        c = s[i]
        if c in " \t":
            i += 1
        elif c == '"' and expect_value:
            j, buf, at = i + 1, [], []
            while j < len(s) and s[j] != '"':
                at.append(lead + j)
                if s[j] == "\\" and j + 1 < len(s):
                    buf.append({"n": "\n", "t": "\t", '"': '"', "\\": "\\", "/": "/"}.get(s[j + 1], s[j + 1]))
                    j += 2
                    continue
                buf.append(s[j])
                j += 1
            if j >= len(s):
                return None
            line, col = pos(lead + i + 1)
            words.append((Tok("".join(buf), line, col, quoted=True), _at(pos, at, lead + j)))
            i, expect_value = j + 1, False
        elif c == "," and not expect_value:
            i, expect_value = i + 1, True
        else:
            return None
    return words if (words or s[1:-1].strip() == "") and not (words and expect_value) else None


def _at(pos: Pos, offsets: list[int], end: int) -> Pos:
    return lambda k: pos(offsets[k] if k < len(offsets) else end)


@dataclass
class _Stage:
    base: str
    base_tok: Tok
    entrypoint: tuple[str, list[Word], _Instruction] | None = None
    """("exec" | "shell", words, instruction)."""
    cmd: tuple[str, list[Word], _Instruction] | None = None
    env: dict[str, VarValue] = field(default_factory=dict)
    vllm_base: bool = False
    """Built from a vLLM server image (directly or through earlier stages): its entrypoint is the server."""
    image: Tok | None = None
    """The vLLM image the stage derives from (its tag names the release)."""
    build_args: dict[str, VarValue] = field(default_factory=dict)
    """ARG defaults declared in the stage (ENV values may use them; the container does not see them)."""


def _substitute_args(value: str, args: dict[str, str]) -> str:
    """`FROM vllm/vllm-openai:${VLLM_VERSION}` with the ARG defaults declared before the first FROM."""
    return _ARG_REF.sub(lambda m: args.get(m.group(1) or m.group(3) or "", m.group(2) or "") or m.group(0), value)


def _form(ins: _Instruction) -> tuple[str, list[Word]]:
    words = _json_array(ins.text, ins.pos)
    if words is not None:
        return "exec", words
    line, col = ins.pos(0)
    return "shell", [(Tok(ins.text, line, col), ins.pos)]


def _env_assignments(ins: _Instruction, env: dict[str, VarValue], build_args: dict[str, VarValue]) -> None:
    """`ENV A=1 B="x y"` and the legacy `ENV A 1`."""
    try:
        words = [t for t in lex(ins.text, ins.pos) if not t.op]
    except ShellSyntaxError:  # an unterminated quote: Docker rejects the file; its ENV is not guessed at
        return
    if len(words) >= 2 and "=" not in words[0].value:
        name = words[0].value
        env[name] = VarValue(" ".join(w.value for w in words[1:]), words[1])
        return
    for w in words:
        name, eq, _ = w.value.partition("=")
        if eq and re.fullmatch(r"[A-Za-z_]\w*", name):
            vt = w.at(len(name) + 1)
            got = expand([Tok(vt.value, vt.line, vt.col, quoted=True)], {**build_args, **env})
            value = got[0] if got else vt
            env[name] = VarValue(value.value, value, unknown=value.unknown)


def _stages(instrs: list[_Instruction]) -> list[_Stage]:
    stages: list[_Stage] = []
    by_name: dict[str, _Stage] = {}
    global_args: dict[str, str] = {}
    for ins in instrs:
        if ins.keyword == "ARG" and not stages:
            name, eq, default = ins.text.strip().partition("=")
            global_args[name.strip()] = default.strip().strip("\"'") if eq else ""
        elif ins.keyword == "FROM":
            m = _FROM.match("FROM " + ins.text)
            if m is None:
                continue
            base = _substitute_args(m.group(1), global_args)
            line, col = ins.pos(ins.text.find(m.group(1)))
            tok = Tok(base, line, col, unknown="$" in base)
            parent = by_name.get(base.lower())
            st = _Stage(base, tok)
            if parent is not None:  # FROM an earlier stage: it inherits the image configuration
                st.entrypoint, st.cmd, st.env = parent.entrypoint, parent.cmd, dict(parent.env)
                st.vllm_base, st.image = parent.vllm_base, parent.image
            elif VLLM_IMAGE.search(base) and "$" not in base:
                st.vllm_base, st.image = True, tok
            stages.append(st)
            if m.group(2):
                by_name[m.group(2).lower()] = st
        elif stages and ins.keyword == "ENTRYPOINT":
            stages[-1].entrypoint, stages[-1].cmd = (*_form(ins), ins), None  # ENTRYPOINT drops the base's CMD
        elif stages and ins.keyword == "CMD":
            stages[-1].cmd = (*_form(ins), ins)
        elif stages and ins.keyword == "ARG":  # a build argument's default, seen by later ENV values
            name, eq, default = ins.text.strip().partition("=")
            line, col = ins.pos(len(name) + 1)
            value = default.strip().strip("\"'")
            if re.fullmatch(r"[A-Za-z_]\w*", name.strip()):  # no default, or an empty one: set by the build
                stages[-1].build_args[name.strip()] = VarValue(value, Tok(
                    value, line, col + (1 if default.strip()[:1] in "\"'" else 0)), unknown=not (eq and value))
        elif stages and ins.keyword == "ENV":
            _env_assignments(ins, stages[-1].env, stages[-1].build_args)
    return stages


def _run_command(st: _Stage, out: Extracted) -> None:
    """The last stage's ENTRYPOINT + CMD as the container runs them."""
    ep, cmd = st.entrypoint, st.cmd
    env = dict(st.env)
    if ep is not None and ep[0] == "shell":  # /bin/sh -c "ENTRYPOINT": CMD is not passed
        ins = ep[2]
        for launch in launches_in_script(ins.text, ins.pos, None, env, out):
            out.sites.append(Site(launch, launch.launcher, image=launch.image or st.image))
        return
    words: list[Word] = list(ep[1]) if ep is not None else []
    if cmd is not None:
        if cmd[0] == "shell" and ep is None:  # CMD in shell form and no ENTRYPOINT: /bin/sh -c "CMD"
            ins = cmd[2]
            for launch in launches_in_script(ins.text, ins.pos, None, env, out):
                out.sites.append(Site(launch, launch.launcher, image=launch.image or st.image))
            return
        if cmd[0] == "exec":
            words += cmd[1]
        else:  # an exec ENTRYPOINT gets /bin/sh -c "CMD" appended
            t, p = cmd[1][0]
            words += [(Tok("/bin/sh", t.line, t.col), p), (Tok("-c", t.line, t.col), p), (t, p)]
    implicit = None
    if ep is None and st.vllm_base:  # the vLLM image's own entrypoint runs, CMD holds engine arguments
        implicit = st.image or st.base_tok
        if not words:
            return  # the base image's own CMD: nothing written here
    # Exec form: no shell, so `$VAR` reaches the program as written; such a word is not checked (a script for
    # `sh -c` keeps its `$VAR`s for the shell).
    items = [ArgItem(Tok(w.value, w.line, w.col, quoted=True, unknown="$" in w.value), pos=p) for w, p in words]
    for launch in launches_from_argv(None, items, env, implicit, out, yaml_list=True, k8s=False):
        out.sites.append(Site(launch, launch.launcher, image=launch.image or st.image))


def _unescaped(w: Tok) -> tuple[str, Pos]:
    """An `echo -e` / `printf` argument with its `\\n` escapes as newlines, positions kept."""
    chars: list[str] = []
    cols: list[int] = []
    k = 0
    while k < len(w.value):
        if w.value.startswith("\\n", k):
            chars.append("\n")
            cols.append(k)
            k += 2
            continue
        chars.append(w.value[k])
        cols.append(k)
        k += 1
    end = len(w.value)
    return "".join(chars), lambda i: (w.line, w.col + (cols[i] if i < len(cols) else end))


def _written_scripts(instrs: list[_Instruction], stages: list[_Stage], out: Extracted) -> None:
    """Launch scripts the build writes: `echo`/`printf` redirected into a file, and here-documents."""
    n = -1
    for ins in instrs:
        n += ins.keyword == "FROM"
        image = stages[n].image if 0 <= n < len(stages) else None
        for body, pos, _ in ins.heredocs:
            if _LAUNCH_HINT.search(body):
                for launch in launches_in_script(body, pos, None, {}, out):
                    out.sites.append(Site(launch, launch.launcher, image=launch.image or image))
        if ins.keyword != "RUN" or not _LAUNCH_HINT.search(ins.text):
            continue
        try:
            toks = lex(ins.text, ins.pos)
        except ShellSyntaxError:
            continue
        redirected = {id(toks[k - 1]) for k in range(1, len(toks)) if toks[k].op and toks[k].value in (">", ">>")}
        for words in commands(toks):
            if not words or not _WRITES_SCRIPT.match(words[0].value) or not any(
                    id(w) in redirected for w in words):
                continue
            body_words = [w for w in words[1:] if not (w.value.startswith("-") and len(w.value) <= 3)]
            for w in body_words:
                script, pos = _unescaped(w)
                if not _LAUNCH_HINT.search(script):
                    continue
                for launch in launches_in_script(script, pos, None, {}, out):
                    out.sites.append(Site(launch, launch.launcher, image=launch.image or image))


def extract_dockerfile(text: str) -> Extracted:
    """A Dockerfile: the launch its last stage runs, and launch scripts its build writes."""
    out = Extracted(kind="dockerfile")
    instrs = _instructions(text)
    stages = _stages(instrs)
    if stages:
        _run_command(stages[-1], out)
    _written_scripts(instrs, stages, out)
    return out


def dockerfile_entrypoint_is_vllm(text: str) -> tuple[bool, Tok | None]:
    """For compose `build:`: (the image's entrypoint is the vLLM server, the vLLM image it derives from)."""
    stages = _stages(_instructions(text))
    if not stages:
        return False, None
    st = stages[-1]
    if st.entrypoint is None:
        return st.vllm_base, st.image
    words = [t.value for t, _ in st.entrypoint[1]]
    if st.entrypoint[0] == "exec" and words:
        head = words[0].rsplit("/", 1)[-1]
        if head == "vllm" and words[1:2] == ["serve"]:
            return True, st.image
        if re.match(r"^python[\d.]*$", head) and "vllm.entrypoints.openai.api_server" in words:
            return True, st.image
    return False, st.image
