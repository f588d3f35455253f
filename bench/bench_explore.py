"""How long one `kvplan explore` change takes on a 126-layer model (Llama-3.1-405B shapes).

    python bench/bench_explore.py [--runs 30]

Two numbers per control: the recompile alone (`ExploreSession` setter: flags -> `kvplan.api.compile`
-> plan, including re-reading config.json), and the whole keypress in the Textual app (headless
pilot: key -> recompile -> layers table with all 126 rows, totals, findings and side panel redrawn).
Also the ingest cost alone, which says whether caching the ingested model would matter.
Results are recorded in docs/explore.md.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Llama-3.1-405B: 126 layers, 128 query heads, 8 KV heads, head size 128.
L405B = {"hidden_size": 16384, "intermediate_size": 53248, "num_attention_heads": 128,
         "num_hidden_layers": 126, "num_key_value_heads": 8}


def write_config(folder: Path) -> Path:
    cfg = json.loads((ROOT / "examples" / "Meta-Llama-3.1-8B" / "config.json").read_text())
    cfg.update(L405B)
    path = folder / "config.json"
    path.write_text(json.dumps(cfg))
    return path


def ms(fn: Callable[[], object], runs: int) -> tuple[float, float]:
    """Median wall and median CPU milliseconds of fn (CPU time: what a busy machine does not inflate)."""
    wall, cpu = [], []
    for _ in range(runs):
        t, c = time.perf_counter(), time.process_time()
        fn()
        wall.append((time.perf_counter() - t) * 1000)
        cpu.append((time.process_time() - c) * 1000)
    return statistics.median(wall), statistics.median(cpu)


HEADER = f"{'':52s} {'wall ms':>8s} {'CPU ms':>8s}  (medians)"


def bench_session(config: Path, runs: int) -> None:
    from kvplan.explore.state import ExploreSession
    from kvplan.ingest.checkpoint import load_model_inputs

    s = ExploreSession(config, ["--kv-cache-dtype", "fp8"], gpu="h100", kv_budget_gib=60)
    flip = iter(range(10**9))
    steps: dict[str, Callable[[], object]] = {
        "kv-cache-dtype fp8 <-> int8_per_token_head": lambda: s.set_kv_cache_dtype(
            "int8_per_token_head" if next(flip) % 2 == 0 else "fp8"),
        "skip layer 0 on/off": lambda: s.toggle_layers([0]),
        "tensor-parallel-size 8 <-> 1": lambda: s.set_tensor_parallel_size(8 if next(flip) % 2 == 0 else 1),
        "max-model-len 32k <-> model": lambda: s.set_max_model_len("32k" if next(flip) % 2 == 0 else ""),
        "GPU h100 <-> h200": lambda: s.set_gpu("h200" if next(flip) % 2 == 0 else "h100"),
    }
    print("recompile (ExploreSession setter -> kvplan.api.compile), 126 layers")
    print(HEADER)
    for name, fn in steps.items():
        print(f"  {name:50s} {'{:8.1f}  {:8.1f}'.format(*ms(fn, runs))}")
    print(f"  {'ingest only (config.json -> ModelArch)':50s} "
          f"{'{:8.1f}  {:8.1f}'.format(*ms(lambda: load_model_inputs(config), runs))}")


def bench_app(config: Path, runs: int) -> None:
    from kvplan.explore.app import ExploreApp
    from kvplan.explore.state import ExploreSession

    print("keypress in the app (headless pilot: key -> handled -> screen idle and redrawn), 126 layers")
    print(HEADER)
    for view in ("grouped", "all"):
        session = ExploreSession(config, ["--kv-cache-dtype", "fp8"], gpu="h100", kv_budget_gib=60)
        app = ExploreApp(session)
        results: dict[str, tuple[list[float], list[float]]] = {"z": ([], []), "s": ([], [])}

        async def run(app: ExploreApp, view: str, results: dict[str, tuple[list[float], list[float]]]) -> None:
            async with app.run_test(size=(180, 50)) as pilot:
                await pilot.pause()
                if view == "all":
                    await pilot.press("a")  # one row per layer
                    await pilot.pause()
                for _ in range(runs):
                    for key in ("z", "s"):  # z: an unbound key, the pilot's own cost; s: skip/unskip + redraw
                        t, c = time.perf_counter(), time.process_time()
                        await pilot.press(key)
                        await pilot.pause()
                        results[key][0].append((time.perf_counter() - t) * 1000)
                        results[key][1].append((time.process_time() - c) * 1000)

        asyncio.run(run(app, view, results))
        for key, label in (("z", "unbound key (pilot baseline)"), ("s", "s: skip/unskip the selected layer")):
            wall, cpu = results[key]
            name = f"{label}, {view} view"
            print(f"  {name:50s} {statistics.median(wall):8.1f}  {statistics.median(cpu):8.1f}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=30)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        config = write_config(Path(tmp))
        bench_session(config, a.runs)
        bench_app(config, a.runs)


if __name__ == "__main__":
    main()
