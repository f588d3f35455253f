"""`kvplan explore` from the console entry point: terminal or not, bad input, what lands in the terminal."""
from __future__ import annotations

import fcntl
import os
import select
import struct
import subprocess
import sys
import termios
import time

import pytest

from tests.conftest import EXAMPLES, ROOT

GPT_OSS = EXAMPLES / "gpt-oss-20b" / "config.json"
ENV = {"COLUMNS": "160", "NO_COLOR": "1", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
MAIN = [sys.executable, "-c", "from kvplan.cli.main import main; main()"]


def kvplan(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*MAIN, *args], capture_output=True, text=True, env=ENV, cwd=ROOT)


def test_explore_without_a_terminal_prints_explain_with_a_note() -> None:
    flags = ["--kv-cache-dtype", "fp8", "--kv-cache-dtype-skip-layers", "sliding_window", "--no-policy"]
    r = kvplan("explore", str(GPT_OSS), *flags)
    assert r.returncode == 0, r.stderr
    assert r.stderr == ("kvplan: explore needs a terminal (stdout is not one); printing the static `kvplan explain` "
                        "output instead.\n")
    assert r.stdout == kvplan("explain", str(GPT_OSS), *flags).stdout
    assert "1,3..23 (12) ⚑" in r.stdout and "KV401" in r.stdout


@pytest.mark.parametrize("args, message", [
    ([str(ROOT / "no" / "such" / "config.json")], "kvplan: error: path not found: "),
    ([str(GPT_OSS), "--kv-cache-dtype", "fp9"], "kvplan: error: invalid --kv-cache-dtype 'fp9'. Did you mean 'fp8'?"),
    ([str(GPT_OSS), "--tensor-parallel-size", "zero"],
     "kvplan: error: argument --tensor-parallel-size/-tp: invalid int value: 'zero'"),
    ([str(GPT_OSS), "--gpu", "h1000"], "kvplan: error: "),
    ([str(GPT_OSS), "--engine", "vllm==0.17.0"],
     "kvplan: error: --engine vllm==0.17.0: kvplan makes KV plans for vLLM 0.18.0 to"),
    ([str(GPT_OSS), "--policy", "p.yaml", "--no-policy"], "kvplan: error: --policy and --no-policy contradict"),
])
def test_explore_bad_input_is_one_line_and_exit_2(args: list[str], message: str) -> None:
    r = kvplan("explore", *args)
    assert r.returncode == 2
    assert r.stdout == ""
    assert r.stderr.count("\n") == 1 and r.stderr.startswith(message) and "Traceback" not in r.stderr


def test_plan_explain_and_the_explore_fallback_never_import_textual() -> None:
    code = ("import sys; from kvplan.cli.main import app; from typer.testing import CliRunner; "
            f"p = r'{GPT_OSS}'; "
            "rs = [CliRunner().invoke(app, [c, p, '--kv-cache-dtype', 'fp8']) for c in ('plan', 'explain', "
            "'explore')]; "
            "rs.append(CliRunner().invoke(app, ['lint', r'" + str(EXAMPLES / "deploy") + "', '--exit-zero'])); "
            "assert all(r.exit_code == 0 for r in rs), [r.output for r in rs]; "
            "heavy = sorted(m for m in sys.modules if m.split('.')[0] == 'textual'); print(heavy); assert not heavy")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stdout + r.stderr


def _read_until(fd: int, needle: bytes, buf: bytearray, timeout: float) -> bool:
    end = time.monotonic() + timeout
    while needle not in buf and time.monotonic() < end:
        ready, _, _ = select.select([fd], [], [], 0.1)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                return needle in buf
            if not chunk:
                break
            buf += chunk
    return needle in buf


def test_explore_in_a_real_terminal_prints_the_flags_after_the_app_exits() -> None:
    """A pseudo-terminal: the app draws full-screen, `w` then `p`; the flags land in the terminal afterwards."""
    pytest.importorskip("textual")
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))
    env = {k: v for k, v in ENV.items() if k != "COLUMNS"} | {"TERM": "xterm-256color"}
    proc = subprocess.Popen([*MAIN, "explore", str(GPT_OSS), "--kv-cache-dtype", "fp8", "--no-policy"],
                            stdin=slave, stdout=slave, stderr=slave, env=env, cwd=ROOT, close_fds=True)
    os.close(slave)
    buf = bytearray()
    try:
        assert _read_until(master, b"print flags", buf, 30), buf[-2000:]  # the footer is drawn
        time.sleep(0.3)
        os.write(master, b"w")
        assert _read_until(master, b"sliding_window", buf, 15), buf[-2000:]  # the totals bar's `kvplan plan` line
        os.write(master, b"p")
        end = time.monotonic() + 20
        while proc.poll() is None and time.monotonic() < end:  # keep draining: a full pty blocks the app
            _read_until(master, b"\0never", buf, 0.2)
        _read_until(master, b"sliding_window\r\n", buf, 2)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    assert proc.returncode == 0
    tail = bytes(buf).rsplit(b"\x1b[?1049l", 1)[-1].decode(errors="replace")  # after leaving the alternate screen
    assert "--kv-cache-dtype fp8 --kv-cache-dtype-skip-layers sliding_window\r\n" in tail
