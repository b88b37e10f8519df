"""Stage 02 · Annotate: the annotation schema, an append-only store, agreement, Label Studio
exchange, machine pre-annotation, style variants (stages 3-4) and the YesBut statistics.

**Schema** (:data:`FIELDS`): YesBut's fields (left / right / overall description, text in each
half, halves connected, difficulty), the satirical label, and MemeQA's needs (intents, derivations,
background knowledge, visual cues, targets with sentiment and action); every field is optional.

**Store**: every save appends one row per field to ``annotations.jsonl`` at once (``item``,
``annotator``, ``field``, ``value``, ``source``, ``time``): a kernel crash loses nothing, nothing is
overwritten in place, and the latest row per (item, annotator, field) wins. Machine drafts carry
``source = "machine:<model>"`` and are never mixed with human rows unless asked for.
"""

from __future__ import annotations

import base64
import hashlib
import json
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image, ImageFilter, ImageOps

from lib.io import append_jsonl, load_image, read_jsonl

DIFFICULTY = ("EASY", "MEDIUM", "HARD")
SENTIMENTS = ("positive", "neutral", "negative")


@dataclass(frozen=True)
class Field:
    name: str
    kind: str  # text | bool | choice | list | targets
    choices: tuple = ()
    help: str = ""


FIELDS = (
    Field("left_description", "text", help="what the left ('yes') half shows"),
    Field("right_description", "text", help="what the right ('but') half shows"),
    Field("overall_description", "text", help="the whole image, with its punchline"),
    Field("text_in_left", "bool", help="is there text in the left half?"),
    Field("text_in_right", "bool", help="is there text in the right half?"),
    Field("connected", "bool", help="are the two halves connected?"),
    Field("difficulty", "choice", DIFFICULTY, help="how hard is the image to understand?"),
    Field("satirical", "bool", help="is the image satirical?"),
    Field("intents", "list", help="MemeQA: what the meme intends (one per line)"),
    Field("derivations", "list", help="MemeQA: what can be derived from it"),
    Field("background_knowledge", "list", help="MemeQA: facts needed to understand it"),
    Field("visual_cues", "list", help="MemeQA: visual statements"),
    Field("targets", "targets", help='MemeQA: [{"target", "sentiment", "action"}] (JSON)'),
)
FIELD_BY_NAME = {f.name: f for f in FIELDS}
CATEGORICAL = tuple(f.name for f in FIELDS if f.kind in ("bool", "choice"))


def check_value(field: str, value):
    """The value if it fits the field, else a ValueError naming the field and what it expects."""
    if field not in FIELD_BY_NAME:
        raise ValueError(f"unknown annotation field {field!r}; known: {sorted(FIELD_BY_NAME)}")
    f = FIELD_BY_NAME[field]
    ok = {"text": lambda v: isinstance(v, str), "bool": lambda v: isinstance(v, bool),
          "choice": lambda v: v in f.choices, "list": lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
          "targets": lambda v: isinstance(v, list) and all(isinstance(t, dict) and "target" in t for t in v)}[f.kind]
    if value is not None and not ok(value):
        expected = {"choice": f"one of {f.choices}", "targets": 'a list of {"target", "sentiment", "action"}'}.get(f.kind, f.kind)
        raise ValueError(f"annotation field {field!r} expects {expected}, got {value!r}")
    return value


