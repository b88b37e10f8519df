"""Numbers are generated, never typed: benchmark records carry their date, commit and machine, and
state their targets, against which one function (benchmarks.records.meets) judges them; the publish
step copies them where the documentation reads them; the generated pages read the config classes, the
records and the papers' values from the code (scripts/docs_pages.py, benchmarks/publish.py)."""

import dataclasses
import html
import json
import os
import re
import shutil
import subprocess
import warnings

import markdown
import pytest

from benchmarks import demo_run, publish, records
from lib.core.papers import papers, stated_label
from lib.families.scrapbook import paper as sb
from scripts import docs_pages as pages

COMMITTED = sorted(records.RECORDS.glob("*.json"))


class StaleRecords(UserWarning):
    """Committed records measured on code that has changed since (listed in pytest's warnings)."""


def test_a_record_says_when_on_what_commit_and_on_what_machine(monkeypatch, tmp_path):
    monkeypatch.setenv("VQALAB_OUTPUTS", str(tmp_path))
    written = records.record("demo", {"speedup": 2.0}, records.host_state(), {"speedup": ">= 1.6"})
    assert written["date"] and written["command"] == "make bench" and written["benchmark"] == "demo"
    assert set(written["commit"]) == {"sha", "dirty"}
    m = written["machine"]
    assert m["cpu_model"] and m["cores"] == os.cpu_count() and isinstance(m["gpu"], list)
    assert records.stamp("gpu")["command"] == "make gpu-check"


def test_a_record_states_its_targets_and_its_verdict_follows_from_them(monkeypatch, tmp_path):
    monkeypatch.setenv("VQALAB_OUTPUTS", str(tmp_path))
    before = records.host_state()
    met = records.record(
        "demo", {"speedup": 2.0, "same": True}, before, {"speedup": ">= 1.6", "same": "== true"}
    )
    assert (
        met["targets"] == {"speedup": ">= 1.6", "same": "== true"} and met["meets_targets"] is True
    )
    missed = records.record(
        "demo", {"speedup": 1.5, "same": True}, before, {"speedup": ">= 1.6", "same": "== true"}
    )
    assert missed["meets_targets"] is False
    skipped = records.record("demo", {"skipped": "no server"}, before, {"speedup": ">= 1.6"})
    assert (
        skipped["targets"] == {"speedup": ">= 1.6"} and "meets_targets" not in skipped
    )  # nothing measured
    with pytest.raises(
        ValueError, match="computed here"
    ):  # a benchmark cannot hand in its own verdict
        records.record(
            "demo", {"speedup": 2.0, "meets_targets": True}, before, {"speedup": ">= 1.6"}
        )
    with pytest.raises(records.TargetError, match="no targets stated"):
        records.record("demo", {"speedup": 2.0}, before, {})
    kept = json.loads((tmp_path / "bench" / "demo.json").read_text())  # the measurement is not lost
    assert kept["speedup"] == 2.0 and "meets_targets" not in kept


def test_a_reason_is_kept_only_for_a_figure_that_misses_its_target(monkeypatch, tmp_path):
    monkeypatch.setenv("VQALAB_OUTPUTS", str(tmp_path))
    before, rule, why = records.host_state(), {"seconds": "<= 480"}, {"seconds": "training is long"}
    slow = records.record("demo", {"seconds": 600}, before, rule, why)
    assert slow["known_misses"] == why and records.unexplained_misses(slow) == []
    fast = records.record("demo", {"seconds": 300}, before, rule, why)
    assert "known_misses" not in fast and fast["meets_targets"] is True
    with pytest.raises(records.TargetError, match="no target stated for 'secs'"):
        records.record("demo", {"seconds": 600}, before, rule, {"secs": "misnamed"})


