"""People rate the answers a run's models gave, in Label Studio: the rating project, and its export
read back as human labels for :mod:`lib.agreement.scorers`.

    python -m lib.rating RUN --task T --out DIR [--model M ...] [--style S ...] [--dataset D ...]
                         [--criteria C ...] [--limit N] [--seed S]

``RUN`` is a run name (its ``outputs/<run>/06_evaluate``) or an evaluation folder; its valid answers
to the open-answer task ``T`` become one rating task each (the image, the question, the
references, the answer; the model that gave it is kept in the task's data, never shown), in an
order shuffled by ``--seed`` so no model's answers come as a block, ``--limit`` of them at most.
The run is checked as a rescore checks it (:func:`lib.eval.manifest.check_manifest`): a run that did
not finish, or whose config, judgements, answers, scores or datasets changed after it finished, is
refused, so a rater never reads today's question beside an answer to another one.
Writes, all or nothing, into ``--out``: ``rating_config.xml`` (the labelling config: a Yes/No
choice per criterion of :data:`CRITERIA`, ``correctness`` required), ``rating_tasks.json`` (the
tasks, each image a Label Studio local-files URL under ``document_root``) and
``rating_project.json`` (what was chosen, the document root and ``storages``: the folders to
connect as local storage, one per dataset's images, so Label Studio serves those folders and
nothing else; a document root that would be a filesystem root is refused). Label Studio's JSON
export of the project is then a labels file:
``python -m lib.agreement --labels export.json --task T ...``.

Reading an export (:func:`read_export`): every annotator's Yes/No per answer and criterion; an
answer's label on a criterion is the majority of those who rated it (as YesBut's human evaluation
takes the majority of three). A tie (as many Yes as No) is no verdict: left out and counted, never
broken. An answer nobody rated, and a criterion nobody rated on an answer, are left out and
counted, never guessed. A skipped (cancelled) annotation rates nothing; an annotator who annotated
one task twice counts once, by the later annotation. A choice outside the config, a result for no
criterion, or a task that is no rating task is an error naming the file and the task id. An
export is read with limits, as the lmms-eval import reads another harness's files: a regular file
of at most :data:`lib.io.annotations.MAX_LABELS_BYTES`, every field the reading uses checked
(:data:`EXPORTED_TASK`), an error as ``FILE: task N: field X: expected ..., got ...``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
from collections import Counter
from pathlib import Path
from xml.sax.saxutils import quoteattr

from lib.compare.runs import CompareError, evaluation_folder
from lib.core.schema import Prediction
from lib.eval.foreign_schema import (
    DOC_ID,
    FLAG,
    INTEGER,
    TEXT,
    Field,
    ForeignError,
    check,
    listof,
    obj,
)
from lib.eval.manifest import PARTS, Unverified, answer_digest, check_manifest
from lib.eval.rescore import saved_config
from lib.io import (
    NotOurFolder,
    artifacts,
    aside_folder,
    check_ours,
    load_items,
    mark,
    read_jsonl,
    swap_in,
    write_json,
)
from lib.io.labelstudio_files import (
    LOCAL_FILES,  # noqa: F401 - callers read it here, beside the tasks that use it
    LabelStudioError,
    annotator,
    exported_tasks,
    local_files_url,
    served_folders,
    task_where,
)
from lib.tasks.registry import get_task, tasks

# The criteria people rate, named as YesBut's human evaluation names them (lib.families.yesbut),
# each with the question the rater reads.
CRITERIA = {
    "correctness": "Is the answer correct? (The references are right answers, not the only ones.)",
    "appropriate_length": "Is the answer of an appropriate length, neither too short nor padded?",
    "visual_completeness": "Does the answer mention everything in the image the question needs?",
    "faithfulness": "Is everything the answer says true of the image (nothing made up)?",
}
REQUIRED = "correctness"  # the criterion every rating must give: the one agreement is about
CHOICES = {"Yes": 1, "No": 0}
TASK_DATA = ("answer_id", "cluster", "question", "references", "answer")
KIND = "rating"  # the output folder's marker (lib.io.folders)
CONFIG, TASKS, PROJECT = "rating_config.xml", "rating_tasks.json", "rating_project.json"

# What the reading of an export uses of a task, checked before it is used (lib.eval.foreign_schema)
_RATER = Field(
    "a user id, or a user object with an id or email",
    lambda v: DOC_ID.ok(v) or isinstance(v, dict) and DOC_ID.ok(v.get("id", v.get("email"))),
)
_REFERENCES = Field(
    "text or a list of text",
    lambda v: isinstance(v, str) or isinstance(v, list) and all(isinstance(r, str) for r in v),
)
_RESULT = obj(("from_name", "value"), from_name=TEXT, value=obj(("choices",), choices=listof(TEXT)))
EXPORTED_TASK = obj(
    ("data",),
    id=INTEGER,
    data=obj(
        TASK_DATA,
        answer_id=TEXT,
        cluster=TEXT,
        question=TEXT,
        references=_REFERENCES,
        answer=TEXT,
    ),
    annotations=listof(
        obj(id=INTEGER, completed_by=_RATER, was_cancelled=FLAG, result=listof(_RESULT))
    ),
)


# A rating project that cannot be made, or an export that cannot be read as ratings: the error of
# every Label Studio project (lib.io.labelstudio_files), whose helpers this module uses
RatingError = LabelStudioError


def rating_config(criteria=tuple(CRITERIA)) -> str:
    """The labelling config (Label Studio's XML): the image, the question, the references and the
    answer, then a single Yes/No choice per criterion, named as the criterion."""
    unknown = [c for c in criteria if c not in CRITERIA]
    if unknown or REQUIRED not in criteria:
        raise RatingError(
            f"criteria {list(criteria)}: must include {REQUIRED!r} and be among {', '.join(CRITERIA)}"
        )
    parts = [
        "<View>",
        '  <Image name="image" value="$image"/>',
        '  <Header value="Question"/>',
        '  <Text name="question" value="$asked"/>',
        '  <Header value="Reference answers"/>',
        '  <Text name="reference" value="$reference"/>',
        '  <Header value="The answer to rate"/>',
        '  <Text name="answer" value="$answer"/>',
    ]
    options = "".join(f"<Choice value={quoteattr(v)}/>" for v in CHOICES)
    for c in criteria:
        required = ' required="true"' if c == REQUIRED else ""
        parts += [
            f"  <Header value={quoteattr(CRITERIA[c])}/>",
            f'  <Choices name="{c}" toName="answer" choice="single"{required}>{options}</Choices>',
        ]
    return "\n".join(parts + ["</View>"]) + "\n"


def rating_tasks(answers: list[dict], document_root: str | Path | None = None) -> list[dict]:
    """One Label Studio task per answer (``answer_id``, ``cluster``, ``image``, ``question``,
    ``references``, ``answer``, any other key kept in the data unseen): the prompt the model was
    asked shown as the question (``asked``, else ``question``), the references shown as one text,
    kept as a list to read back; an image under ``document_root`` as its local-files URL (None:
    the image as given, a URL Label Studio can open)."""
    tasks, seen = [], set()
    for i, a in enumerate(answers):
        missing = [k for k in (*TASK_DATA, "image") if k not in a]
        if missing:
            raise RatingError(f"answer {i}: missing {', '.join(missing)}")
        if a["answer_id"] in seen:
            raise RatingError(f"answer {i}: answer_id {a['answer_id']!r} given twice")
        seen.add(a["answer_id"])
        refs = [a["references"]] if isinstance(a["references"], str) else list(a["references"])
        image = local_files_url(a["image"], document_root) if document_root else str(a["image"])
        data = {**a, "image": image, "references": refs, "cluster": str(a["cluster"])}
        shown = {
            "asked": a.get("asked") or a["question"],
            "reference": "\n".join(dict.fromkeys(refs)),
        }
        tasks.append({"data": data | shown})
    return tasks


def run_answers(run: str, task: str, models=(), styles=(), datasets=()) -> list[dict]:
    """The valid answers of a run's stage 06 to the open-answer ``task`` (each filter: empty keeps
    all), as rating rows: ``answer_id`` (``dataset:model:style:item``), ``cluster`` (the task's
    cluster of the item: its image), ``image``, ``question`` (the item's, as stage 06's judge reads
    it), ``asked`` (the task's prompt the model saw: what the rater reads), ``references``,
    ``answer``, and ``task``, ``dataset``, ``model``, ``style``, ``item_id``."""
    if task not in tasks() or not get_task(task).open_answer:
        known = ", ".join(n for n, t in tasks().items() if t.open_answer)
        raise RatingError(f"--task {task}: not an open-answer task (those: {known})")
    folder = evaluation_folder(run)
    keep = lambda value, wanted: not wanted or value in wanted
    try:
        cfg = saved_config(folder)
        check_manifest(folder, cfg)  # unfinished, or config, judgements or datasets changed since
        preds, answers = [], hashlib.sha256()
        for d in read_jsonl(folder / artifacts.PREDICTIONS):
            p = Prediction.from_dict(d)
            answer_digest(answers, p)
            wanted = ((p.model, models), (p.style, styles), (p.dataset, datasets))
            if p.task == task and p.valid and all(keep(v, w) for v, w in wanted):
                preds.append(p)
        check_manifest(folder, cfg, answers.hexdigest(), parts=PARTS[-2:])  # answers, scores
    except (Unverified, FileNotFoundError, ValueError, TypeError) as e:
        raise RatingError(f"{folder}: not a run to rate: {e}") from None
    if not preds:
        raise RatingError(f"{folder}: no valid answers to {task} with these filters")
    t, items = get_task(task), {}
    for name in {p.dataset for p in preds}:
        root = Path(cfg.datasets[name])
        items.update({(name, it.id): (root, it) for it in load_items(root)})
    rows = []
    for p in preds:
        root, it = items[(p.dataset, p.item_id)]
        if len(it.images) != 1:
            raise RatingError(f"{root}: item {it.id} has {len(it.images)} images; rating shows one")
        rows.append(
            {
                "answer_id": ":".join((p.dataset, p.model, p.style, it.id)),
                "cluster": str(t.cluster(it)),
                "image": str(root / it.images[0]),
                "question": it.question,
                "asked": t.prompt(it, str(root)).text,
                "references": [str(r) for r in it.answer],
                "answer": t.reader.answer_text(it, p.parsed),
                **{k: getattr(p, k) for k in ("task", "dataset", "model", "style", "item_id")},
            }
        )
    return rows


def make_project(answers: list[dict], out: str | Path, criteria=tuple(CRITERIA), **about) -> dict:
    """Write the rating project of ``answers`` into ``out`` (built aside, swapped in whole; a
    folder of another kind is refused): the config, the tasks with their images as local-files
    URLs under the document root, the folders to connect as local storage
    (:func:`served_folders`), and the project's description (``about`` added to it)."""
    out = Path(out)
    check_ours(out, KIND)
    if not answers:
        raise RatingError(f"{out}: no answers to rate")
    root, storages = served_folders(answers)
    project = {
        **about,
        "answers": len(answers),
        "clusters": len({str(a["cluster"]) for a in answers}),
        "criteria": list(criteria),
        "document_root": str(root),
        "storages": [str(s) for s in storages],
    }
    config, tasks_of = rating_config(criteria), rating_tasks(answers, root)  # checked
    building = aside_folder(out)
    (building / CONFIG).write_text(config)
    write_json(building / TASKS, tasks_of)
    write_json(building / PROJECT, project)
    mark(building, KIND)
    swap_in(building, out)
    return project


def _votes(task: dict, where: str) -> dict[str, dict]:
    """criterion -> annotator -> 1/0 of one exported task (checked against :data:`EXPORTED_TASK`);
    one vote per annotator, the later one."""
    votes = {}
    annotations = sorted(task.get("annotations") or [], key=lambda a: a.get("id") or 0)
    for annotation in (a for a in annotations if not a.get("was_cancelled")):
        for r in annotation.get("result") or []:
            name, value = r["from_name"], r["value"]["choices"]
            if name not in CRITERIA:
                raise RatingError(f"{where}: a result for {name!r}, no rating criterion")
            if not (len(value) == 1 and value[0] in CHOICES):
                raise RatingError(
                    f"{where}: {name}: expected one of {', '.join(CHOICES)}, got {value!r}"
                )
            votes.setdefault(name, {})[annotator(annotation)] = CHOICES[value[0]]
    return votes


def read_export(path: str | Path) -> tuple[list[tuple[str, dict]], dict]:
    """``(where, label row)`` per rated answer and criterion of a Label Studio JSON export of a
    rating project (rows as :mod:`lib.agreement.scorers` reads them, ``where`` naming the file and task),
    and what was left out: ``unrated`` (answers nobody rated), ``unrated_criteria`` (an answer's
    criterion nobody rated), ``tied`` (answer and criterion with as many Yes as No)."""
    path = Path(path)
    exported = exported_tasks(path)
    left, voted, seen = Counter(unrated=0, unrated_criteria=0, tied=0), [], {}
    for i, task in enumerate(exported):
        where, data = task_where(path, i, task), task["data"]
        missing = [k for k in TASK_DATA if k not in data]
        if missing:
            raise RatingError(f"{where}: no rating task (its data lacks {', '.join(missing)})")
        try:
            check(task, EXPORTED_TASK, where)
        except ForeignError as e:
            raise RatingError(str(e)) from None
        if seen.setdefault(data["answer_id"], where) != where:
            raise RatingError(
                f"{where}: answer {data['answer_id']!r} is also {seen[data['answer_id']]}"
            )
        voted.append((where, data, _votes(task, where)))
    criteria = {c: None for _, _, votes in voted for c in votes}  # those the export rates at all
    rows, raters = [], set()
    for where, data, votes in voted:
        left["unrated"] += not votes
        left["unrated_criteria"] += bool(votes) * sum(c not in votes for c in criteria)
        for criterion, by in votes.items():
            raters.update(by)
            yes, no = sum(by.values()), len(by) - sum(by.values())
            if yes == no:
                left["tied"] += 1
                continue
            label = {"criterion": criterion, "label": int(yes > no)}
            rows.append((f"{where} ({criterion})", {k: data[k] for k in TASK_DATA} | label))
    if not rows:
        raise RatingError(
            f"{path}: no ratings with a verdict in its {len(exported)} tasks "
            f"({dict(left)}): rate answers in Label Studio, then export again"
        )
    return rows, {"tasks": len(exported), "raters": len(raters), **left}


def is_export(path: str | Path) -> bool:
    """Whether a labels file is (meant to be) a Label Studio JSON export: a ``.json`` file."""
    return Path(path).suffix == ".json"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m lib.rating", description=__doc__.split("\n\n")[0])
    ap.add_argument("run", help="a run name or its stage-06 folder")
    ap.add_argument("--task", required=True, help="the open-answer task whose answers to rate")
    ap.add_argument("--out", required=True, help="the folder to write (new, empty, or a rating's)")
    for name, what in (("model", "models"), ("style", "prompt styles"), ("dataset", "datasets")):
        ap.add_argument(f"--{name}", action="append", default=[], help=f"only these {what}")
    ap.add_argument("--criteria", nargs="+", default=list(CRITERIA), choices=list(CRITERIA))
    ap.add_argument("--limit", type=int, help="rate at most this many answers (a sample, > 0)")
    ap.add_argument("--seed", type=int, default=0, help="the shuffle's (and the sample's) seed")
    args = ap.parse_args(argv)
    if args.limit is not None and args.limit < 1:
        ap.error(f"--limit {args.limit}: rate at least one answer")
    try:
        answers = run_answers(args.run, args.task, args.model, args.style, args.dataset)
        random.Random(args.seed).shuffle(answers)
        about = {"run": args.run, "task": args.task, "seed": args.seed, "available": len(answers)}
        project = make_project(answers[: args.limit], args.out, args.criteria, **about)
    except (RatingError, CompareError, NotOurFolder, KeyError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(json.dumps(project, indent=1))
    return 0
