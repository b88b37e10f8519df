"""The lmms-eval import is a parser with limits (issue #55): whatever a results.json or a samples line
holds - wrong types, NaN, infinity, a lone surrogate, a 150 MB line, a link to /dev/zero, escape
sequences - the user sees ``error: FILE:LINE: field X: expected ..., got ...`` (exit 2), never a
traceback, and the import folder is the previous complete one or none. The export records the
dataset's digest and the import refuses a dataset changed since; a folder of another kind is never
written into."""

from __future__ import annotations

import json
import math
import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lib.compare import runs
from lib.core.paths import ROOT
from lib.eval import foreign
from lib.eval.foreign_schema import MAX_LINE_BYTES
from lib.export.harnesses import main as export
from lib.io import manifest_fields, read_jsonl
from lib.io.digests import file_sha256
from lib.io.folders import kind_of
from lib.stages.setup import demo_datasets

LMMS_EVAL = (
    ROOT / "tests" / "fixtures" / "lmms_eval_0.7.3"
)  # a real lmms-eval run's files: see its README.md
MCQ = "20261205_163315_samples_vqalab_mcq_mcq.jsonl"
VQA = "20261205_163315_samples_vqalab_vqa_vqa_open.jsonl"
RESULTS = "20261205_163315_results.json"


@pytest.fixture(scope="module")
def exports(tmp_path_factory) -> dict:
    """The demo's mcq and vqa sets exported as the fixture's run had them (demo profile, its model)."""
    root = tmp_path_factory.mktemp("exports")
    data = demo_datasets(root / "data")
    for name in ("mcq", "vqa"):
        assert (
            export(
                [
                    "lmms-eval",
                    "--dataset",
                    str(data[name]),
                    "--out",
                    str(root / name),
                    "--profile",
                    "demo",
                    "--model",
                    "untrained",
                ]
            )
            == 0
        )
    return {"data": data, "tasks": [str(root / "mcq"), str(root / "vqa")]}


def _run(tmp_path: Path, samples=None, results=None) -> tuple[Path, Path, Path]:
    """The fixture's run copied under ``tmp_path`` with ``samples(lines)`` applied to the mcq samples'
    parsed lines and ``results(data)`` to its results.json; returns (run folder, mcq samples, results)."""
    src = tmp_path / "lmms_out"
    shutil.copytree(LMMS_EVAL, src)
    (model,) = [p for p in src.iterdir() if p.is_dir()]
    mcq, res = model / MCQ, model / RESULTS
    if samples:
        lines = samples([json.loads(line) for line in mcq.read_text().splitlines()])
        mcq.write_text("".join(json.dumps(s) + "\n" for s in lines))
    if results:
        res.write_text(json.dumps(results(json.loads(res.read_text()))))
    return src, mcq, res


def _args(src: Path, out: Path, tasks: list[str]) -> list[str]:
    """`python -m lib.compare` of an lmms-eval run, imported into ``out``, with a twin of it (the
    same run given twice is refused: a run compared with itself always agrees)."""
    return [str(src), str(_twin(src)), "--export", *tasks, "--import-to", str(out)]


def _twin(src: Path) -> Path:
    """``src`` in a hard-linked copy of the run folder (``lmms_out``) holding it, made afresh."""
    root = next(p for p in (src, *src.parents) if p.name == "lmms_out")
    twin = root.with_name("lmms_out_twin")
    shutil.rmtree(twin, ignore_errors=True)
    shutil.copytree(root, twin, symlinks=True, copy_function=os.link)
    return twin / src.relative_to(root)


MEMORY = (
    2 * 2**30
)  # the command's address space: a reader that holds a whole endless file fails fast


def _command(src: Path, out: Path, tasks: list[str]) -> subprocess.CompletedProcess:
    """The same as a user's command line, in a process of its own (its stderr and exit code)."""
    return subprocess.run(
        [sys.executable, "-m", "lib.compare", *_args(src, out, tasks)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY)),
    )


def _nothing_left(out: Path) -> None:
    """No import folder, and no half-built one beside it."""
    assert not out.exists() and not [
        p.name for p in out.parent.iterdir() if p.name.startswith(f".{out.name}.")
    ]


def _first(**fields):
    """A change of the mcq samples: ``fields`` set on its first line."""
    return lambda lines: [{**lines[0], **fields}, *lines[1:]]


def _configs(change):
    """A change of results.json: ``change(config)`` applied to the mcq task's config."""

    def apply(data):
        change(data["configs"]["vqalab_mcq_mcq"])
        return data

    return apply


NAN_TOKENS = (
    "samples",
    _first(token_counts=[{"output_tokens": math.nan}]),
    ":1: field token_counts[0].output_tokens: expected a whole number >= 0, got NaN",
)


