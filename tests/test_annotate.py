"""Annotation: append-only store, latest wins, agreement, Label Studio round trip, machine drafts
kept apart, style variants through a real images API on 127.0.0.1 (cached, costed) or offline."""

import json

import pandas as pd
import pytest
from PIL import Image

from lib.families.yesbut import variants
from lib.families.yesbut.panels import compose
from lib.io import annotation_exchange
from lib.models import load_model
from lib.models.store import CallStore
from lib.stages import annotate

from .support.openai_server import OpenAIStub


@pytest.fixture
def store(tmp_path):
    return annotate.AnnotationStore(tmp_path / "annotations.jsonl")


def test_saves_append_and_the_latest_value_wins(store):
    store.save("img1", "ana", {"difficulty": "EASY", "left_description": "a cup"})
    store.save("img1", "ana", {"difficulty": "HARD"})
    store.save("img1", "ben", {"difficulty": "MEDIUM"})
    lines = store.path.read_text().splitlines()
    assert len(lines) == 4 and json.loads(lines[0])["value"] == "EASY"  # nothing rewritten in place
    t = store.table().set_index("annotator")
    assert t.loc["ana", "difficulty"] == "HARD" and t.loc["ana", "left_description"] == "a cup"
    assert t.loc["ben", "difficulty"] == "MEDIUM"


def test_values_are_checked_against_the_schema(store):
    with pytest.raises(ValueError, match="difficulty.*EASY"):
        store.save("img1", "ana", {"difficulty": "TRIVIAL"})
    with pytest.raises(ValueError, match="unknown annotation field 'colour'"):
        store.save("img1", "ana", {"colour": "red"})
    with pytest.raises(ValueError, match="annotator"):
        store.save("img1", " ", {"difficulty": "EASY"})
    store.save(
        "img1",
        "ana",
        {
            "targets": [{"target": "cats", "sentiment": "negative", "action": "steal coffee"}],
            "intents": ["to joke"],
        },
    )
    assert store.table().iloc[0]["targets"][0]["target"] == "cats"


def test_agreement_matches_the_reference_libraries(store):
    import krippendorff
    from sklearn.metrics import cohen_kappa_score

    a = ["EASY", "EASY", "HARD", "MEDIUM", "EASY", "HARD"]
    b = ["EASY", "MEDIUM", "HARD", "MEDIUM", "EASY", "EASY"]
    for i, (x, y) in enumerate(zip(a, b)):
        store.save(f"img{i}", "ana", {"difficulty": x})
        store.save(f"img{i}", "ben", {"difficulty": y})
    row = annotate.agreement(store, fields=["difficulty"]).iloc[0]
    assert row["items"] == 6 and row["annotators"] == 2
    assert row["cohen_kappa"] == pytest.approx(cohen_kappa_score(a, b))
    codes = {"EASY": 0, "HARD": 1, "MEDIUM": 2}
    assert row["krippendorff_alpha"] == pytest.approx(
        krippendorff.alpha(
            reliability_data=[[codes[v] for v in a], [codes[v] for v in b]],
            level_of_measurement="nominal",
        )
    )


def test_label_studio_round_trip(store, tmp_path):
    store.save(
        "img1",
        "ana",
        {
            "difficulty": "EASY",
            "connected": True,
            "overall_description": "funny",
            "intents": ["to joke", "to warn"],
            "targets": [{"target": "cats"}],
        },
    )
    tasks = annotation_exchange.export_label_studio(store, {"img1": "/data/img1.png"})
    assert (
        tasks[0]["data"]["image"] == "/data/img1.png"
        and tasks[0]["annotations"][0]["completed_by"]["email"] == "ana"
    )
    other = annotate.AnnotationStore(tmp_path / "other.jsonl")
    annotation_exchange.import_label_studio(json.loads(json.dumps(tasks)), other)
    pd.testing.assert_frame_equal(other.table(), store.table())