class AnnotationStore:
    """Append-only annotations in a JSONL file; :meth:`latest` resolves them."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    def save(self, item: str, annotator: str, values: dict, source: str = "human") -> int:
        """Append one row per (non-empty) field, flushed before returning; returns the row count."""
        if not annotator or not str(annotator).strip():
            raise ValueError("an annotation needs an annotator name")
        now = time.time()
        rows = [{"item": item, "annotator": annotator, "field": k, "value": check_value(k, v), "source": source,
                 "time": now} for k, v in values.items() if v not in (None, "", [])]
        return append_jsonl(self.path, rows) if rows else 0

    def rows(self) -> pd.DataFrame:
        cols = ["item", "annotator", "field", "value", "source", "time"]
        if not self.path.exists():
            return pd.DataFrame(columns=cols)
        return pd.DataFrame(list(read_jsonl(self.path)), columns=cols)

    def latest(self, include_machine: bool = False) -> pd.DataFrame:
        """One row per (item, annotator, field): the most recent save (file order breaks time ties)."""
        df = self.rows()
        if not include_machine:
            df = df[df["source"] == "human"]
        return df.reset_index().sort_values(["time", "index"]).groupby(["item", "annotator", "field"], as_index=False).last() \
            .drop(columns="index")

    def table(self, annotator: str | None = None, include_machine: bool = False) -> pd.DataFrame:
        """Wide table: one row per (item, annotator), one column per field."""
        df = self.latest(include_machine)
        if annotator:
            df = df[df["annotator"] == annotator]
        if df.empty:
            return pd.DataFrame(columns=["item", "annotator"])
        return df.pivot(index=["item", "annotator"], columns="field", values="value").reset_index()


def load_annotation_file(path: str | Path, store: AnnotationStore, annotator: str | None = None,
                         names: dict[str, str] | None = None) -> int:
    """Import a hand-written annotation file (YAML or JSON list of ``{item, annotator, ...fields}``)
    into ``store``; ``item`` is a manifest id or, through ``names`` (file stem -> id), a file name.
    Returns the rows appended. The batch (papermill) run uses this instead of the widget."""
    import yaml

    records = yaml.safe_load(Path(path).read_text())
    names = names or {}
    n = 0
    for i, r in enumerate(records):
        r = dict(r)
        try:
            item, who = r.pop("item"), r.pop("annotator", annotator)
            if names and item not in names.values() and item not in names:
                raise ValueError(f"item {item!r} is neither a manifest id nor a known file name")
            n += store.save(names.get(item, item), who, r)
        except (KeyError, ValueError) as e:
            raise ValueError(f"{path}: record {i}: {e}") from e
    return n


# --- agreement -------------------------------------------------------------------------------

def agreement(store: AnnotationStore, fields=CATEGORICAL) -> pd.DataFrame:
    """Per categorical field: items annotated by >= 2 annotators, Cohen's kappa (scikit-learn; the
    mean over annotator pairs) and Krippendorff's alpha (krippendorff, nominal)."""
    import krippendorff
    from sklearn.metrics import cohen_kappa_score

    latest = store.latest()
    rows = []
    for field in fields:
        sub = latest[latest["field"] == field]
        wide = sub.pivot(index="item", columns="annotator", values="value")
        wide = wide[wide.notna().sum(axis=1) >= 2]
        if wide.empty:
            rows.append({"field": field, "items": 0, "annotators": 0, "cohen_kappa": np.nan, "krippendorff_alpha": np.nan})
            continue
        codes = {v: i for i, v in enumerate(sorted({str(v) for v in wide.stack()}))}
        kappas = []
        cols = list(wide.columns)
        for i in range(len(cols)):
            for j in range(i + 1, len(cols)):
                both = wide[[cols[i], cols[j]]].dropna()
                if len(both) >= 2:
                    a, b = both[cols[i]].map(str), both[cols[j]].map(str)
                    kappas.append(1.0 if (a == b).all() and a.nunique() == 1 else cohen_kappa_score(a, b))
        data = np.array([[codes[str(v)] if pd.notna(v) else np.nan for v in wide[c]] for c in cols], dtype=float)
        alpha = krippendorff.alpha(reliability_data=data, level_of_measurement="nominal") if len(codes) > 1 else 1.0
        rows.append({"field": field, "items": len(wide), "annotators": len(cols),
                     "cohen_kappa": float(np.mean(kappas)) if kappas else np.nan, "krippendorff_alpha": float(alpha)})
    return pd.DataFrame(rows)


# --- Label Studio ------------------------------------------------------------------------------

def _ls_result(field: str, value) -> dict:
    f = FIELD_BY_NAME[field]
    if f.kind in ("bool", "choice"):
        return {"from_name": field, "to_name": "image", "type": "choices",
                "value": {"choices": [("Yes" if value else "No") if f.kind == "bool" else value]}}
    text = value if f.kind == "text" else (json.dumps(value) if f.kind == "targets" else "\n".join(value))
    return {"from_name": field, "to_name": "image", "type": "textarea", "value": {"text": [text]}}


