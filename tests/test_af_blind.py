"""Stage 03's blind gate: questions a text-only reader answers above ``blind_threshold`` are sent
back for new distractors or dropped, and none is kept; with the threshold off nothing changes."""

import json
import random
import re

import pandas as pd
import pytest
from PIL import Image

from lib import af
from lib.af import blind_gate, engine
from lib.af.questions import n_distractors, seeded_rng
from lib.config import ParamsError
from lib.config.stage import check_values
from lib.io import load_items
from lib.items.blind import blind_reader
from lib.models.store import CallStore

WORDS = [
    f"{a}{b}" for a in ("bra", "cle", "dro", "fen", "gal", "hor", "jun", "kel") for b in "aeiou"
]
CUE = "sure"  # the give-away word: only ever in a cued question's right option


def planted(folder, n_images: int = 40, seed: int = 0) -> tuple[list, set[str]]:
    """One intent question per image (written to ``folder``); half the right options carry the
    give-away word."""
    rng = random.Random(seed)
    skeletons, cued = [], set()
    folder.mkdir(parents=True, exist_ok=True)
    for g in range(n_images):
        Image.new("RGB", (8, 8), (g, 0, 0)).save(folder / f"m{g}.png")
        words = f"{rng.choice(WORDS)} {CUE if g % 2 == 0 else rng.choice(WORDS)}"
        skeletons.append(
            af.Skeleton(
                id=f"intent_id/m{g}",
                type="intent_id",
                question="What is the intent of this meme?",
                images=[str(folder / f"m{g}.png")],
                correct=[words],
                general_type="single",
            )
        )
        if g % 2 == 0:
            cued.add(skeletons[-1].id)
    return skeletons, cued


def stub_generator(generator, active, cfg, iteration, store, pool, stats):
    """Distractors of two random words each, new every iteration, never the give-away word."""
    out = {}
    for q in active:
        rng = seeded_rng(cfg.seed, q.skeleton["id"], iteration)
        out[q.skeleton["id"]] = [
            f"{WORDS[rng.integers(len(WORDS))]} {WORDS[rng.integers(len(WORDS))]}"
            for _ in range(n_distractors(q.skeleton, cfg))
        ]
    return out


def run_stage(
    tmp_path, monkeypatch, skeletons, name, **settings
) -> tuple[dict, list, pd.DataFrame]:
    from lib.stages import adversarial_filter as stage

    monkeypatch.setattr(stage, "skeletons_of", lambda cfg, run_folder: (skeletons, []))
    monkeypatch.setattr(engine, "generate_distractors", stub_generator)
    cfg = af.AFConfig(
        generator={"backend": "random", "seed": 5},  # named in the options' origins, never asked
        discriminators=[{"backend": "random", "seed": 3}],
        blind_model={},
        max_iterations=3,
        seed=1,
        **settings,
    )
    out = tmp_path / name / "03_adversarial_filter"
    summary = stage.run(cfg, out, store=CallStore(tmp_path / "c.sqlite"), progress=False)
    items = load_items(out / "datasets" / "adversarial")
    return summary, items, pd.read_csv(out / "iterations.csv")


def above(items, threshold: float, seed: int = 1) -> list[str]:
    scored = blind_reader(items, seed=seed)
    return list(scored.loc[scored["p_blind"] > threshold, "item_id"])


def test_the_gate_keeps_no_question_answered_blind_above_the_threshold(tmp_path, monkeypatch):
    skeletons, cued = planted(tmp_path / "images")
    _, plain, _ = run_stage(tmp_path, monkeypatch, skeletons, "off")
    leaky = above(plain, 0.5)
    assert len(leaky) >= 10 and set(leaky) <= cued  # without the gate the cued ones are kept

    summary, items, iterations = run_stage(
        tmp_path, monkeypatch, skeletons, "on", blind_threshold=0.5
    )
    assert above(items, 0.5) == [] and len(items) >= 15  # the clean questions stay
    twins = load_items(
        tmp_path / "on" / "03_adversarial_filter" / "datasets" / "adversarial_none_plus"
    )
    assert above(twins, 0.5) == []  # nor the None+ twins the stage writes beside them
    # the cued ones go (the few left are those the shrunken set no longer teaches the word by)
    assert len({i.id for i in items} & cued) <= len(cued) // 4
    gate = summary["blind_gate"]
    # the discriminators were fooled by cued questions: the reader sent them back, and since their
    # right option still says the word, the last pass dropped them
    assert gate["sent_back"] == iterations["blind_sent_back"].sum() > 0
    assert gate["dropped_at_end"] > 0 and gate["dropped_in_loop"] == 0
    assert gate["kept_max_p_blind"] <= 0.5 and gate["kept_max_p_blind_none_plus"] <= 0.5
    assert f"sent back {gate['sent_back']} accepted question(s)" in gate["note"]
    assert summary["questions"] == len(items) == len(skeletons) - gate["dropped_at_end"]
    assert {"blind_above", "blind_sent_back", "blind_dropped", "blind_scored"} <= set(iterations)


def test_the_drop_action_drops_in_the_loop(tmp_path, monkeypatch):
    skeletons, cued = planted(tmp_path / "images")
    summary, items, iterations = run_stage(
        tmp_path, monkeypatch, skeletons, "drop", blind_threshold=0.5, blind_action="drop"
    )
    gate = summary["blind_gate"]
    assert gate["dropped_in_loop"] == iterations["blind_dropped"].sum() > 0
    assert gate["sent_back"] == 0 and above(items, 0.5) == []
    assert len(items) == len(skeletons) - gate["dropped_in_loop"] - gate["dropped_at_end"]


def test_threshold_off_never_calls_the_gate_and_writes_what_it_wrote(tmp_path, monkeypatch):
    def boom(*a, **k):
        raise AssertionError("the gate ran with the threshold off")

    monkeypatch.setattr(blind_gate, "gate", boom)
    monkeypatch.setattr(blind_gate, "final_pass", boom)
    skeletons, _ = planted(tmp_path / "images", 8)
    summary, _, iterations = run_stage(tmp_path, monkeypatch, skeletons, "off")
    state = json.loads((tmp_path / "off" / "03_adversarial_filter" / "state.json").read_text())
    assert "blind_gate" not in summary and "blind" not in state
    assert not [c for c in iterations if c.startswith("blind_")]
    assert "blind_threshold" not in state["config"]  # a state saved before the gate still resumes


def test_one_image_is_no_crash_but_a_stated_reason(tmp_path, monkeypatch):
    skeletons, _ = planted(tmp_path / "images", 6)
    for s in skeletons:
        s.images = [str(tmp_path / "images" / "m0.png")]
    summary, items, _ = run_stage(tmp_path, monkeypatch, skeletons, "one", blind_threshold=0.5)
    gate = summary["blind_gate"]
    assert len(items) == len(skeletons) and gate["dropped_at_end"] == 0
    assert gate["kept_unscored"] == {"fewer than two images: nothing to hold out": len(items)}
    assert "not scored (6: fewer than two images" in gate["note"]


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"blind_threshold": 1.0}, "blind_threshold must be in [0, 1)"),
        ({"blind_threshold": -0.1}, "blind_threshold must be in [0, 1)"),
        ({"blind_threshold": 0.5, "blind_action": "skip"}, "blind_action must be 'resample'"),
    ],
)
def test_bad_blind_settings_are_refused(settings, message):
    with pytest.raises(ParamsError, match=re.escape(message)):
        check_values(af.AFConfig(**settings), "params")
