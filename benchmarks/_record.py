"""Writing a benchmark's record: ``outputs/bench/<name>.json``, also printed."""

from __future__ import annotations

import json

from lib.paths import outputs_root


def record(name: str, result: dict) -> dict:
    out = outputs_root() / "bench" / f"{name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    print(f"-> {out}")
    return result
