"""Run by Label Studio's venv (its label-studio-sdk): a rating project ``python -m lib.rating`` wrote,
created in a real Label Studio, rated through the API by several annotators, and exported.

    python label_studio_rate.py URL TOKEN PROJECT_DIR RATINGS.json OUT_DIR

PROJECT_DIR holds rating_config.xml, rating_tasks.json and rating_project.json (each folder of its
``storages`` is connected as a local storage of the project). RATINGS.json: answer_id -> annotator
-> criterion -> "Yes"/"No"; each annotator becomes a user and every rating is posted as an
annotation completed by that user. Writes OUT_DIR/export.json, OUT_DIR/image.bin (the first task's image as Label
Studio serves it) and OUT_DIR/export_bad.json (after one more annotation with a choice outside the
config, which Label Studio does not validate). Prints the project, users and tasks as JSON."""

import json
import sys
from pathlib import Path

import httpx
from label_studio_sdk import LabelStudio

url, token, project_dir, ratings_path, out = sys.argv[1:6]
project_dir, out = Path(project_dir), Path(out)
about = json.loads((project_dir / "rating_project.json").read_text())
ratings = json.loads(Path(ratings_path).read_text())
client = httpx.Client(trust_env=False, timeout=60)
ls = LabelStudio(base_url=url, api_key=token, httpx_client=client)
project = ls.projects.create(
    title="VQA Lab rating", label_config=(project_dir / "rating_config.xml").read_text()
)
for n, folder in enumerate(about["storages"]):
    ls.import_storage.local.create(project=project.id, path=folder, title=f"images {n + 1}")
ls.projects.import_tasks(
    id=project.id, request=json.loads((project_dir / "rating_tasks.json").read_text())
)
tasks = {t.data["answer_id"]: t for t in ls.tasks.list(project=project.id)}
names = sorted({who for by in ratings.values() for who in by})
users = {n: ls.users.create(username=n, email=f"{n}@example.com").id for n in names}


def result(ratings_of: dict) -> list[dict]:
    return [
        {"from_name": c, "to_name": "answer", "type": "choices", "value": {"choices": [v]}}
        for c, v in ratings_of.items()
    ]


for answer_id, by in ratings.items():
    for who, ratings_of in by.items():
        ls.annotations.create(
            id=tasks[answer_id].id, result=result(ratings_of), completed_by=users[who]
        )


def export(name: str) -> None:
    (out / name).write_bytes(
        b"".join(
            ls.projects.exports.download_sync(
                id=project.id, export_type="JSON", download_all_tasks=True
            )
        )
    )


export("export.json")
first = next(iter(tasks.values()))
image = client.get(url + first.data["image"], headers={"Authorization": f"Token {token}"})
image.raise_for_status()
(out / "image.bin").write_bytes(image.content)
(out / "image.json").write_text(json.dumps({"answer_id": first.data["answer_id"]}))
bad = tasks[sorted(tasks)[-1]]
ls.annotations.create(
    id=bad.id, result=result({"correctness": "Maybe"}), completed_by=users[names[0]]
)
export("export_bad.json")
print(
    json.dumps(
        {"project": project.id, "tasks": {a: t.id for a, t in tasks.items()}, "users": users}
    )
)
