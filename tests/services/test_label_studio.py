"""Stage 02's Label Studio tasks through a real Label Studio (its own venv, SQLite, 127.0.0.1):
imported with label-studio-sdk, annotated through the API, exported, read back by VQA Lab."""

from __future__ import annotations

import json
import secrets
import subprocess
from pathlib import Path

from PIL import Image

from lib.io import AnnotationStore
from lib.io.annotation_exchange import (
    export_label_studio,
    import_label_studio,
    label_studio_config,
)

from .servers import label_studio_server

HERE = Path(__file__).parent

ANNOTATIONS = {  # item -> annotator -> values: every kind of field
    "img-a": {
        "ana": {
            "left_description": "a full cup of coffee",
            "text_in_left": True,
            "difficulty": "EASY",
            "intents": ["to joke about mornings", "to mock coffee lovers"],
            "targets": [{"target": "coffee lovers", "sentiment": "negative", "action": "mocks"}],
        },
        "ben": {"left_description": "coffee", "text_in_left": False, "difficulty": "MEDIUM"},
    },
    "img-b": {
        "ana": {
            "connected": True,
            "overall_description": "a phone at 1% battery, but a charger far away",
        }
    },
}


def test_stage_02_tasks_round_trip_through_a_real_label_studio(label_studio_python, tmp_path):
    files = tmp_path / "files"
    (files / "pairs").mkdir(parents=True)
    paths = {}
    for item, colour in (("img-a", "red"), ("img-b", "green"), ("img-c", "blue")):
        Image.new("RGB", (64, 32), colour).save(files / "pairs" / f"{item}.png")
        paths[item] = str(files / "pairs" / f"{item}.png")
    store = AnnotationStore(tmp_path / "annotations.jsonl")
    for item, by in ANNOTATIONS.items():
        for who, values in by.items():
            store.save(item, who, values)
    (tmp_path / "tasks.json").write_text(json.dumps(export_label_studio(store, paths)))
    (tmp_path / "config.xml").write_text(label_studio_config())
    token = secrets.token_hex(20)
    server = label_studio_server(
        label_studio_python, tmp_path / "ls-data", files, tmp_path / "ls.log", token
    )
    with server:
        done = subprocess.run(
            [
                label_studio_python,
                str(HERE / "label_studio_roundtrip.py"),
                server.base_url,
                token,
                str(tmp_path / "config.xml"),
                str(tmp_path / "tasks.json"),
                str(files),
                str(tmp_path / "export.json"),
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr[-3000:] + "\n" + server.tail()
    info = json.loads(done.stdout.strip().splitlines()[-1])
    assert info["tasks"] == 3 and info["item"] == "img-c"
    exported = json.loads((tmp_path / "export.json").read_text())
    by_item = {t["data"]["item"]: t for t in exported}
    assert set(by_item) == set(paths)
    # the store's annotations are in Label Studio as pre-annotations, named and intact
    held = json.loads((tmp_path / "predictions.json").read_text())
    ours = {(p["item"], p["model_version"], json.dumps(p["result"], sort_keys=True)) for p in held}
    sent = {
        (
            t["data"]["item"],
            f"vqalab:{a['completed_by']['email']}",
            json.dumps(a["result"], sort_keys=True),
        )
        for t in json.loads((tmp_path / "tasks.json").read_text())
        for a in t["annotations"]
    }
    assert ours == sent and len(sent) == 3
    # the annotation made in Label Studio comes back, credited to its user, every value typed
    back = AnnotationStore(tmp_path / "back.jsonl")
    assert import_label_studio(exported, back) == 2
    table = back.rows()
    assert set(table["item"]) == {"img-c"} and set(table["annotator"]) == {"label-studio-user-1"}
    assert dict(zip(table["field"], table["value"])) == {
        "satirical": True,
        "overall_description": "a person annotating in Label Studio",
    }