@pytest.mark.parametrize(
    "value, rule, met",
    [
        (1.6, ">= 1.6", True),
        (1.59, ">= 1.6", False),
        (2, "<= 2", True),
        (2.01, "<= 2", False),
        (1.0, "> 1", False),
        (0.9, "< 1", True),
        (0, "== 0", True),
        (1, "== 0", False),
        (True, "== true", True),
        (False, "== true", False),
        (False, "==false", True),
    ],
)
def test_a_rule_judges_its_figure(value, rule, met):
    assert records.verdict({"targets": {"x": rule}, "x": value}, "x") is met


@pytest.mark.parametrize(
    "record, match",
    [
        ({"targets": {"x": "at least 1.6"}, "x": 2.0}, "write a comparison"),
        ({"targets": {"x": ">= fast"}, "x": 2.0}, "write a comparison"),
        ({"targets": {"x": ">= NaN"}, "x": 2.0}, "write a comparison"),
        ({"targets": {"x": "== true"}, "x": 1}, "cannot judge"),  # true == 1 in Python: not here
        ({"targets": {"x": ">= 1"}, "x": True}, "cannot judge"),
        ({"targets": {"x": ">= 1"}, "x": None}, "cannot judge"),
        ({"targets": {"x": ">= true"}, "x": True}, "only compared with =="),
        ({"targets": {"y": ">= 1"}, "x": 2.0}, "names a figure the record does not contain"),
        ({"targets": {"x..y": ">= 1"}, "x": 2.0}, "not a figure's path"),
        ({"x": 2.0}, "no targets stated"),
    ],
)
def test_a_target_that_cannot_be_judged_is_an_error(record, match):
    with pytest.raises(records.TargetError, match=match):
        records.meets({"benchmark": "demo", **record})


def test_a_target_names_a_figure_by_its_path_in_the_record():
    rec = {
        "curve": [{"n": 1, "s": 0.5}, {"n": 2, "s": 70.0}],
        "three": {"above_mb": 84},
        "targets": {"curve[1].s": "<= 60", "three.above_mb": "<= 200", "curve[0].s": "<= 60"},
    }
    assert records.figure(rec, "curve[1].s") == 70.0
    assert records.verdicts(rec) == {
        "curve[1].s": False,
        "three.above_mb": True,
        "curve[0].s": True,
    }
    assert records.meets(rec) is False
    with pytest.raises(records.TargetError, match="does not contain"):
        records.figure(rec, "curve[2].s")


def check_record(path) -> None:
    """What every committed record must be: it states targets, each names a figure the record has, its
    ``meets_targets`` is what :func:`benchmarks.records.meets` gives, every target is met or listed under
    ``known_misses`` with a reason, and one measured on an uncommitted tree carries publish's ``dirty`` mark."""
    rec = json.loads(path.read_text())
    assert rec.get("targets"), f"{path}: states no targets"
    try:
        for name in rec["targets"]:
            records.figure(rec, name)
        if rec.get("skipped"):
            assert "meets_targets" not in rec, (
                f"{path}: skipped (nothing measured) but carries a verdict"
            )
            return
        verdict = records.meets(rec)
    except records.TargetError as e:
        raise AssertionError(f"{path}: {e}") from e
    assert rec.get("meets_targets") is verdict, (
        f"{path}: meets_targets is {rec.get('meets_targets')}, its figures and targets give {verdict}"
    )
    try:
        missed = records.unexplained_misses(rec)
    except records.TargetError as e:
        raise AssertionError(f"{path}: {e}") from e
    assert not missed, (
        f"{path}: misses its target(s) {missed} with no reason under known_misses: measure again"
    )
    if (rec.get("commit") or {}).get("dirty"):
        assert rec.get("dirty") is True, (
            f"{path}: measured on an uncommitted tree and not marked dirty"
        )


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: p.stem)
def test_a_committed_record_meets_its_targets_as_its_figures_say(path):
    check_record(path)


def _set_figure(rec: dict, name: str, value) -> None:
    *parents, last = [key or int(index) for key, index in records.PATH_PART.findall(name)]
    for part in parents:
        rec = rec[part]
    rec[last] = value