def test_machine_drafts_are_never_mixed_with_human_rows(store, tmp_path, tiny_llava):
    img = tmp_path / "pair.png"
    compose(Image.new("RGB", (60, 60), "red"), Image.new("RGB", (60, 60), "blue")).save(img)
    store.save("pair", "ana", {"overall_description": "human words"})
    n = annotate.preannotate(
        tiny_llava, [{"id": "pair", "path": str(img)}], store, max_new_tokens=4, progress=False
    )
    assert n == 3
    assert set(store.table()["annotator"]) == {"ana"}  # human tables: no drafts
    drafts = store.latest(include_machine=True)
    assert set(drafts[drafts["annotator"] != "ana"]["source"]) == {f"machine:{tiny_llava.name}"}


def test_style_variants_through_an_images_api_are_cached_and_costed(tmp_path, monkeypatch):
    monkeypatch.setenv("VQALAB_IMAGES_KEY", "sk-img")
    pair = tmp_path / "pair.png"
    compose(Image.new("RGB", (80, 80), "red"), Image.new("RGB", (80, 80), "blue")).save(pair)
    rec = [{"id": "img-1", "name": "pair", "path": str(pair)}]
    desc = {"img-1": {"left_description": "a red square", "right_description": "a blue square"}}
    store = CallStore(tmp_path / "calls.sqlite")
    with OpenAIStub() as server:
        model = load_model(
            {
                "backend": "openai",
                "endpoint": "images",
                "name": "stub-dalle",
                "base_url": server.url,
                "api_key_env": "VQALAB_IMAGES_KEY",
                "price_per_image": 0.04,
            }
        )
        made = variants.style_variants(
            rec, desc, tmp_path / "out", model=model, store=store, progress=False
        )
        prompts = [b["prompt"] for b in server.bodies]
        costs = [resp.cost_usd for _, _, resp in store.records()]
        assert len(costs) == 4 and sum(costs) == pytest.approx(
            4 * 0.04
        )  # 2 halves x (STICK, 3D), in the call store
        assert (
            "Draw using stick figures (black silhouette against a white background) - a red square"
            in prompts
        )
        assert (
            "Draw using 3D black silhouettes against a white background - a blue square" in prompts
        )
        assert server.auth_headers == {
            "Bearer sk-img"
        }  # the key from the variable the spec names, as for chat
        again = variants.style_variants(
            rec, desc, tmp_path / "out2", model=model, store=store, progress=False
        )
        assert len(server.bodies) == 4  # cached by prompt and model: nothing paid twice
    assert [(m["left_style"], m["right_style"]) for m in made] == variants.STAGE3 + variants.STAGE4
    assert {m["stage"] for m in made} == {3, 4} and all(
        Image.open(m["path"]).width > 100 for m in made
    )
    assert {m["generator"] for m in made} == {"stub-dalle"}
    assert [Image.open(a["path"]).tobytes() for a in again] == [
        Image.open(m["path"]).tobytes() for m in made
    ]
    labelled, missing = variants.apply_labels(made, {"pair-ORIG-STICK": True, "pair-3D-3D": False})
    assert [v["label"] for v in labelled] == ["satirical", "non_satirical"] and len(missing) == 6


def test_local_stylizer_draws_black_on_white():
    import numpy as np

    photo = Image.new("RGB", (100, 100), "white")
    photo.paste(Image.new("RGB", (40, 40), (200, 30, 30)), (30, 30))
    stick = np.asarray(variants.stylize_local(photo, "STICK").convert("L"))
    assert set(np.unique(stick)) <= {0, 255} and stick[50, 50] == 0 and stick[5, 5] == 255
    with pytest.raises(ValueError, match="unknown style"):
        variants.stylize_local(photo, "WATERCOLOUR")


def test_label_studio_import_accepts_only_what_the_export_writes(tmp_path):
    store = annotate.AnnotationStore(tmp_path / "a.jsonl")
    choice = lambda field, c: {
        "from_name": field,
        "to_name": "image",
        "type": "choices",
        "value": {"choices": [c]},
    }
    good = {
        "id": 1,
        "data": {"image": "x.png", "item": "img-1"},
        "annotations": [{"completed_by": {"email": "ana"}, "result": [choice("connected", "Yes")]}],
    }
    maybe = {
        "id": 2,
        "data": {"image": "y.png", "item": "img-2"},
        "annotations": [
            {"completed_by": {"email": "ana"}, "result": [choice("connected", "Maybe")]}
        ],
    }
    with pytest.raises(
        ValueError,
        match=r"task 1 \(id=2\).*result 0: field 'connected' expects the choice 'Yes' or 'No', got 'Maybe'",
    ):
        annotation_exchange.import_label_studio([good, maybe], store)
    assert store.table()["connected"].tolist() == [
        True
    ]  # the good task before it is kept, nothing of the bad one
    with pytest.raises(ValueError, match=r"task 0 \(id=None\): malformed"):
        annotation_exchange.import_label_studio([{"annotations": []}], store)


