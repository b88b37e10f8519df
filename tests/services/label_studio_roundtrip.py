"""Run by Label Studio's venv (its label-studio-sdk): stage 02's tasks into a real project, one
annotation submitted through the API, the project exported (and its
pre-annotations, which the JSON export names by id only).

    python label_studio_roundtrip.py URL TOKEN CONFIG.xml TASKS.json DOCUMENT_ROOT OUT.json

Task images are paths under DOCUMENT_ROOT; they become Label Studio local-file URLs. Prints the
project id and the annotated task's id as JSON."""

import json
import sys
from pathlib import Path

import httpx
from label_studio_sdk import LabelStudio

url, token, config, tasks_path, root, out = sys.argv[1:7]
root = Path(root).resolve()
ls = LabelStudio(
    base_url=url, api_key=token, httpx_client=httpx.Client(trust_env=False, timeout=60)
)
project = ls.projects.create(title="VQA Lab stage 02", label_config=Path(config).read_text())
tasks = json.loads(Path(tasks_path).read_text())
# local files are served from a storage below the document root (the root itself is refused)
folders = {str(Path(t["data"]["image"]).resolve().parent) for t in tasks}
for folder in sorted(folders):
    ls.import_storage.local.create(project=project.id, path=folder, title=Path(folder).name)
for t in tasks:
    t["data"]["image"] = "/data/local-files/?d=" + str(
        Path(t["data"]["image"]).resolve().relative_to(root)
    )
    t.pop("id", None)
    # the store's annotations go in as pre-annotations named by annotator: Label Studio would credit
    # an imported annotation to the importing user, losing who made it
    t["predictions"] = [
        {"model_version": f"vqalab:{a['completed_by']['email']}", "result": a["result"]}
        for a in t.pop("annotations", [])
    ]
ls.projects.import_tasks(id=project.id, request=tasks)
listed = list(ls.tasks.list(project=project.id))
target = next(t for t in listed if not t.total_predictions)  # one the store had no annotation for
ls.annotations.create(
    id=target.id,
    result=[
        {
            "from_name": "satirical",
            "to_name": "image",
            "type": "choices",
            "value": {"choices": ["Yes"]},
        },
        {
            "from_name": "overall_description",
            "to_name": "image",
            "type": "textarea",
            "value": {"text": ["a person annotating in Label Studio"]},
        },
    ],
)
exported = b"".join(
    ls.projects.exports.download_sync(id=project.id, export_type="JSON", download_all_tasks=True)
)
Path(out).write_bytes(exported)
# the JSON export names predictions by id only: their contents as Label Studio holds them, beside it
held = [
    {"item": t.data.get("item"), "model_version": p.model_version, "result": p.result}
    for t in listed
    for p in ls.predictions.list(task=t.id)
]
Path(out).with_name("predictions.json").write_text(json.dumps(held))
print(
    json.dumps(
        {
            "project": project.id,
            "annotated_task": target.id,
            "item": target.data.get("item"),
            "tasks": len(listed),
        }
    )
)