def export_label_studio(store: AnnotationStore, images: dict[str, str]) -> list[dict]:
    """Label Studio tasks with their annotations (one per annotator), images by URL/path."""
    latest = store.latest()
    tasks = []
    for n, (item, path) in enumerate(images.items(), start=1):
        anns = []
        for who, sub in latest[latest["item"] == item].groupby("annotator"):
            anns.append({"completed_by": {"email": who}, "result": [_ls_result(f, v) for f, v in zip(sub["field"], sub["value"])]})
        tasks.append({"id": n, "data": {"image": path, "item": item}, "annotations": anns})
    return tasks


def import_label_studio(tasks: list[dict], store: AnnotationStore) -> int:
    """Append the annotations of Label Studio tasks (as exported above or by Label Studio) to ``store``."""
    n = 0
    for t in tasks:
        item = t["data"].get("item") or str(t["id"])
        for ann in t.get("annotations", []):
            who = ann.get("completed_by", {})
            who = who.get("email") if isinstance(who, dict) else str(who)
            values = {}
            for r in ann.get("result", []):
                field = r["from_name"]
                if field not in FIELD_BY_NAME:
                    continue
                f = FIELD_BY_NAME[field]
                if r["type"] == "choices":
                    c = r["value"]["choices"][0]
                    values[field] = (c == "Yes") if f.kind == "bool" else c
                else:
                    text = r["value"]["text"][0]
                    values[field] = text if f.kind == "text" else (json.loads(text) if f.kind == "targets"
                                                                  else [x for x in text.splitlines() if x.strip()])
            n += store.save(item, who or "label-studio", values)
    return n


# --- machine pre-annotation -------------------------------------------------------------------

def preannotate(model, records: list[dict], store: AnnotationStore, call_store=None, max_new_tokens: int = 64,
                progress: bool = True) -> int:
    """Draft descriptions with any VLM backend: "Describe the image" for each half and the YesBut
    WHYFUNNY prompt for the whole. Saved as ``source="machine:<model>"``, annotator = the model name."""
    from lib.models import Request, generate
    from lib.panels import split
    from lib.tasks import prompts  # the YesBut prompt block

    p = prompts()["yesbut"]
    reqs, keys = [], []
    for r in records:
        image = load_image(r["path"])
        left, right = split(image)
        for field, img, text in (("left_description", left, p["describe"]), ("right_description", right, p["describe"]),
                                 ("overall_description", image, p["why_funny"])):
            reqs.append(Request.simple(text, [img], max_new_tokens=max_new_tokens))
            keys.append((r["id"], field))
    responses = generate(model, reqs, store=call_store, progress=progress, desc=f"pre-annotate {model.name}")
    drafts: dict = {}
    for (item, field), resp in zip(keys, responses):
        if resp.error is None and resp.text.strip():
            drafts.setdefault(item, {})[field] = resp.text.strip()
    return sum(store.save(item, model.name, values, source=f"machine:{model.name}") for item, values in drafts.items())


# --- style variants (stages 3 and 4) ----------------------------------------------------------

PROMPTS = {"STICK": "Draw using stick figures (black silhouette against a white background) - {description}",
           "3D": "Draw using 3D black silhouettes against a white background - {description}"}
STAGE3 = [("ORIG", "STICK"), ("STICK", "ORIG"), ("STICK", "STICK")]
STAGE4 = [("ORIG", "3D"), ("3D", "ORIG"), ("STICK", "3D"), ("3D", "STICK"), ("3D", "3D")]


def stylize_local(image: Image.Image, style: str, size: int = 512) -> Image.Image:
    """The offline stand-in for the image API: ``STICK`` = a black silhouette of the scene's
    foreground (Otsu threshold on the grey image, scikit-image) with its edges, on white; ``3D`` = the
    same silhouette shaded by the image's own luminance and a drop shadow. It keeps the layout of the
    original half, not its content's meaning - good enough for the demo's pipeline, not for a dataset."""
    from skimage.filters import threshold_otsu

    img = image.convert("RGB")
    img.thumbnail((size, size))  # shrink large halves, never enlarge
    gray = np.asarray(img.convert("L"), dtype=float)
    mask = gray < threshold_otsu(gray) if gray.std() > 0 else np.zeros_like(gray, bool)
    if mask.mean() > 0.5:
        mask = ~mask
    edges = np.asarray(img.convert("L").filter(ImageFilter.FIND_EDGES)) > 60
    edges[[0, -1], :] = edges[:, [0, -1]] = False  # the filter's frame is not an edge of the scene
    if style == "STICK":
        out = np.where(mask | edges, 0, 255).astype(np.uint8)
        return Image.fromarray(out).convert("RGB")
    if style == "3D":
        shade = np.clip(gray * 0.35, 0, 90)
        shadow = np.roll(np.roll(mask, 6, axis=0), 6, axis=1) & ~mask
        out = np.full(gray.shape, 255.0)
        out[shadow] = 190
        out[mask] = shade[mask]
        return Image.fromarray(out.astype(np.uint8)).convert("RGB")
    raise ValueError(f"unknown style {style!r}; styles: STICK, 3D")


