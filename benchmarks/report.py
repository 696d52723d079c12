"""Print a benchmark's measurements as a table and save them to benchmarks/results/<name>.json."""

import json
import os
import platform
from pathlib import Path


def report(name: str, rows: list[tuple[str, float, float | None]]) -> int:
    """rows: (measurement, seconds, target or None). Returns 1 if a target is missed, else 0."""
    print(f"{'measurement':45} {'seconds':>8} {'target':>7}")
    for measurement, seconds, target in rows:
        verdict = "" if target is None else ("ok" if seconds < target else "MISSED")
        print(f"{measurement:45} {seconds:8.1f} {'' if target is None else f'{target:.0f}':>7}  {verdict}")
    results = Path(__file__).parent / "results"
    results.mkdir(exist_ok=True)
    (results / f"{name}.json").write_text(json.dumps(
        {"machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
         "seconds": {measurement: round(s, 2) for measurement, s, _ in rows}}, indent=2) + "\n")
    return 0 if all(target is None or s < target for _, s, target in rows) else 1