def _missing(value, rule: str):
    """A value of the figure's kind that misses ``rule``."""
    op, wanted = records.parse_rule(rule)
    if isinstance(wanted, bool):
        return not wanted
    return {">=": wanted - 1, "<=": wanted + 1, ">": wanted, "<": wanted, "==": wanted + 1}[op]


def _met_target(rec: dict) -> tuple[str, str]:
    """The first target the record meets (one it misses, with its reason, cannot be made to miss)."""
    if rec.get("skipped"):
        return next(iter(rec["targets"].items()))
    return next((n, r) for n, r in rec["targets"].items() if records.verdict(rec, n))


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: p.stem)
def test_a_figure_edited_to_miss_its_target_fails_the_check(path, tmp_path):
    """The check is live: one figure of a copy of the record moved past its target, the rest untouched."""
    committed = path.read_text()
    copy = tmp_path / path.name
    shutil.copy(path, copy)
    rec = json.loads(copy.read_text())
    name, rule = _met_target(rec)
    _set_figure(rec, name, _missing(records.figure(rec, name), rule))
    copy.write_text(json.dumps(rec))
    caught = (  # a record already missing a target it explains says the new miss by name
        "meets_targets is True, its figures and targets give False"
        if rec["meets_targets"]
        else rf"misses its target\(s\) \[{re.escape(repr(name))}\]"
    )
    with pytest.raises(AssertionError, match=caught):
        check_record(copy)
    check_record(path)  # the committed record, untouched, still passes
    assert path.read_text() == committed


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: p.stem)
def test_a_record_that_misses_a_target_fails_unless_it_says_why(path, tmp_path):
    """Consistency is not success: a copy whose figure misses its target, its verdict made to agree
    (as train.json edited to image_cache_speedup 0.5, meets_targets false would be), fails; listed
    under known_misses with a reason, it passes."""
    rec = json.loads(path.read_text())
    name, rule = _met_target(rec)
    _set_figure(rec, name, _missing(records.figure(rec, name), rule))
    rec.pop("skipped", None)
    rec["meets_targets"] = False
    copy = tmp_path / path.name
    copy.write_text(json.dumps(rec))
    with pytest.raises(
        AssertionError, match=rf"misses its target\(s\) \[{re.escape(repr(name))}\]"
    ):
        check_record(copy)
    explained = {**rec.get("known_misses", {}), name: "the promise moved; see the issue"}
    copy.write_text(json.dumps({**rec, "known_misses": explained}))
    check_record(copy)
    copy.write_text(json.dumps({**rec, "known_misses": {**explained, name: " "}}))
    with pytest.raises(AssertionError, match="maps a figure to the reason"):
        check_record(copy)


def test_a_known_miss_on_a_target_the_record_meets_is_refused():
    """A reason is for a missed target: one given for a met target (stale, once the figure
    recovered) is an error naming the record and the target, not a silent pass."""
    rec = {
        "benchmark": "judge",
        "speedup": 2.0,
        "slow": 0.5,
        "targets": {"speedup": ">= 1.5", "slow": ">= 1"},
        "known_misses": {"speedup": "slower on this host", "slow": "the prompt grew"},
    }
    with pytest.raises(
        records.TargetError, match=r"record 'judge': known_misses gives a reason for \['speedup'\]"
    ):
        records.unexplained_misses(rec)
    del rec["known_misses"]["speedup"]
    assert records.unexplained_misses(rec) == []


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: p.stem)
def test_a_committed_record_with_a_reason_for_a_met_target_fails(path, tmp_path):
    rec = json.loads(path.read_text())
    if rec.get("skipped"):
        pytest.skip("nothing measured: no verdict to explain")
    name, _ = _met_target(rec)
    copy = tmp_path / path.name
    copy.write_text(json.dumps({**rec, "known_misses": {name: "it missed once"}}))
    with pytest.raises(
        AssertionError, match=rf"reason for \[{re.escape(repr(name))}\], which it meets"
    ):
        check_record(copy)