class ImageAPI:
    """An OpenAI-compatible images API (``images.generate``) with results cached on disk by
    (model, prompt, size) and the cost of each new image recorded. Keys come from the environment
    variable named by ``api_key_env``."""

    def __init__(self, model: str, cache: str | Path, base_url: str | None = None, api_key_env: str = "OPENAI_API_KEY",
                 size: str = "1024x1024", cost_per_image: float = 0.04):
        import os

        from openai import OpenAI

        key = os.environ.get(api_key_env)
        if not key:
            raise RuntimeError(f"the images API needs a key in the environment variable {api_key_env!r}")
        self.client = OpenAI(base_url=base_url, api_key=key)
        self.model, self.size, self.cost_per_image = model, size, cost_per_image
        self.cache = Path(cache)
        self.cache.mkdir(parents=True, exist_ok=True)
        self.calls = 0
        self.cost_usd = 0.0

    def generate(self, prompt: str) -> Image.Image:
        import io

        key = hashlib.sha256(json.dumps([self.model, prompt, self.size]).encode()).hexdigest()[:24]
        path = self.cache / f"{key}.png"
        if not path.exists():
            r = self.client.images.generate(model=self.model, prompt=prompt, size=self.size, response_format="b64_json", n=1)
            Image.open(io.BytesIO(base64.b64decode(r.data[0].b64_json))).convert("RGB").save(path)
            self.calls += 1
            self.cost_usd += self.cost_per_image
            append_jsonl(self.cache / "costs.jsonl", [{"key": key, "model": self.model, "prompt": prompt,
                                                      "cost_usd": self.cost_per_image, "time": time.time()}])
        return Image.open(path).convert("RGB")


def style_variants(records: list[dict], descriptions: dict[str, dict], out: str | Path, api: ImageAPI | None = None,
                   stages=(3, 4), progress: bool = True) -> list[dict]:
    """For each two-panel image with left/right descriptions, generate STICK (stage 3) and 3D (stage 4)
    halves - through ``api`` with the paper's prompts, or :func:`stylize_local` offline - and compose
    every left/right style combination of those stages. Returns one record per combined image."""
    from tqdm.auto import tqdm

    from lib.panels import compose, split

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    combos = (STAGE3 if 3 in stages else []) + (STAGE4 if 4 in stages else [])
    made = []
    for r in tqdm(records, desc="style variants", unit="image", disable=not progress):
        desc = descriptions.get(r["id"], {})
        image = load_image(r["path"])
        halves = dict(zip(("left", "right"), split(image)))
        versions = {("left", "ORIG"): halves["left"], ("right", "ORIG"): halves["right"]}
        for side in ("left", "right"):
            for style in {s for pair in combos for s in pair} - {"ORIG"}:
                text = desc.get(f"{side}_description")
                if api is not None and text:
                    versions[(side, style)] = api.generate(PROMPTS[style].format(description=text))
                else:
                    versions[(side, style)] = stylize_local(halves[side], style)
        for left, right in combos:
            stage = 3 if (left, right) in STAGE3 else 4
            stem = r.get("name") or r["id"]
            name = f"{stem}_{left}_YES_{right}_BUT.png"
            compose(versions[("left", left)], versions[("right", right)], height=384).save(out / name)
            made.append({"id": f"{stem}-{left}-{right}", "path": str(out / name), "original": r["id"],
                         "left_style": left, "right_style": right, "stage": stage,
                         "generator": api.model if api is not None else "local-stylizer"})
    return made


