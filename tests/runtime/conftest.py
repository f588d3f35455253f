"""Runtime tests run on a CUDA GPU, or on the CPU through Triton's interpreter (TRITON_INTERPRET=1)."""
from __future__ import annotations

import os
import sys

import pytest

# rt_helpers.py lives beside this file (works under any --import-mode).
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


@pytest.fixture
def device() -> str:
    """Where kernels run: cuda when available, else the CPU interpreter, else skip."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("triton")
    if torch.cuda.is_available() and not _interpreting():
        return "cuda"
    if _interpreting():
        return "cpu"
    pytest.skip("Triton kernels need CUDA or TRITON_INTERPRET=1")


@pytest.fixture
def cuda_device() -> str:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available() or _interpreting():
        pytest.skip("needs a CUDA GPU (and TRITON_INTERPRET unset)")
    return "cuda"


@pytest.fixture
def fake_gpu(monkeypatch):
    """`kvplan.runtime.bench` on any machine: torch sees a 132-SM "FakeGPU" and the copy
    bandwidth is 3 TB/s, so `run_suite`'s assembly runs with its GPU work stubbed by the test."""
    import contextlib
    import types

    torch = pytest.importorskip("torch")
    from kvplan.runtime import bench

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device", lambda device: contextlib.nullcontext())
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "FakeGPU")
    monkeypatch.setattr(torch.cuda, "get_device_properties",
                        lambda device=None: types.SimpleNamespace(multi_processor_count=132))
    monkeypatch.setattr(bench, "copy_bandwidth", lambda device: {"bytes": 2, "ms": 1.0,
                                                                 "bytes_per_s": 3e12})
    return bench