@pytest.mark.parametrize(
    "edit, match",
    [
        (lambda rec: rec.pop("targets"), "states no targets"),
        (
            lambda rec: rec["targets"].update({"no_such_figure": ">= 1"}),
            "names a figure the record does not contain",
        ),
    ],
)
def test_a_record_without_targets_or_with_a_target_on_no_figure_fails_the_check(
    edit, match, tmp_path
):
    rec = json.loads((records.RECORDS / "servers.json").read_text())
    edit(rec)
    (tmp_path / "servers.json").write_text(json.dumps(rec))
    with pytest.raises(AssertionError, match=match):
        check_record(tmp_path / "servers.json")


def _measured(tmp_path, name: str = "judge", **over) -> dict:
    """A record as records.record writes it, into ``tmp_path/bench/<name>.json``."""
    rec = {
        "benchmark": name,
        "date": "2026-01-01T00:00:00+00:00",
        "commit": {"sha": "ab" * 20, "dirty": False},
        "command": "make bench",
        "lave_prefix_speedup": 1.9,
        "identical_outputs": True,
        "targets": {"lave_prefix_speedup": ">= 1.2", "identical_outputs": "== true"},
        "meets_targets": True,
        "machine": {"cores": 2},
        **over,
    }
    (tmp_path / "bench").mkdir(exist_ok=True)
    (tmp_path / "bench" / f"{name}.json").write_text(json.dumps(rec))
    return rec


def test_publish_copies_a_record_with_the_commit_it_was_measured_on(tmp_path):
    rec = _measured(tmp_path)
    publish.publish_bench(tmp_path / "bench", tmp_path)
    published = json.loads((tmp_path / "judge.json").read_text())
    assert published == rec and published["commit"]["sha"] == "ab" * 20 and "dirty" not in published


@pytest.mark.parametrize(
    "over, match",
    [
        ({"commit": None}, "judge.json: no commit recorded"),
        ({"commit": {"sha": None, "dirty": None}}, "judge.json: no commit recorded"),
        ({"targets": {}}, "judge.json: record 'judge': no targets stated"),
        (
            {"lave_prefix_speedup": 1.1},
            "judge.json: meets_targets is true but its figures and targets give false",
        ),
        (
            {"commit": {"sha": "ab" * 20, "dirty": True}},
            "judge.json: measured on a tree with uncommitted changes",
        ),
        (
            {"lave_prefix_speedup": 1.1, "meets_targets": False},
            r"judge.json: misses its target\(s\) lave_prefix_speedup",
        ),
    ],
)
def test_publish_refuses_a_record_and_names_its_file(tmp_path, over, match):
    _measured(tmp_path, "foundation")  # a good record beside it is not published either
    _measured(tmp_path, **over)
    with pytest.raises(SystemExit, match=match):
        publish.publish_bench(tmp_path / "bench", tmp_path)
    assert not list(tmp_path.glob("*.json"))


def test_publish_marks_a_dirty_record_when_told_and_the_page_shows_it(tmp_path, monkeypatch):
    _measured(tmp_path, commit={"sha": "ab" * 20, "dirty": True})
    publish.publish_bench(tmp_path / "bench", tmp_path, allow_dirty=True)
    published = json.loads((tmp_path / "judge.json").read_text())
    assert (
        published["dirty"] is True
        and list(published).index("dirty") == list(published).index("commit") + 1
    )
    section = pages.performance_markdown(tmp_path).split("## `judge`")[1].split("## `")[0]
    assert '!!! warning "Measured on a tree with uncommitted changes"' in section
    assert "(uncommitted changes)" in section and "| targets met | yes |" in section

    seen = {}

    def publish_bench(allow_dirty=False):  # the command line's flag reaches publish_bench
        seen["allow_dirty"] = allow_dirty
        return []

    monkeypatch.setattr(publish, "publish_bench", publish_bench)
    publish.main(["--allow-dirty"])
    assert seen == {"allow_dirty": True}


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
    from lib.stages.train import TrainConfig

    notes = pages.field_comments(TrainConfig)
    assert notes["max_steps"].startswith("the budget: in steps")
    assert notes["focus_steps"].startswith(
        "only on questions"
    )  # a two-line comment stays with its fields
    assert notes["focus_targets"].startswith("curriculum")