def apply_labels(variants: list[dict], labels: dict[str, bool]) -> tuple[list[dict], list[str]]:
    """Attach satirical / non-satirical labels (from the widget or a labels file) to the variants;
    returns (labelled variants, ids still unlabelled)."""
    out, missing = [], []
    for v in variants:
        if v["id"] in labels:
            out.append({**v, "label": "satirical" if labels[v["id"]] else "non_satirical"})
        else:
            missing.append(v["id"])
    return out, missing


# --- statistics ----------------------------------------------------------------------------------

def figure3_counts(annotations: pd.DataFrame) -> dict[str, pd.Series]:
    """YesBut Figure 3: text in images (none / left only / right only / both), connected halves,
    difficulty - from a table with the fields text_in_left, text_in_right, connected, difficulty."""
    a = annotations
    left, right = a["text_in_left"].astype(bool), a["text_in_right"].astype(bool)
    text = pd.Series(np.select([left & right, left, right], ["both halves", "left only", "right only"], "no text"))
    return {"text_in_image": text.value_counts().reindex(["no text", "left only", "right only", "both halves"], fill_value=0),
            "connected": a["connected"].astype(bool).map({True: "connected", False: "not connected"}).value_counts()
            .reindex(["connected", "not connected"], fill_value=0),
            "difficulty": a["difficulty"].value_counts().reindex(list(DIFFICULTY), fill_value=0)}


# --- the JupyterLab widget -----------------------------------------------------------------------

class AnnotationWidget:
    """An ipywidgets annotator: the image and its two halves, every field of ``fields``, an annotator
    name, previous / next / save. Each save appends to the store at once; moving to another image
    shows that annotator's latest values for it.

    >>> AnnotationWidget(records, AnnotationStore(out / "annotations.jsonl")).show()
    """

    def __init__(self, records: list[dict], store: AnnotationStore, fields=FIELDS, annotator: str = ""):
        import ipywidgets as W

        if not records:
            raise ValueError("AnnotationWidget needs at least one record (id, path)")
        self.records, self.store, self.fields = records, store, [FIELD_BY_NAME.get(f, f) if isinstance(f, str) else f
                                                                 for f in fields]
        self.index = 0
        self.annotator = W.Text(value=annotator, description="annotator", placeholder="your name")
        self.title = W.HTML()
        self.images = [W.Image(format="png", layout=W.Layout(max_height="320px")) for _ in range(3)]
        self.inputs = {}
        for f in self.fields:
            if f.kind == "bool":
                w = W.ToggleButtons(options=[("?", None), ("yes", True), ("no", False)], description=f.name)
            elif f.kind == "choice":
                w = W.ToggleButtons(options=[("?", None)] + [(c, c) for c in f.choices], description=f.name)
            else:
                w = W.Textarea(description=f.name, placeholder=f.help, layout=W.Layout(width="95%"))
            w.add_class(f"vqalab-field-{f.name}")
            self.inputs[f.name] = w
        self.status = W.HTML()
        self.buttons = {name: W.Button(description=name) for name in ("previous", "save", "next")}
        for name, b in self.buttons.items():
            b.add_class(f"vqalab-{name}")
        self.buttons["previous"].on_click(lambda _: self.go(-1))
        self.buttons["next"].on_click(lambda _: self.go(1))
        self.buttons["save"].on_click(lambda _: self.save())
        self.annotator.add_class("vqalab-annotator")
        self.box = W.VBox([self.annotator, self.title, W.HBox(self.images), *self.inputs.values(),
                           W.HBox(list(self.buttons.values())), self.status])
        self.render()

    def _png(self, image: Image.Image) -> bytes:
        import io

        buf = io.BytesIO()
        ImageOps.contain(image, (480, 320)).save(buf, format="PNG")
        return buf.getvalue()

    def render(self) -> None:
        from lib.panels import split

        r = self.records[self.index]
        image = load_image(r["path"])
        for w, im in zip(self.images, (image, *split(image))):
            w.value = self._png(im)
        self.title.value = f"<b>{self.index + 1} / {len(self.records)}</b> · {r['id']}"
        current = self.store.table(self.annotator.value.strip()) if self.annotator.value.strip() else pd.DataFrame()
        row = current[current["item"] == r["id"]].iloc[0].to_dict() if len(current) and (current["item"] == r["id"]).any() else {}
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
