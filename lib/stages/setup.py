"""Stage 00 · Setup: build the embedded models, write sample images, probe every model once.

    run(SetupConfig(), out)                       # every step in order
    python -m lib.stages.setup --profile demo          # -> outputs/demo/00_setup

Notebook 00 calls the steps one per section, as :func:`run` composes them: :func:`sample_images`,
:func:`probe`, :func:`datasets`, then :func:`finish` (summary and provenance).

Run first (``make run`` does): it writes the demo's sample photographs
(:func:`lib.io.write_sample_images`), builds each model of the profile once into ``outputs/cache/``
(tiny VLMs from configs, SmolLM2 converted from GGUF), then sends a few constrained requests to
each through the call cache, so a broken environment, a wrong model path or an unreachable
endpoint shows up in seconds here instead of an hour into stage 03. It also writes the embedded
demo's evaluation datasets (``datasets/mcq``, ``datasets/vqa``, ``datasets/yesbut``).
"""

from __future__ import annotations

import random
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import pandas as pd
import yaml

from lib import config
from lib.config import cli
from lib.core.paths import DATA
from lib.families.memeqa.task import MultipleChoice
from lib.families.vqa.task import OpenVQA
from lib.families.yesbut.panels import completion_grid, compose
from lib.families.yesbut.task import Completion, Detection, Understanding
from lib.io import artifacts, dataset_info, load_image, save_dataset, write_sample_images
from lib.models import Constraint, Request, check_spec, generate, load_model
from lib.models.store import CallStore


@dataclass
class SetupConfig(config.StageConfig):
    """Which models to build and probe, and whether to write the demo's datasets."""

    STAGE: ClassVar[str] = artifacts.SETUP
    # In a profile, ``models`` is the profile's whole registry: exactly the models its stages use.
    MODEL_ROLES: ClassVar[dict] = {"models": "*"}

    seed: int = 0  # recorded in provenance; the demo datasets' A/B placement of completion options
    models: dict[str, dict] = field(
        default_factory=lambda: {
            "vlm": {"backend": "tiny", "name": "llava"},
            "llm": {"backend": "tiny", "name": "smollm2"},
        }
    )  # name -> spec
    demo_datasets: bool = (
        True  # write the embedded demo's mcq / vqa / yesbut datasets (06 evaluates them)
    )

    def check(self, source: str) -> None:
        for label, spec in self.models.items():
            check_spec(spec, f"{source}: models.{label}")

    def specs(self) -> dict[str, dict]:
        """The models to probe now: those a later stage makes (``stage:``/``run:`` paths) are left out."""
        return {k: v for k, v in self.models.items() if not artifacts.is_run_output(v.get("name"))}


def sample_images(out: str | Path) -> list[Path]:
    """Write the demo's sample photographs into ``out/images/``; returns their paths."""
    return write_sample_images(Path(out) / artifacts.SAMPLE_IMAGES)


def probe(
    cfg: SetupConfig, out: str | Path, images: list[Path], store: CallStore | None = None
) -> pd.DataFrame:
    """Build and probe every model of ``cfg`` (:func:`probe_models`) and write ``probe.csv``; one row per answer."""
    table = probe_models(cfg.specs(), images, store if store is not None else CallStore.default())
    table.to_csv(Path(out) / artifacts.PROBE, index=False)
    return table


def datasets(cfg: SetupConfig, out: str | Path) -> dict[str, Path]:
    """The embedded demo's evaluation datasets under ``out/datasets/`` (:func:`demo_datasets`) when
    ``cfg.demo_datasets`` asks for them; name -> folder."""
    return demo_datasets(Path(out) / artifacts.DATASETS, seed=cfg.seed) if cfg.demo_datasets else {}


def finish(
    cfg: SetupConfig,
    out: str | Path,
    images: list[Path],
    answers: pd.DataFrame,
    folders: dict[str, Path],
) -> dict:
    """The summary and provenance from what the steps returned (the sample images, the probe's
    answers, the datasets' folders); raises when a constrained probe answer is invalid (the
    environment is broken), after writing them."""
    out = Path(out)
    constrained = answers[answers.method.str.startswith("constrained")]
    summary = {
        "models": int(answers.model.nunique()),
        "probe_answers": len(answers),
        "constrained_invalid": int((~constrained.valid).sum()),
        "sample_images": [p.name for p in images],
        "datasets": {k: str(v) for k, v in folders.items()},
    }
    config.finish(out, artifacts.SETUP, cfg, summary)
    if summary["constrained_invalid"]:
        bad = constrained[~constrained.valid]
        raise RuntimeError(
            f"{len(bad)} constrained probe answer(s) invalid (models {sorted(set(bad.model))}): "
            f"see {out / artifacts.PROBE}"
        )
    return summary