def test_a_markdown_cell_shows_markup_pipes_and_newlines_as_text():
    """A record's or a docstring's text in a generated table: raw HTML (which markdown passes
    through) escaped, a ``|`` and a line break kept from ending the cell or the row."""
    cell = pages.md_cell('<img src=x onerror="a">|b\r\nc')
    assert cell == "&lt;img src=x onerror=&quot;a&quot;&gt;\\|b  c"


def test_the_performance_page_says_which_records_are_missing(tmp_path):
    (tmp_path / "foundation.json").write_text(
        json.dumps(
            {
                "hf_batch_speedup": 5.0,
                "targets": {"hf_batch_speedup": ">= 4", "cache_speedup": ">= 50"},
                "meets_targets": True,
                "date": "2026-01-01T00:00:00+00:00",
                "commit": {"sha": "0123456789abcdef", "dirty": False},
                "machine": {
                    "cpu_model": "CPU X",
                    "cores": 8,
                    "gpu": ["H100, 80 GiB"],
                    "platform": "Linux",
                },
            }
        )
    )
    page = pages.performance_markdown(tmp_path)
    section = page.split("## `foundation`")[1].split("## `")[0]
    assert (
        "`0123456789`" in section
        and "CPU X, 8 cores, GPU: H100, 80 GiB" in section
        and "2026-01-01" in section
    )
    assert (
        "| `hf_batch_speedup` | &gt;= 4 | `5.0` | yes |" in section
    )  # a cell's text escaped (scripts.docs_pages.md_cell)
    assert (
        "| `cache_speedup` | &gt;= 50 | (no figure of that name in the record) | **cannot tell** |"
        in section
    )
    assert (
        "| targets met | **cannot tell**: record" in section
    )  # the verdict is meets()'s, not the stored one
    assert "No record yet for `judge` — run `make bench`" in page
    assert "No record yet for `gpu` — run `make gpu-check`" in page


def test_a_records_targets_lead_its_section_with_their_verdicts(tmp_path):
    (tmp_path / "scrapbook_eval.json").write_text(
        json.dumps(
            {
                "three_models": {"above_floor_mb": 84},
                "curve": [{"n": 2000, "peak_rss_mb": 259, "rescore_seconds": 61.0}],
                "targets": {
                    "three_models.above_floor_mb": "<= 200",
                    "curve[0].rescore_seconds": "<= 60",
                },
                "meets_targets": False,
                "date": "2026-01-01T00:00:00+00:00",
            }
        )
    )
    section = pages.performance_markdown(tmp_path).split("## `scrapbook_eval`")[1].split("## `")[0]
    assert "| targets met | **no** |" in section
    assert "| `three_models.above_floor_mb` | &lt;= 200 | `84` | yes |" in section
    assert (
        "| `curve[0].rescore_seconds` | &lt;= 60 | `61.0` | **no**{ .target-missed } — no reason stated |"
        in section
    )
    assert section.index("`curve[0].rescore_seconds` |") < section.index(
        '??? note "Every field of the record"'
    )
    assert "    | `curve[0].peak_rss_mb` | `259` |" in section  # the rest, folded below


