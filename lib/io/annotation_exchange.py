"""The annotation store exchanged with Label Studio: the annotation schema as a labelling config
(:func:`label_studio_config`), the store's latest rows as Label Studio tasks
(:func:`export_label_studio`), and exported tasks appended back to a store
(:func:`import_label_studio`), accepting exactly what the export writes. Stage 02 writes both files
(:func:`lib.stages.annotate.label_studio`).
"""

from __future__ import annotations

import json

from lib.core.schema import FIELD_BY_NAME, FIELDS
from lib.io.annotations import AnnotationStore


def _ls_result(field: str, value) -> dict:
    f = FIELD_BY_NAME[field]
    if f.kind in ("bool", "choice"):
        return {
            "from_name": field,
            "to_name": "image",
            "type": "choices",
            "value": {"choices": [("Yes" if value else "No") if f.kind == "bool" else value]},
        }
    text = (
        value
        if f.kind == "text"
        else (json.dumps(value) if f.kind == "targets" else "\n".join(value))
    )
    return {"from_name": field, "to_name": "image", "type": "textarea", "value": {"text": [text]}}


def label_studio_config() -> str:
    """The labelling config (Label Studio's XML) of the annotation schema: yes/no and closed
    fields as single choices, free text, lists (one per line) and targets (JSON) as text areas,
    named like the fields, so exported results read back with :func:`import_label_studio`."""
    from xml.sax.saxutils import quoteattr

    parts = ["<View>", '  <Image name="image" value="$image"/>']
    for f in FIELDS:
        parts.append(f"  <Header value={quoteattr(f.help or f.name)}/>")
        if f.kind in ("bool", "choice"):
            values = ("Yes", "No") if f.kind == "bool" else f.choices
            options = "".join(f"<Choice value={quoteattr(str(v))}/>" for v in values)
            parts.append(
                f'  <Choices name="{f.name}" toName="image" choice="single">{options}</Choices>'
            )
        else:
            parts.append(f'  <TextArea name="{f.name}" toName="image" maxSubmissions="1"/>')
    return "\n".join(parts + ["</View>"]) + "\n"


def export_label_studio(store: AnnotationStore, images: dict[str, str]) -> list[dict]:
    """Label Studio tasks with their annotations (one per annotator), images by URL/path."""
    latest = store.latest()
    tasks = []
    for n, (item, path) in enumerate(images.items(), start=1):
        anns = []
        for who, sub in latest[latest["item"] == item].groupby("annotator"):
            anns.append(
                {
                    "completed_by": {"email": who},
                    "result": [_ls_result(f, v) for f, v in zip(sub["field"], sub["value"])],
                }
            )
        tasks.append({"id": n, "data": {"image": path, "item": item}, "annotations": anns})
    return tasks


def _ls_value(f, r: dict):
    """The annotation value of one Label Studio result, accepting exactly what the export writes."""
    if f.kind in ("bool", "choice"):
        if r.get("type") != "choices":
            raise ValueError(
                f"field {f.name!r} expects a choices result, got type {r.get('type')!r}"
            )
        (c,) = r["value"]["choices"]
        if f.kind == "bool":
            if c not in ("Yes", "No"):
                raise ValueError(f"field {f.name!r} expects the choice 'Yes' or 'No', got {c!r}")
            return c == "Yes"
        return c
    (text,) = r["value"]["text"]
    return (
        text
        if f.kind == "text"
        else (
            json.loads(text) if f.kind == "targets" else [x for x in text.splitlines() if x.strip()]
        )
    )


def import_label_studio(tasks: list[dict], store: AnnotationStore) -> int:
    """Append the annotations of Label Studio tasks (as exported above or by Label Studio) to ``store``;
    an annotation Label Studio exports is credited to ``label-studio-user-<id>`` (its user id), its
    predictions (pre-annotations) are not read.
    Only the exact choices the export writes are accepted ("Maybe" is no bool); a malformed task or
    result raises naming its index, before anything of that task is saved. Results for fields
    outside the schema (other labelling configs) are left out."""
    n = 0
    for i, t in enumerate(tasks):
        try:
            item = t["data"].get("item") or str(t["id"])
            parsed = []
            for ann in t.get("annotations", []):
                who = ann.get(
                    "completed_by", {}
                )  # ours: {"email": name}; Label Studio's export: a user id
                who = who.get("email") if isinstance(who, dict) else f"label-studio-user-{who}"
                values = {}
                for j, r in enumerate(ann.get("result", [])):
                    if r.get("from_name") in FIELD_BY_NAME:
                        try:
                            values[r["from_name"]] = _ls_value(FIELD_BY_NAME[r["from_name"]], r)
                        except (KeyError, TypeError, ValueError) as e:
                            raise ValueError(f"result {j}: {e}") from None
                parsed.append((who or "label-studio", values))
        except (KeyError, TypeError, AttributeError, ValueError) as e:
            raise ValueError(
                f"Label Studio task {i} (id={t.get('id') if isinstance(t, dict) else None!r}): "
                f"malformed ({type(e).__name__}: {e})"
            ) from None
        for who, values in parsed:
            n += store.save(item, who, values)
    return n
