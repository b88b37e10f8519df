"""Numbers are generated, never typed: benchmark records carry their date, commit and machine; the
publish step copies them where the documentation reads them; the generated pages read the config
classes, the records and the papers' values from the code (benchmarks/pages.py, benchmarks/publish.py)."""

import dataclasses
import json
import os

import pytest

from benchmarks import _record, pages, publish
from lib import analysis
from lib.scrapbook import paper as sb


def test_a_record_says_when_on_what_commit_and_on_what_machine(monkeypatch, tmp_path):
    monkeypatch.setenv("VQALAB_OUTPUTS", str(tmp_path))
    written = _record.record("demo", {"speedup": 2.0}, _record.host_state())
    assert written["date"] and written["command"] == "make bench" and written["benchmark"] == "demo"
    assert set(written["commit"]) == {"sha", "dirty"}
    m = written["machine"]
    assert m["cpu_model"] and m["cores"] == os.cpu_count() and isinstance(m["gpu"], list)
    assert _record.stamp("gpu")["command"] == "make gpu-check"


def test_publish_copies_records_and_dates_an_undated_one(tmp_path):
    source, target = tmp_path / "bench", tmp_path / "records"
    source.mkdir()
    (source / "old.json").write_text(json.dumps({"x": 1, "machine": {"cores": 2}}))
    (source / "new.json").write_text(json.dumps({"x": 2, "date": "2026-01-01T00:00:00+00:00", "commit": {"sha": "ab"}}))
    publish.publish_bench(source, target)
    old, new = (json.loads((target / f"{n}.json").read_text()) for n in ("old", "new"))
    assert old["date"] and "modification time" in old["date_from"] and old["commit"] is None
    assert new["date"] == "2026-01-01T00:00:00+00:00" and "date_from" not in new


@pytest.mark.parametrize("stage", sorted(pages.stage_configs()))
def test_a_stage_page_lists_every_field_of_its_config_class(stage):
    """The params table is the dataclass: every field, with its default, and nothing else."""
    cls = pages.stage_configs()[stage]
    table = pages.params_markdown(stage)
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    assert [r.split("`")[1] for r in rows] == [f.name for f in dataclasses.fields(cls)]
    defaults = cls.defaults()
    for row, f in zip(rows, dataclasses.fields(cls)):
        if f.name in defaults and not isinstance(defaults[f.name], (dict, list)):
            assert pages._cell(defaults[f.name]) in row, (stage, f.name)


def test_the_field_comments_are_the_sources():
    from lib.train import TrainConfig

    notes = pages.field_comments(TrainConfig)
    assert notes["max_steps"].startswith("the budget: in steps")
    assert notes["focus_steps"].startswith("only on questions")  # a two-line comment stays with its fields
    assert notes["focus_targets"].startswith("curriculum")


def test_the_performance_page_says_which_records_are_missing(tmp_path):
    (tmp_path / "foundation.json").write_text(json.dumps({
        "hf_batch_speedup": 5.0, "targets": {"hf_batch_speedup": 4, "cache_speedup": 50}, "meets_targets": True,
        "date": "2026-01-01T00:00:00+00:00", "commit": {"sha": "0123456789abcdef", "dirty": False},
        "machine": {"cpu_model": "CPU X", "cores": 8, "gpu": ["H100, 80 GiB"], "platform": "Linux"}}))
    page = pages.performance_markdown(tmp_path)
    section = page.split("## `foundation`")[1].split("## `")[0]
    assert "`0123456789`" in section and "CPU X, 8 cores, GPU: H100, 80 GiB" in section and "2026-01-01" in section
    assert "| `hf_batch_speedup` | &gt;= 4 | `5.0` |" in section  # a cell's text escaped (lib.htmlsafe.md_cell)
    assert "| `cache_speedup` | &gt;= 50 | (no figure of that name in the record) |" in section
    assert "No record yet for `judge` — run `make bench`" in page
    assert "No record yet for `gpu` — run `make gpu-check`" in page