def test_the_label_studio_config_names_every_field_as_the_export_writes_it():
    from xml.etree import ElementTree

    from lib.core.schema import FIELDS
    from lib.io.annotation_exchange import label_studio_config

    view = ElementTree.fromstring(label_studio_config())
    controls = {c.get("name"): c for c in view if c.tag in ("Choices", "TextArea")}
    assert list(controls) == [f.name for f in FIELDS]
    assert view.find("Image").get("value") == "$image" and all(
        c.get("toName") == "image" for c in controls.values()
    )
    for f in (
        FIELDS
    ):  # the result types _ls_result writes: choices for yes/no and closed fields, text otherwise
        c = controls[f.name]
        if f.kind in ("bool", "choice"):
            assert c.tag == "Choices" and [x.get("value") for x in c] == (
                ["Yes", "No"] if f.kind == "bool" else list(f.choices)
            )
        else:
            assert c.tag == "TextArea"


def test_the_stage_steps_load_once_make_variants_draw_and_export(tmp_path):
    import yaml

    out = tmp_path / "run" / "02_annotate"
    out.mkdir(parents=True)
    pair = tmp_path / "pair.png"
    compose(Image.new("RGB", (80, 80), "red"), Image.new("RGB", (80, 80), "blue")).save(pair)
    panels = [{"id": "img-1", "name": "pair", "path": str(pair), "label": "satirical", "stage": 2}]
    (tmp_path / "ann.yaml").write_text(
        yaml.safe_dump(
            [
                {
                    "item": "pair",
                    "annotator": "ana",
                    "difficulty": "EASY",
                    "left_description": "a red square",
                }
            ]
        )
    )
    cfg = annotate.AnnotateConfig(annotations_file=str(tmp_path / "ann.yaml"), stages=[3])
    assert annotate.load_annotations(cfg, out, panels) == 2
    assert annotate.load_annotations(cfg, out, panels) == 0  # the store is append-only: loaded once
    assert annotate.machine_drafts(cfg, out, panels) == 0  # no drafting model
    assert list(annotate.annotator_agreement(out)["field"]) == list(
        pd.read_csv(out / "agreement.csv")["field"]
    )
    made = annotate.variants(cfg, out, panels, call_store=CallStore(tmp_path / "calls.sqlite"))
    assert [(v["left_style"], v["right_style"]) for v in made["variants"]] == variants.STAGE3
    assert (
        made["labelled"] == []
        and len(made["unlabelled"]) == 3
        and made["source"] == "local stylizer"
    )
    assert (
        annotate.variants_figure(out, made["labelled"]) == (None, None)
        and not (out / "figures").exists()
    )
    labelled, _ = variants.apply_labels(made["variants"], {made["variants"][0]["id"]: True})
    fig, ax = annotate.variants_figure(out, labelled)
    assert fig is not None and (out / "figures" / "variants.png").exists()
    assert annotate.panel_cuts_figure(cfg, out, panels) == (None, None)  # 01 recorded no layouts
    tasks = annotate.label_studio(out, panels)
    assert (
        json.loads((out / "label_studio.json").read_text()) == tasks
        and tasks[0]["data"]["item"] == "img-1"
    )
    assert (
        out / "label_studio_config.xml"
    ).read_text() == annotation_exchange.label_studio_config()
    summary = annotate.finish(cfg, out, panels, panels, 2, 0, made)
    assert summary == json.loads((out / "summary.json").read_text())
    assert (summary["annotated_items"], summary["variants"], summary["waiting_for_a_label"]) == (
        1,
        3,
        3,
    )
