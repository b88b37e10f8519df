"""The JupyterLab annotator of stage 02: an ipywidgets form showing an image and its two halves, one
input per annotation field, an annotator name and previous / save / next. Each save appends to the
append-only store (:class:`lib.io.AnnotationStore`) at once, so a kernel crash loses nothing; the
stage (:mod:`lib.stages.annotate`) then processes whatever the store holds.
"""

from __future__ import annotations

import json

import pandas as pd
from PIL import Image, ImageOps

from lib.core.schema import FIELD_BY_NAME, FIELDS
from lib.families.yesbut.panels import split
from lib.io import AnnotationStore, load_image


class AnnotationWidget:
    """An ipywidgets annotator: the image and its two halves, every field of ``fields``, an annotator
    name, previous / next / save. Each save appends to the store at once; moving to another image
    shows that annotator's latest values for it.

    >>> AnnotationWidget(records, AnnotationStore(out / "annotations.jsonl")).show()
    """

    def __init__(
        self, records: list[dict], store: AnnotationStore, fields=FIELDS, annotator: str = ""
    ):
        import ipywidgets

        if not records:
            raise ValueError("AnnotationWidget needs at least one record (id, path)")
        self.records, self.store, self.fields = (
            records,
            store,
            [FIELD_BY_NAME.get(f, f) if isinstance(f, str) else f for f in fields],
        )
        self.index = 0
        self.annotator = ipywidgets.Text(
            value=annotator, description="annotator", placeholder="your name"
        )
        self.title = ipywidgets.HTML()
        self.images = [
            ipywidgets.Image(format="png", layout=ipywidgets.Layout(max_height="320px"))
            for _ in range(3)
        ]
        self.inputs = {}
        for f in self.fields:
            if f.kind == "bool":
                w = ipywidgets.ToggleButtons(
                    options=[("?", None), ("yes", True), ("no", False)], description=f.name
                )
            elif f.kind == "choice":
                w = ipywidgets.ToggleButtons(
                    options=[("?", None)] + [(c, c) for c in f.choices], description=f.name
                )
            else:
                w = ipywidgets.Textarea(
                    description=f.name, placeholder=f.help, layout=ipywidgets.Layout(width="95%")
                )
            w.add_class(f"vqalab-field-{f.name}")
            self.inputs[f.name] = w
        self.status = ipywidgets.HTML()
        self.buttons = {
            name: ipywidgets.Button(description=name) for name in ("previous", "save", "next")
        }
        for name, b in self.buttons.items():
            b.add_class(f"vqalab-{name}")
        self.buttons["previous"].on_click(lambda _: self.go(-1))
        self.buttons["next"].on_click(lambda _: self.go(1))
        self.buttons["save"].on_click(lambda _: self.save())
        self.annotator.add_class("vqalab-annotator")
        self.box = ipywidgets.VBox(
            [
                self.annotator,
                self.title,
                ipywidgets.HBox(self.images),
                *self.inputs.values(),
                ipywidgets.HBox(list(self.buttons.values())),
                self.status,
            ]
        )
        self.render()

    def _png(self, image: Image.Image) -> bytes:
        import io

        buf = io.BytesIO()
        ImageOps.contain(image, (480, 320)).save(buf, format="PNG")
        return buf.getvalue()

    def render(self) -> None:
        r = self.records[self.index]
        image = load_image(r["path"])
        for w, im in zip(self.images, (image, *split(image))):
            w.value = self._png(im)
        self.title.value = f"<b>{self.index + 1} / {len(self.records)}</b> · {r['id']}"
        current = (
            self.store.table(self.annotator.value.strip())
            if self.annotator.value.strip()
            else pd.DataFrame()
        )
        row = (
            current[current["item"] == r["id"]].iloc[0].to_dict()
            if len(current) and (current["item"] == r["id"]).any()
            else {}
        )
        for name, w in self.inputs.items():
            v = row.get(name)
            f = FIELD_BY_NAME[name]
            if f.kind in ("bool", "choice"):
                w.value = v if isinstance(v, (bool, str)) else None
            elif f.kind == "list":
                w.value = "\n".join(v) if isinstance(v, list) else ""
            elif f.kind == "targets":
                w.value = json.dumps(v) if isinstance(v, list) else ""
            else:
                w.value = v if isinstance(v, str) else ""

    def values(self) -> dict:
        out = {}
        for name, w in self.inputs.items():
            f = FIELD_BY_NAME[name]
            v = w.value
            if f.kind == "list":
                v = [x.strip() for x in v.splitlines() if x.strip()]
            elif f.kind == "targets":
                v = json.loads(v) if v.strip() else None
            out[name] = v
        return out

    def save(self) -> int:
        who = self.annotator.value.strip()
        try:
            n = self.store.save(self.records[self.index]["id"], who, self.values())
        except (ValueError, json.JSONDecodeError) as e:
            self.status.value = f"<span style='color:#b00'>not saved: {e}</span>"
            return 0
        self.status.value = f"saved {n} field(s) for {self.records[self.index]['id']} as {who}"
        return n

    def go(self, step: int) -> None:
        self.index = (self.index + step) % len(self.records)
        self.render()

    def show(self):
        from IPython.display import display

        display(self.box)
        return self
