"""Regenerate docs/img/explore.svg from a real `kvplan explore` session (headless Textual pilot).

    python docs/img/explore_screenshot.py

The session is the one README shows: gpt-oss-20b on a B200 with a 40 GiB KV budget, starting from
`--kv-cache-dtype fp8`; `w` skips the sliding-window layers, then the kv dtype control is switched
to int8_per_token_head by keyboard (d, enter, type, enter).
"""
from __future__ import annotations

import asyncio
import os
from pathlib import Path

from kvplan.explore.app import ExploreApp
from kvplan.explore.state import ExploreSession

ROOT = Path(__file__).resolve().parents[2]


async def main() -> None:
    os.chdir(ROOT)
    session = ExploreSession("examples/gpt-oss-20b/config.json", ["--kv-cache-dtype", "fp8"], gpu="b200",
                             kv_budget_gib=40)
    app = ExploreApp(session)
    async with app.run_test(size=(180, 48)) as pilot:
        await pilot.pause()
        await pilot.press("w")
        await pilot.press("d", "enter", *"int8_per", "enter")
        await pilot.press("escape")
        await pilot.pause()
        app.save_screenshot("explore.svg", str(ROOT / "docs" / "img"))
        await pilot.press("q")


if __name__ == "__main__":
    asyncio.run(main())