@pytest.mark.parametrize(
    "where, change, message",
    [
        NAN_TOKENS,
        (
            "samples",
            _first(token_counts=[{"output_tokens": math.inf}]),
            ":1: field token_counts[0].output_tokens: expected a whole number >= 0, got Infinity",
        ),
        (
            "samples",
            _first(token_counts=[{"output_tokens": "eight"}]),
            ":1: field token_counts[0].output_tokens: expected a whole number >= 0, got text 'eight'",
        ),
        (
            "samples",
            _first(token_counts=[{"input_tokens": -3}]),
            ":1: field token_counts[0].input_tokens: expected a whole number >= 0, got -3",
        ),
        ("samples", _first(token_counts=8), ":1: field token_counts: expected a list, got 8"),
        (
            "samples",
            _first(invalid_rate={"id": 7, "task": "mcq"}),
            ":1: field invalid_rate.id: expected text, got 7",
        ),
        (
            "results",
            lambda d: {**d, "configs": list(d["configs"].values())},
            ": field configs: expected an object, got a list",
        ),
        (
            "results",
            lambda d: {**d, "config": [d["config"]]},
            ": field config: expected an object, got a list",
        ),
        (
            "results",
            lambda d: {**d, "results": list(d["results"].values())},
            ": field results: expected an object, got a list",
        ),
        (
            "results",
            _configs(lambda c: c["generation_kwargs"].update(max_new_tokens=math.inf)),
            ": field configs.vqalab_mcq_mcq.generation_kwargs.max_new_tokens: expected a whole number >= 1, got Infinity",
        ),
        (
            "results",
            _configs(lambda c: c["generation_kwargs"].update(temperature=math.nan)),
            ": field configs.vqalab_mcq_mcq.generation_kwargs.temperature: expected JSON without NaN or infinity, got NaN",
        ),
        (
            "results",
            lambda d: {**d, "lmms_eval_version": ["0.7"]},
            ": field lmms_eval_version: expected text, got a list",
        ),
    ],
)
def test_a_wrong_type_or_number_is_refused_naming_file_line_and_field(
    exports, tmp_path, capsys, where, change, message
):
    src, mcq, res = _run(tmp_path, **{where: change})
    out = tmp_path / "imported"
    assert runs.main(_args(src, out, exports["tasks"])) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and f"{mcq if where == 'samples' else res}{message}" in err, (
        err
    )
    _nothing_left(out)


def test_the_command_prints_an_error_not_a_traceback(exports, tmp_path):
    _, change, message = NAN_TOKENS
    src, mcq, _ = _run(tmp_path, samples=change)
    p = _command(src, tmp_path / "imported", exports["tasks"])
    assert (
        p.returncode == 2
        and p.stderr.startswith(f"error: {mcq}{message}")
        and "Traceback" not in p.stderr
    )
    _nothing_left(tmp_path / "imported")


def test_a_lone_surrogate_is_refused_and_the_previous_import_kept_whole(exports, tmp_path, capsys):
    out = tmp_path / "imported"
    good, _, _ = _run(tmp_path / "good")
    assert runs.main(_args(good, out, exports["tasks"])) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    src, mcq, _ = _run(tmp_path, samples=_first(resps="\ud800 A"))
    p = _command(src, out, exports["tasks"])
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert p.stderr.startswith(
        f"error: {mcq}:1: field resps: expected text, got text with a lone surrogate"
    )
    assert {
        p.name: p.read_bytes() for p in out.iterdir()
    } == before  # the previous import, untouched
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".imported.")]


def test_a_huge_line_and_a_link_to_dev_zero_are_refused_by_the_line_limit(exports, tmp_path):
    src, mcq, _ = _run(tmp_path)
    with mcq.open("ab") as f:  # a 150 MB line (sparse: no disk used), no newline
        f.truncate(mcq.stat().st_size + 150 * 2**20)
    p = _command(src, tmp_path / "imported", exports["tasks"])
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr[-2000:]
    assert p.stderr.startswith(f"error: {mcq}:9: a line longer than {MAX_LINE_BYTES:,} bytes")
    mcq.unlink()
    mcq.symlink_to("/dev/zero")
    p = _command(src, tmp_path / "imported", exports["tasks"])
    assert p.returncode == 2 and p.stderr.startswith(f"error: {mcq}: not a regular file"), p.stderr[
        -2000:
    ]
    _nothing_left(tmp_path / "imported")


def test_a_task_of_the_results_without_its_samples_file_is_refused(exports, tmp_path, capsys):
    src, mcq, res = _run(tmp_path)
    (mcq.parent / VQA).unlink()
    for given in (src, res):  # the run's folder, its results file: every task of the run
        assert runs.main(_args(given, tmp_path / "imported", exports["tasks"])) == 2
        err = capsys.readouterr().err
        assert f"task vqalab_vqa_vqa_open has no samples file (looked for {mcq.parent}/" in err, err
    assert (
        runs.main(_args(mcq, tmp_path / "imported", exports["tasks"][:1])) == 0
    )  # one samples file: that task alone
    capsys.readouterr()


def _changed_dataset(exports: dict, tmp_path: Path) -> tuple[Path, Path]:
    """A copy of the mcq set, exported; returns (its folder, its export folder)."""
    data, task_dir = tmp_path / "mcq", tmp_path / "mcq_tasks"
    shutil.copytree(exports["data"]["mcq"], data)
    assert (
        export(
            [
                "lmms-eval",
                "--dataset",
                str(data),
                "--out",
                str(task_dir),
                "--profile",
                "demo",
                "--model",
                "untrained",
            ]
        )
        == 0
    )
    return data, task_dir