def test_a_record_that_names_its_figures_leads_with_them(tmp_path):
    (tmp_path / "scrapbook_eval.json").write_text(json.dumps({
        "figures": [{"figure": "rescore of all questions", "value": 45.7, "unit": "s", "target": "<= 60 s", "met": True},
                    {"figure": "peak RSS", "value": 800, "unit": "MB", "target": "<= 696 MB", "met": False}],
        "curve": [{"n": 2000, "peak_rss_mb": 259}], "meets_targets": False, "date": "2026-01-01T00:00:00+00:00"}))
    section = pages.performance_markdown(tmp_path).split("## `scrapbook_eval`")[1].split("## `")[0]
    assert "| rescore of all questions | &lt;= 60 s | `45.7` s | yes |" in section
    assert "| peak RSS | &lt;= 696 MB | `800` MB | **no** |" in section
    assert section.index("rescore of all questions") < section.index('??? note "Every field of the record"')
    assert "    | `curve[0].peak_rss_mb` |  | `259` |" in section  # the rest, folded below


def test_every_committed_benchmark_record_belongs_to_a_benchmark():
    names = {pages.record_name(m) for m in pages.benchmark_names()}
    for path in pages.RECORDS.glob("*.json"):
        assert path.stem in names, f"{path}: no benchmarks/*.py writes it"
        assert json.loads(path.read_text()).get("date"), f"{path}: a record without a date"


def _paper_values() -> dict[tuple[str, str], float]:
    """(paper, quantity label) -> the paper's value, as the code holds it now."""
    out = {("Scrapbook", "images (section 5.2.3)"): sb.IMAGES}
    for qtype, n in {**sb.TYPES, "total": sb.QUESTIONS}.items():
        out["Scrapbook", f"{qtype} questions, one form (section 5.2.3)"] = n
    for table, level, concept, value, subgroup, n in sb.TABLES_5_6:
        out["Scrapbook", f"Table {table}: level {level} {concept} {value}, subgroup {subgroup}"] = n
    out["Scrapbook", "absurd share of the questions (Table 8: 1 - non-absurd / full)"] = \
        round(1 - sb.TABLE8["non-absurd"] / sb.TABLE8["full"], 3)
    for name, spec in analysis.papers().items():
        for q in spec.get("stated", {}).values():
            out[name, analysis.stated_label(q)] = q["value"]
    return out


def test_the_published_reproduction_matches_the_papers_values_in_the_code():
    """A paper value in docs/records/reproduction.json that the code no longer holds means the record
    is stale: run the command it names again and publish it (python -m benchmarks.publish reproduction RUN)."""
    if not pages.REPRODUCTION.exists():
        pytest.skip("no reproduction record published yet")
    values = _paper_values()
    record = json.loads(pages.REPRODUCTION.read_text())
    for name, entry in record["papers"].items():
        assert entry["command"] and entry["date"] and entry["commit"], name
        for row in entry["rows"]:
            if row["paper_value"] is None:  # a drawn figure: ours only
                continue
            key = (name, row["quantity"])
            assert key in values, f"{key}: the code has no such paper value any more; republish"
            assert row["paper_value"] == pytest.approx(values[key]), key


def test_the_reproduction_page_renders_records_and_says_what_is_missing(tmp_path):
    record = {"papers": {"Scrapbook": {"run": "u", "stage": "04_scrapbook", "command": "make run PROFILE=unique_all",
                                       "date": "2026-01-01", "commit": {"sha": "abcdef123456", "dirty": False},
                                       "machine": "Linux", "rows": [{"quantity": "images (section 5.2.3)",
                                                                      "paper_value": 162, "ours": 162, "equal": True,
                                                                      "note": ""}]}}}
    path = tmp_path / "reproduction.json"
    path.write_text(json.dumps(record))
    page = pages.reproduction_markdown(path)
    assert "| images (section 5.2.3) | 162 | 162 | yes |  |" in page and "`abcdef1234`" in page
    assert "No record yet for YesBut — run `make run PROFILE=yesbut`" in page
    assert "No record yet for MemeQA" in page


def test_an_unknown_generated_block_fails_the_build():
    with pytest.raises(ValueError, match="unknown generated block 'nope'"):
        pages.render("<!-- vqalab: nope -->", "x.md")