def test_a_records_own_tables_show_under_its_targets_not_among_its_fields(tmp_path):
    timings = {
        "seconds": {"06_evaluate": 10.0},
        "parts": {"06_evaluate": {"kernel": 1.0, "setup": 2.0, "Ask <every> model": 7.0}},
    }
    (tmp_path / "demo_run.json").write_text(
        json.dumps(
            {
                "stages_seconds": 10.0,
                "tables": demo_run.stage_tables(timings),
                "targets": {"stages_seconds": "<= 240"},
                "meets_targets": True,
                "date": "2026-01-01T00:00:00+00:00",
            }
        )
    )
    section = pages.performance_markdown(tmp_path).split("## `demo_run`")[1].split("## `")[0]
    assert "**06_evaluate: 10.0 s**\n\n| part | seconds | share |" in section
    assert "| Ask &lt;every&gt; model | 7.0 | 70% |" in section  # escaped, as every cell
    assert section.index("| `stages_seconds` | &lt;= 240") < section.index("**06_evaluate")
    assert "`tables" not in section  # shown once, as tables


def test_the_committed_records_render_with_their_verdicts_and_marks():
    page = pages.performance_markdown()
    assert "cannot tell" not in page
    module_of = {pages.record_name(m): m for m in pages.benchmark_names()}
    stale_ones = {}
    for path in COMMITTED:
        rec = json.loads(path.read_text())
        section = page.split(f"## `{path.stem}`")[1].split("\n## `")[0]
        assert (
            "| targets met | yes |" if rec["meets_targets"] else "| targets met | **no** |"
        ) in section, path
        assert ("Measured on a tree with uncommitted changes" in section) is bool(
            rec.get("dirty")
        ), path
        assert ("No commit recorded" in section) is not (rec.get("commit") or {}).get("sha"), path
        try:
            stale = records.stale(rec, pages._modules()[module_of[path.stem]])
        except records.TargetError as e:  # only a shallow clone lacks a record's commit
            assert (
                "not in this clone" in str(e)
                and "| code changed since measured | unknown" in section
            )
            continue
        assert ("Stale: the code it measures changed since" in section) is (
            bool(stale) and not rec.get("dirty")
        ), path
        assert f"| code changed since measured | {'**yes**' if stale else 'no'}" in section, path
        if stale:
            stale_ones[path.stem] = stale
    if stale_ones:  # said, not failed: measuring again is `make bench STALE=1` on an idle machine
        warnings.warn(
            StaleRecords(f"stale records (make bench STALE=1): {stale_ones}"), stacklevel=2
        )


def _git(root, *args) -> str:
    return subprocess.run(
        ["git", *args], cwd=root, check=True, capture_output=True, text=True
    ).stdout.strip()


def test_a_record_is_stale_once_the_code_it_measures_changes_not_its_layout(tmp_path):
    root = tmp_path
    (root / "benchmarks").mkdir()
    (root / "lib").mkdir()
    bench = root / "benchmarks" / "b.py"
    bench.write_text("from lib.m import f\nfrom benchmarks.records import record\n")
    (root / "lib" / "m.py").write_text('def f(x):\n    """Twice x."""\n    return 2 * x\n')
    (root / "lib" / "records.py").write_text("def record():\n    return 1\n")
    _git(root, "init", "-q")
    _git(root, "add", ".")
    _git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "measured")
    rec = {"benchmark": "b", "commit": {"sha": _git(root, "rev-parse", "HEAD")}}
    assert records.measured_files(bench, root) == ["benchmarks/b.py", "lib/m.py"]
    assert records.stale(rec, bench, root) == []
    # layout, comments and docstrings do not run; the record-keeping module moves no figure
    (root / "lib" / "m.py").write_text(
        'def f(x):  # doubled\n    """Two times x."""\n\n    return (2 * x)\n'
    )
    (root / "lib" / "records.py").write_text("def record():\n    return 2\n")
    assert records.stale(rec, bench, root) == []
    (root / "lib" / "m.py").write_text("def f(x):\n    return 3 * x\n")
    assert records.stale(rec, bench, root) == ["lib/m.py"]
    (root / "lib" / "n.py").write_text("g = 1\n")
    bench.write_text("from lib.m import f\nfrom lib import n\n")
    assert records.stale(rec, bench, root) == ["benchmarks/b.py", "lib/m.py", "lib/n.py"]