def _rewrite(data: Path, lines: list[str]) -> None:
    """items.jsonl rewritten and its manifest with it, as a stage that makes the set again would."""
    items = data / "items.jsonl"
    items.write_text("".join(lines))
    info = json.loads((data / "dataset.json").read_text())
    info.update(
        manifest_fields(len(lines), info["num_images"], items.stat().st_size, file_sha256(items))
    )
    (data / "dataset.json").write_text(json.dumps(info))


def test_answers_changed_since_the_export_are_refused_naming_the_dataset(exports, tmp_path):
    data, task_dir = _changed_dataset(exports, tmp_path)
    assert json.loads((task_dir / "vqalab.json").read_text())["items_sha256"] == file_sha256(
        data / "items.jsonl"
    )
    lines = (data / "items.jsonl").read_text().splitlines(keepends=True)
    _rewrite(data, [lines[0].replace('"answer": [0]', '"answer": [2]'), *lines[1:]])
    src, _, _ = _run(tmp_path)
    p = _command(src, tmp_path / "imported", [str(task_dir), exports["tasks"][1]])
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert p.stderr.startswith(
        f"error: dataset mcq ({data}): items.jsonl changed since the export {task_dir}"
    )
    _nothing_left(tmp_path / "imported")


def test_an_older_export_without_the_digest_imports_with_a_warning(exports, tmp_path, capsys):
    data, task_dir = _changed_dataset(exports, tmp_path)
    info = json.loads((task_dir / "vqalab.json").read_text())
    (task_dir / "vqalab.json").write_text(
        json.dumps({k: v for k, v in info.items() if k != "items_sha256"})
    )
    src, _, _ = _run(tmp_path)
    out, tasks = tmp_path / "imported", [str(task_dir), exports["tasks"][1]]
    assert runs.main(_args(src, out, tasks)) == 0
    printed = capsys.readouterr()
    assert "paired items: 16" in printed.out
    assert f"warning: the export {task_dir} records no digest of dataset mcq" in printed.err
    assert json.loads((out / foreign.FOREIGN).read_text())["unverified_datasets"] == ["mcq"]
    # an item removed from that dataset since: refused naming the sample and the item, nothing written
    lines = (data / "items.jsonl").read_text().splitlines(keepends=True)
    _rewrite(data, lines[1:])
    assert runs.main(_args(src, tmp_path / "again", tasks)) == 2
    assert (
        f"{MCQ}:1: item 'demo-mcq-01' (mcq) is not in the dataset mcq ({data})"
        in capsys.readouterr().err
    )
    _nothing_left(tmp_path / "again")


def test_escape_sequences_from_the_results_never_reach_the_terminal(exports, tmp_path):
    evil = "\x1b]0;owned\x07\x1b[2J\x9b31m"
    src, _, res = _run(
        tmp_path,
        results=lambda d: {**d, "lmms_eval_version": f"0.7{evil}", "model_name": f"tiny{evil}"},
    )
    p = _command(src, tmp_path / "imported", exports["tasks"])
    assert p.returncode == 0 and "\\x1b]0;owned\\x07" in p.stdout, p.stderr
    assert not any(c in p.stdout + p.stderr for c in "\x1b\x07\x9b")
    data = json.loads(
        res.read_text()
    )  # in an error too: a task named with escapes, without samples
    data["configs"][f"vqalab_x{evil}"] = data["configs"]["vqalab_mcq_mcq"]
    res.write_text(json.dumps(data))
    p = _command(src, tmp_path / "other", exports["tasks"])
    assert p.returncode == 2 and "task vqalab_x\\x1b]0;owned" in p.stderr, p.stderr
    assert not any(c in p.stdout + p.stderr for c in "\x1b\x07\x9b")


def test_import_to_a_folder_of_another_kind_is_refused_and_left_untouched(
    exports, tmp_path, capsys
):
    src, _, _ = _run(tmp_path)
    mine = tmp_path / "mine"
    mine.mkdir()
    files = {
        "config.json": b'{"mine": 1}',
        "provenance.json": b"{}",
        "metrics.csv": b"a,b\n",
        "notes.txt": b"keep",
    }
    for name, content in files.items():
        (mine / name).write_bytes(content)
    assert runs.main(_args(src, mine, exports["tasks"])) == 2
    assert "not a lmms-eval import: nothing was written" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in mine.iterdir()} == files
    out = tmp_path / "imported"  # its own kind: imported, marked, imported again
    assert runs.main(_args(src, out, exports["tasks"])) == 0 and kind_of(out) == foreign.KIND
    assert (
        runs.main(_args(src, out, exports["tasks"])) == 0
        and len(list(read_jsonl(out / "predictions.jsonl"))) == 16
    )
    (out / ".vqalab.json").unlink()  # an import made before markers: recognised by its foreign.json
    assert runs.main(_args(src, out, exports["tasks"])) == 0 and kind_of(out) == foreign.KIND
    capsys.readouterr()