@config.stage_run
def run(cfg: SetupConfig, out: str | Path, store: CallStore | None = None) -> dict:
    """The stage, step by step as notebook 00 runs it: sample images, the probe of every model
    (``probe.csv``), the demo datasets, summary and provenance. Raises when a constrained probe
    answer is invalid (the environment is broken)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    images = sample_images(out)
    answers = probe(cfg, out, images, store)
    return finish(cfg, out, images, answers, datasets(cfg, out))


def probe_requests(images: list[Path], vision: bool) -> list[Request]:
    """A handful of constrained questions (choices by trie and by log-likelihood, and JSON)."""
    yes_no = Constraint(choices=("yes", "no"))
    imgs = lambda i: [images[i % len(images)]] if vision else []
    return [
        Request.simple(
            "Is there a person in the image? Answer yes or no.", imgs(0), constraint=yes_no
        ),
        Request.simple(
            "Is this a photograph of a cat? Answer yes or no.", imgs(2), constraint=yes_no
        ),
        Request.simple(
            "Which colour dominates: red, green or blue?",
            imgs(1),
            constraint=Constraint(choices=("red", "green", "blue"), method="loglik"),
        ),
        Request.simple(
            "Describe the image in a few words." if vision else "Name a colour.",
            imgs(3),
            max_new_tokens=12,
        ),
    ]


def probe_models(specs: dict[str, dict], images: list[Path], store: CallStore) -> pd.DataFrame:
    """Load each model, answer the probe requests through the cache; one row per answer."""
    rows = []
    for label, spec in specs.items():
        model = load_model(spec)
        start = time.perf_counter()
        model.load()
        load_s = time.perf_counter() - start
        vision = getattr(model, "is_vlm", True)
        requests = probe_requests(images, vision)
        responses = generate(model, requests, store=store, desc=f"probe {label}")
        n_params = (
            sum(p.numel() for p in model.model.parameters())
            if getattr(model, "model", None) is not None
            else None
        )
        for req, resp in zip(requests, responses):
            rows.append(
                {
                    "model": label,
                    "backend": spec["backend"],
                    "parameters": n_params,
                    "load_s": round(load_s, 2),
                    "question": req.messages[-1]["content"][-1]["text"],
                    "raw": resp.text,
                    "parsed": resp.parsed,
                    "method": resp.method,
                    "valid": resp.valid,
                    "cached": resp.cached,
                    "latency_s": round(resp.latency_s, 3),
                }
            )
    return pd.DataFrame(rows)


# --- the embedded demo's evaluation datasets ---------------------------------------------------


def demo_datasets(out: str | Path, seed: int = 0) -> dict[str, Path]:
    """Write the demo's ``mcq``, ``yesbut`` and ``vqa`` dataset folders under ``out`` from
    ``lib/data/demo/evaluation.yaml`` and scikit-image's sample photographs; returns name -> folder.
    Completion options are placed A/B by a seeded shuffle."""
    spec = yaml.safe_load((DATA / "demo" / "evaluation.yaml").read_text())
    out = Path(out)
    # the multiple-choice set and its block in evaluation.yaml are named after its task
    mcq = MultipleChoice.name
    folders = {}
    for name in (mcq, "vqa", "yesbut"):
        folders[name] = out / name
        write_sample_images(folders[name] / "images")
    save_dataset(
        folders[mcq],
        [
            MultipleChoice.make_item(
                r["id"],
                [_image(r["image"])],
                r["question"],
                r["answer"],
                r["options"],
                r["general_type"],
                r["specific_type"],
            )
            for r in spec[mcq]
        ],
        _demo_info(f"demo-{mcq}"),
    )
    save_dataset(
        folders["vqa"],
        [
            OpenVQA.make_item(r["id"], [_image(r["image"])], r["question"], r["answers"])
            for r in spec["vqa"]
        ],
        _demo_info("demo-vqa"),
    )
    root = folders["yesbut"]
    items = _yesbut_items(root, spec["yesbut"]) + _completion_items(root, spec, seed)
    save_dataset(root, items, _demo_info("demo-yesbut"))
    return folders


def _demo_info(name: str) -> dict:
    return dataset_info(
        name,
        license="demo (scikit-image sample images)",
        provenance={"source": "lib/data/demo/evaluation.yaml"},
    )


def _image(name: str) -> str:
    """An image's path in a demo dataset folder, relative to it."""
    return f"images/{name}.png"


def _yesbut_items(root: Path, pairs: list[dict]) -> list:
    """Each pair of photographs composed into a two-panel image under ``root``: its detection item
    and, when satirical, the understanding items of its halves and of the whole."""
    items = []
    for r in pairs:
        path = _image(r["id"])
        compose(
            load_image(root / _image(r["left"])), load_image(root / _image(r["right"])), height=256
        ).save(root / path)
        meta = {
            "left": r["left"],
            "right": r["right"],
            "satirical": r["satirical"],
            **{k: r[k] for k in ("stage", "difficulty", "text") if k in r},
        }
        items.append(Detection.make_item(f"{r['id']}-detection", path, r["satirical"], meta))
        if r["satirical"]:
            for part, ref, image in (
                ("left", r["left_description"], _image(r["left"])),
                ("right", r["right_description"], _image(r["right"])),
                ("whole", r["overall_description"], path),
            ):
                items.append(
                    Understanding.make_item(f"{r['id']}-{part}", image, ref, {**meta, "part": part})
                )
    return items


def _completion_items(root: Path, spec: dict, seed: int) -> list:
    """The completion items: each pair with one half missing, its 2x2 grid under ``root`` and the
    right half and a distractor as the options, placed A/B by a shuffle seeded with ``seed``."""
    pairs = {r["id"]: r for r in spec["yesbut"]}
    photo = lambda name: load_image(root / _image(name))
    rng = random.Random(seed)
    items = []
    for c in spec["completion"]:
        pair = pairs[c["pair"]]
        correct = pair["right"] if c["missing"] == "but" else pair["left"]
        options = [correct, c["distractor"]]
        rng.shuffle(options)
        path = _image(c["id"])
        completion_grid(
            photo(pair["left"]),
            photo(pair["right"]),
            photo(options[0]),
            photo(options[1]),
            missing=c["missing"],
            cell=192,
        ).save(root / path)
        items.append(
            Completion.make_item(
                c["id"],
                path,
                options.index(correct),
                {"pair": c["pair"], "missing": c["missing"], "options": options},
            )
        )
    return items


if __name__ == "__main__":
    sys.exit(
        cli.main(
            "python -m lib.stages.setup",
            SetupConfig,
            run,
            description="Stage 00: build and probe the models.",
        )
    )