def test_a_record_whose_commit_this_clone_lacks_cannot_be_called_fresh(tmp_path):
    bench = tmp_path / "benchmarks" / "b.py"
    bench.parent.mkdir()
    bench.write_text("x = 1\n")
    _git(tmp_path, "init", "-q")
    with pytest.raises(records.TargetError, match="not in this clone"):
        records.stale({"benchmark": "b", "commit": {"sha": "ab" * 20}}, bench, tmp_path)
    with pytest.raises(records.TargetError, match="no commit recorded"):
        records.stale({"benchmark": "b", "commit": {}}, bench, tmp_path)


def test_every_committed_benchmark_record_belongs_to_a_benchmark():
    names = {pages.record_name(m) for m in pages.benchmark_names()}
    for path in records.RECORDS.glob("*.json"):
        assert path.stem in names, f"{path}: no benchmarks/*.py writes it"
        assert json.loads(path.read_text()).get("date"), f"{path}: a record without a date"


def _paper_values() -> dict[tuple[str, str], float]:
    """(paper, quantity label) -> the paper's value, as the code holds it now."""
    out = {("Scrapbook", "images (section 5.2.3)"): sb.IMAGES}
    for qtype, n in {**sb.TYPES, "total": sb.QUESTIONS}.items():
        out["Scrapbook", f"{qtype} questions, one form (section 5.2.3)"] = n
    for table, level, concept, value, subgroup, n in sb.TABLES_5_6:
        out["Scrapbook", f"Table {table}: level {level} {concept} {value}, subgroup {subgroup}"] = n
    out["Scrapbook", "absurd share of the questions (Table 8: 1 - non-absurd / full)"] = round(
        1 - sb.TABLE8["non-absurd"] / sb.TABLE8["full"], 3
    )
    for name, spec in papers().items():
        for q in spec.get("stated", {}).values():
            out[name, stated_label(q)] = q["value"]
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
    record = {
        "papers": {
            "Scrapbook": {
                "run": "u",
                "stage": "04_scrapbook",
                "command": "make run PROFILE=unique_all",
                "date": "2026-01-01",
                "commit": {"sha": "abcdef123456", "dirty": False},
                "machine": "Linux",
                "rows": [
                    {
                        "quantity": "images (section 5.2.3)",
                        "paper_value": 162,
                        "ours": 162,
                        "equal": True,
                        "note": "",
                    }
                ],
            }
        }
    }
    path = tmp_path / "reproduction.json"
    path.write_text(json.dumps(record))
    page = pages.reproduction_markdown(path)
    assert "| images (section 5.2.3) | 162 | 162 | yes |  |" in page and "`abcdef1234`" in page
    assert "No record yet for YesBut — run `make run PROFILE=yesbut`" in page
    assert "No record yet for MemeQA" in page


def test_an_unknown_generated_block_fails_the_build():
    with pytest.raises(ValueError, match="unknown generated block 'nope'"):
        pages.render("<!-- vqalab: nope -->", "x.md")


def test_the_ci_benchmark_reads_each_pytest_summary_of_its_log():
    from benchmarks.ci import pytest_runs

    log = (
        "...\n=========== 2 failed, 950 passed, 23 skipped, 45 warnings in 586.12s (0:09:46) ===========\n"
        "INFO - Documentation built in 9.10 seconds\n======================== 12 passed in 180.20s ========================\n"
    )
    assert pytest_runs(log) == [
        {"passed": 950, "skipped": 23, "failed": 2, "errors": 0, "seconds": 586.12},
        {"passed": 12, "skipped": 0, "failed": 0, "errors": 0, "seconds": 180.2},
    ]


