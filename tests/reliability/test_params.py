"""Hostile and unlucky params: each refused before anything runs, with the file and key named and
a bounded message - never a raw TypeError, RecursionError or MemoryError, never a silent last-wins."""

import subprocess
import sys

import pytest

from lib.config import ParamsError, load_layer
from lib.io.provenance import redact
from lib.pipeline import execute as pipeline

COMMON = "run: r\nstages: [04_scrapbook]\n"


def _params(tmp_path, files: dict[str, str]):
    folder = tmp_path / "params"
    folder.mkdir()
    for name, text in files.items():
        (folder / name).write_text(text)
    return folder


def test_a_repeated_key_is_refused_not_last_wins(tmp_path):
    folder = _params(
        tmp_path, {"common.p.yaml": COMMON, "04_scrapbook.p.yaml": "n_sets: 1\nn_sets: 3\n"}
    )
    with pytest.raises(
        ParamsError, match=r"04_scrapbook\.p\.yaml: .*line 2: key 'n_sets' appears twice"
    ):
        pipeline.plan("p", params_dir=folder)


def test_an_alias_bomb_is_refused_at_once(tmp_path):
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [{', '.join(['*' + p] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi")
    )
    path = tmp_path / "bomb.yaml"
    path.write_text(bomb)
    assert len(bomb) < 600
    with pytest.raises(ParamsError, match=r"bomb\.yaml: .*aliases .* are not allowed"):
        load_layer(path)


def test_deep_nesting_is_a_params_error(tmp_path):
    path = tmp_path / "deep.yaml"
    path.write_text("sets: " + "[" * 50_000 + "]" * 50_000 + "\n")
    with pytest.raises(ParamsError, match=r"deep\.yaml: (nested too deeply|not valid params YAML)"):
        load_layer(path)


def test_a_wrong_type_names_file_and_key_and_the_message_stays_short(tmp_path):
    folder = _params(tmp_path, {"common.p.yaml": COMMON, "04_scrapbook.p.yaml": "canvas: [a, b]\n"})
    with pytest.raises(
        ParamsError, match=r"04_scrapbook\.p\.yaml: parameter 'canvas'\[0\] must be int"
    ):
        pipeline.plan("p", params_dir=folder)
    (folder / "04_scrapbook.p.yaml").write_text(f"n_sets: [{', '.join(['1'] * 100_000)}]\n")
    with pytest.raises(ParamsError) as e:
        pipeline.plan("p", params_dir=folder)
    assert "must be int" in str(e.value) and len(str(e.value)) < 500


@pytest.mark.parametrize("name", ["../escape", "/abs", "a/b", ".hidden"])
def test_a_scrapbook_set_name_that_is_not_a_name_is_refused_by_the_check(tmp_path, name):
    folder = _params(
        tmp_path,
        {"common.p.yaml": COMMON, "04_scrapbook.p.yaml": f"sets: {{'{name}': {{n_sets: 1}}}}\n"},
    )
    with pytest.raises(ParamsError, match=r"04_scrapbook\.p\.yaml: sets: .* is not a dataset name"):
        pipeline.plan("p", params_dir=folder)


def test_a_set_override_of_the_wrong_type_is_named(tmp_path):
    folder = _params(
        tmp_path,
        {"common.p.yaml": COMMON, "04_scrapbook.p.yaml": "sets: {train: {canvas: [a, b]}}\n"},
    )
    with pytest.raises(ParamsError, match=r"sets\.train\.canvas\[0\] must be int"):
        pipeline.plan("p", params_dir=folder)


def test_a_run_name_outside_the_outputs_is_refused_by_the_check(tmp_path):
    folder = _params(tmp_path, {"common.p.yaml": "run: ../../etc\nstages: [04_scrapbook]\n"})
    r = subprocess.run(
        [sys.executable, "-m", "lib.pipeline", "--profile", "p", "--check"],
        capture_output=True,
        text=True,
        env={"VQALAB_PARAMS": str(folder), "PATH": "/usr/bin:/bin"},
    )
    assert (
        r.returncode == 1 and "common.p.yaml: run name '../../etc' is not a plain name" in r.stderr
    )
    assert "Traceback" not in r.stderr


def test_credential_shaped_fields_are_redacted_wherever_they_sit():
    spec = {
        "backend": "openai",
        "name": "m",
        "api_key_env": "MY_KEY",
        "headers": {"Authorization": "Bearer sk-1"},
        "auth": "user:pw",
        "bearer": "sk-2",
        "key": "sk-3",
        "extra": {"x_api_key": "sk-4"},
    }
    out = redact({"models": {"m": spec}})["models"]["m"]
    assert out["api_key_env"] == "MY_KEY" and out["name"] == "m"  # a variable's name is kept
    assert {out[k] for k in ("headers", "auth", "bearer", "key")} == {"<redacted>"}
    assert out["extra"]["x_api_key"] == "<redacted>"


@pytest.mark.parametrize(
    "img", ["../outside.png", "/etc/passwd", "a/../../b.png", "C:\\\\x.png", ""]
)
def test_a_memeqa_image_path_outside_its_folder_is_refused_by_every_reader(tmp_path, img):
    import json

    from lib.af.skeletons import from_split
    from lib.families.memeqa.collect import collect_memeqa
    from lib.families.memeqa.importer import import_memeqa

    split = tmp_path / "test.json"
    split.write_text(
        json.dumps(
            [
                {
                    "id": "intent_id/1",
                    "img": img,
                    "question": "Why?",
                    "options": ["a", "b"],
                    "general_type": "single",
                    "specific_type": "x",
                    "answer_key": 0,
                }
            ]
        )
    )
    (tmp_path / "images").mkdir()
    for read in (
        lambda: collect_memeqa(split, tmp_path / "images", progress=False),
        lambda: from_split(split, tmp_path / "images"),
        lambda: import_memeqa(split),
    ):
        with pytest.raises(
            ValueError,
            match=r"test\.json: record 0 .*img must be a file name inside the images folder",
        ):
            read()


@pytest.mark.parametrize("meta", [["a"], "text", 3])
def test_an_item_whose_meta_is_not_an_object_is_refused_at_load_with_its_line(tmp_path, meta):
    import json

    from lib.io import JSONLError, load_items

    (tmp_path / "items.jsonl").write_text(
        json.dumps({"id": "ok", "task": "vqa.open", "question": "q", "answer": ["a"]})
        + "\n"
        + json.dumps(
            {"id": "bad", "task": "vqa.open", "question": "q", "answer": ["a"], "meta": meta}
        )
        + "\n"
    )
    with pytest.raises(
        (JSONLError, TypeError, ValueError),
        match=r"items\.jsonl: record 2 is not a valid Item .*meta must be an object",
    ):
        load_items(tmp_path)


def test_a_second_writer_of_a_run_fails_at_once_naming_the_holder(tmp_path):
    """Two `make stage` of one run: the second stops before writing, naming the first's PID."""
    import os

    from lib.core.paths import RunBusy, RunLock

    with RunLock(tmp_path / "run"):
        holder = subprocess.run(
            [
                sys.executable,
                "-c",
                f"from lib.core.paths import RunLock\nwith RunLock({str(tmp_path / 'run')!r}): pass",
            ],
            capture_output=True,
            text=True,
        )
        assert holder.returncode != 0 and f"being written by PID {os.getpid()}" in holder.stderr
        with pytest.raises(RunBusy), RunLock(tmp_path / "run"):
            pass
    with RunLock(tmp_path / "run"):  # released: the next writer goes ahead
        pass


def test_an_unknown_model_spec_key_is_refused_with_a_suggestion(tmp_path):
    folder = _params(
        tmp_path,
        {
            "common.p.yaml": "run: r\nstages: [06_evaluate]\n"
            "models: {vlm: {backend: hf, name: org/m, dtpye: bfloat16}}\n"
        },
    )
    with pytest.raises(
        ParamsError,
        match=r"common\.p\.yaml: models\.vlm: unknown key 'dtpye' for a \w+ model \(did you mean 'dtype'\?\)",
    ):
        pipeline.plan("p", params_dir=folder)


@pytest.mark.slow
def test_a_valid_scrapbook_type_selection_runs_its_notebook_to_the_end(tmp_path, monkeypatch):
    """types: [presence] alone is a valid 04 param: the notebook's last check must not refuse it."""
    monkeypatch.setenv("VQALAB_OUTPUTS", str(tmp_path / "outputs"))
    folder = pipeline.run(
        "smoke",
        stages=["04_scrapbook"],
        run_name="presence-only",
        progress=False,
        overrides={"04_scrapbook": {"types": ["presence"]}},
    )
    summary = (folder / "04_scrapbook" / "summary.json").read_text()
    assert '"presence"' in summary and '"counting"' not in summary


@pytest.mark.parametrize("key", ["datasets", "models"])
@pytest.mark.parametrize("name", ["../x", "/abs", "a/b"])
def test_an_evaluation_label_that_is_not_a_name_is_refused(key, name):
    from lib.stages.evaluate import EvalConfig

    values = {"datasets": {"d": "folder"}, "models": {"m": {"backend": "tiny", "name": "llava"}}}
    values[key] = {name: values[key][next(iter(values[key]))]}
    with pytest.raises(ParamsError, match=rf"06\.yaml: {key}: .* is not a plain name"):
        EvalConfig.from_params(values, source="06.yaml")


def test_a_notebook_call_refuses_the_label_the_command_line_refuses(tmp_path):
    """``lib.stages.evaluate.run(EvalConfig(...))`` from a notebook or a script is checked where the config
    is made (no params file involved): the same message as the command line's, naming the class."""
    from lib.stages import evaluate

    label = "<img src=x onerror=alert(1)>"
    with pytest.raises(ParamsError) as cli:
        evaluate.EvalConfig.from_params({"datasets": {label: "folder"}}, source="06.yaml")
    with pytest.raises(ParamsError) as call:
        evaluate.run(evaluate.EvalConfig(datasets={label: "folder"}), tmp_path / "06")
    assert str(cli.value) == "06.yaml: " + str(call.value).removeprefix("EvalConfig: ")
    assert not (tmp_path / "06").exists()  # refused before anything is written


@pytest.mark.parametrize(
    "cls, values",
    [
        ("lib.stages.evaluate.EvalConfig", {"styles": ["zero-shot"]}),
        ("lib.af.engine.AFConfig", {"combine": "any"}),
        ("lib.stages.train.TrainConfig", {"max_steps": "many"}),
    ],
)
def test_every_stage_config_made_in_python_is_checked(cls, values):
    import importlib

    module, _, name = cls.rpartition(".")
    with pytest.raises(ParamsError, match=rf"^{name}: "):
        getattr(importlib.import_module(module), name)(**values)


@pytest.mark.parametrize(
    "argv",
    [
        ["lib.stages.evaluate", "rescore", "--run", "a b"],
        ["lib.compare", "a b", "demo"],
        ["lib.stages.scrapbook", "--profile", "smoke", "--run", "x$(id)"],
    ],
)
def test_a_run_name_that_is_not_plain_is_an_error_of_every_command_not_a_traceback(argv):
    r = subprocess.run([sys.executable, "-m", *argv], capture_output=True, text=True)
    assert r.returncode == 2 and "is not a plain name" in r.stderr and "error:" in r.stderr
    assert "Traceback" not in r.stderr
