"""Stage 04's steps: notebook 04 calls them one per section, and ``run`` composes the same steps."""

import json

from lib.config import resolve
from lib.io.folders import kind_of
from lib.stages import scrapbook as stage


def test_the_stage_steps_called_one_by_one_write_what_run_writes(tmp_path):
    cfg = resolve(stage.ScrapbookConfig, "smoke", overrides={"sets": {"fresh": {"seed": 7}}}).cfg
    a, b = tmp_path / "steps" / "04_scrapbook", tmp_path / "run" / "04_scrapbook"
    stats = stage.main_dataset(cfg, a, progress=False)
    assert stats["images"] > 0 and (a / "datasets" / "scrapbook" / "items.jsonl").exists()
    fig, ax = stage.sample_figure(cfg, a)
    assert fig.axes and (a / "figures" / "samples.png").exists()
    counts, (fig, ax) = stage.question_counts(a)
    assert (
        counts["questions"].sum() == stats["questions"]
        and (a / "figures" / "question_counts.png").exists()
    )
    sets = stage.further_sets(cfg, a, progress=False)
    assert list(sets) == ["fresh"] and sets["fresh"]["folder"] == str(a / "datasets" / "fresh")
    assert stage.paper_table(cfg, a) is None  # compare_to_paper is off
    summary = stage.finish(cfg, a, stats, sets)
    ran = stage.run(cfg, b, progress=False)
    assert json.dumps(summary).replace(str(a), str(b)) == json.dumps(ran)
    for name in (
        "summary.json",
        "datasets/scrapbook/items.jsonl",
        "datasets/scrapbook/counts.csv",
        "datasets/fresh/items.jsonl",
    ):
        assert (a / name).read_text().replace(str(a), str(b)) == (b / name).read_text(), name
    assert sorted(p.relative_to(a) for p in a.rglob("*")) == sorted(
        p.relative_to(b) for p in b.rglob("*")
    )
    assert kind_of(a) == kind_of(b) == "stage 04_scrapbook"  # finish() marks it, both ways