def test_publish_takes_a_known_miss_with_its_reason_and_the_page_shows_it_in_red(tmp_path):
    _measured(
        tmp_path,
        lave_prefix_speedup=1.1,
        meets_targets=False,
        known_misses={
            "lave_prefix_speedup": "the judge's prompt grew; <b>the prefix</b> is shorter"
        },
    )
    publish.publish_bench(tmp_path / "bench", tmp_path)
    section = pages.performance_markdown(tmp_path).split("## `judge`")[1].split("## `")[0]
    row = next(line for line in section.splitlines() if line.startswith("| `lave_prefix_speedup`"))
    assert "**no**{ .target-missed } — known miss: " in row
    # the reason shows as written: its quote once escaped, its markup as text
    visible = html.unescape(re.sub(r"<[^>]+>", "", markdown.markdown(row)))
    assert "known miss: the judge's prompt grew; <b>the prefix</b> is shorter" in visible
    assert "| targets met | **no** |" in section


def test_publish_never_replaces_an_idle_record_by_one_measured_under_load(tmp_path):
    idle = {"under_load": False, "before": {"1min": 0.2}, "after": {"1min": 1.0}}
    (tmp_path / "judge.json").write_text(json.dumps({**_measured(tmp_path), "load": idle}))
    _measured(tmp_path, load={**idle, "under_load": True})
    with pytest.raises(
        SystemExit, match="judge.json: measured under load, and judge.json was measured on an idle"
    ):
        publish.publish_bench(tmp_path / "bench", tmp_path)
    _measured(tmp_path, load=idle)  # idle over idle: published
    assert publish.publish_bench(tmp_path / "bench", tmp_path) == [tmp_path / "judge.json"]


@pytest.mark.parametrize(
    "services, met",
    [
        ("= 12 passed in 180.20s =", True),
        (
            "= 11 passed, 1 error in 180.20s =",
            False,
        ),  # a service that did not start fails its fixture
        ("= 11 passed, 1 skipped in 180.20s =", False),
    ],
)
def test_the_ci_record_requires_no_failure_error_or_skip(services, met, monkeypatch, tmp_path):
    from benchmarks import ci

    runs = ci.pytest_runs(f"= 980 passed in 560.00s =\n{services}\n")
    rec = {
        "benchmark": "ci",
        "exit_code": 0 if met else 1,
        "ci_seconds": 900.0,
        "make_test_seconds": runs[0]["seconds"],
        "make_test": runs[0],
        "services": runs[1],
        "targets": ci.TARGETS,
    }
    assert records.meets(rec) is met
    assert records.meets({**rec, "exit_code": 0}) is met  # the counts alone decide it too
    assert (
        records.meets({**rec, "exit_code": 2, "services": runs[0]}) is False
    )  # and the exit code alone


def test_the_ci_record_names_the_commit_ci_ran_though_the_checkout_moved_on(monkeypatch, tmp_path):
    from benchmarks import ci

    origin = tmp_path / "checkout"
    git = lambda *a: subprocess.run(  # noqa: E731
        ["git", "-C", str(origin), "-c", "user.name=t", "-c", "user.email=t@t", *a],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    (origin / ".ci").mkdir(parents=True)
    # CI as a script: the checkout gets a new commit while it runs, then two pytest summaries
    (origin / ".ci" / "run").write_text(
        f"git -C {origin} -c user.name=t -c user.email=t@t commit -q --allow-empty -m later\n"
        "echo '= 3 passed in 1.00s ='\necho '= 2 passed in 2.00s ='\n"
    )
    subprocess.run(["git", "init", "-q", str(origin)], check=True)
    git("add", ".")
    git("commit", "-q", "-m", "ran")
    ran = git("rev-parse", "HEAD")
    monkeypatch.setattr(ci, "ROOT", origin)
    monkeypatch.setenv("VQALAB_OUTPUTS", str(tmp_path / "outputs"))
    rec = ci.main()
    assert git("rev-parse", "HEAD") != ran  # the checkout moved on during the run
    assert rec["commit"] == {"sha": ran, "dirty": False}
    assert (rec["make_test"]["passed"], rec["services"]["passed"], rec["exit_code"]) == (3, 2, 0)
