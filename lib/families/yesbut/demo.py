"""The embedded demo's YesBut-style images: pairs of sample photographs composed side by side as
two panels, labelled satirical or not, as ``lib/data/demo/evaluation.yaml`` lists them (its
``yesbut`` block). Stage 01 collects them with the demo's photographs (:func:`lib.stages.collect.collect_demo`).
"""

from __future__ import annotations

from pathlib import Path

import yaml

from lib.core.paths import DATA
from lib.families.yesbut.panels import compose
from lib.io import load_image


def demo_pairs(photos: dict[str, str | Path], dest: str | Path) -> list[tuple[Path, dict]]:
    """The demo's two-panel images: the photograph pairs of ``lib/data/demo/evaluation.yaml``
    composed side by side (``{pair id}.png``), with their labels."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    out = []
    for r in yaml.safe_load((DATA / "demo" / "evaluation.yaml").read_text())["yesbut"]:
        path = dest / f"{r['id']}.png"
        if not path.exists():
            compose(load_image(photos[r["left"]]), load_image(photos[r["right"]]), height=256).save(
                path
            )
        out.append(
            (
                path,
                {
                    "label": "satirical" if r["satirical"] else "non_satirical",
                    "left_style": "ORIG",
                    "right_style": "ORIG",
                    "stage": 2,
                    "licence": "demo (composed from sample photographs)",
                },
            )
        )
    return out
