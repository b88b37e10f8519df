"""What the lmms-eval import (:mod:`lib.eval.foreign`) accepts of a file, in one place.

Another harness's output is read with limits: only regular files
(:func:`regular_file`: a link to ``/dev/zero`` or a pipe is refused before it is opened), a samples
line no longer than :data:`MAX_LINE_BYTES`, a JSON file no larger than :data:`MAX_JSON_BYTES`, and
every field the import uses checked against its schema - :data:`RESULTS` (lmms-eval's
``<date>_results.json``, and :data:`TASK` for each task VQA Lab exported: another benchmark's
config is not read), :data:`SAMPLE` (one line of ``<date>_samples_<task>.jsonl``) and
:data:`EXPORT` (the export's ``vqalab.json``): its type, numbers finite, text that UTF-8 can hold (no
lone surrogate). A field the import does not use is not checked. What does not hold raises
:class:`ForeignError` as ``FILE:LINE: field X: expected ..., got ...``.

Text from those files goes to a terminal (the comparison's notes and config diff, an error), so
what is printed of it is :func:`printable`: control characters (an escape sequence, a bell, a
carriage return, a bidirectional override; a lone surrogate, which an output stream cannot encode)
are written as escapes (``\\x1b``) instead of being sent raw. Error messages are made printable
where they are raised.
"""

from __future__ import annotations

import json
import math
import re
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

# A samples line holds one doc: its prompt, the reply (as ``resps``, ``filtered_resps`` and under each
# metric's row) and token counts - kilobytes. A longer line is not lmms-eval's (another file, a damaged
# one), and reading it whole would hold it all in memory: it is refused at this length.
MAX_LINE_BYTES = 16 * 2**20
# results.json holds each task's config and numbers (kilobytes a task); vqalab.json is the export's own.
MAX_JSON_BYTES = 64 * 2**20
ROW_KEY = "invalid_rate"  # every exported task reports it, so every sample carries the export's row under it

# C0 controls but tab and newline, DEL, C1 controls (0x9b opens a sequence by itself), bidi overrides,
# lone surrogates (a path of undecodable bytes: stdout cannot encode them)
_UNPRINTABLE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)


def printable(text: str) -> str:
    """``text`` with every control character a terminal would act on written as an escape (``\\x1b``)."""
    return _UNPRINTABLE.sub(
        lambda m: f"\\x{ord(m[0]):02x}" if ord(m[0]) < 256 else f"\\u{ord(m[0]):04x}", text
    )


def clean(value):
    """A JSON value with :func:`printable` applied to every text and key in it (labels a comparison prints)."""
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, dict):
        return {clean(k): clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clean(v) for v in value]
    return value


class ForeignError(ValueError):
    """Another harness's output that cannot be imported; the message names the file (and line, and field)."""

    def __init__(self, message: str):
        super().__init__(printable(message))


# --- the schema ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Field:
    """What one JSON value must be: ``ok(value)``, said as ``expected``; below an object, ``fields``
    by key (``"*"``: every key not named) of which ``required`` must be there; below a list, ``each``.
    A field missing or null is absent (the import's default applies) unless its object requires it."""

    expected: str
    ok: Callable[[object], bool]
    fields: dict = field(default_factory=dict)
    each: Field | None = None
    required: tuple = ()


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _whole(least: int) -> Field:
    """Integers (or floats such as ``8.0``) from ``least`` up (below 2**63: a count, not a huge number)."""
    return Field(
        f"a whole number >= {least}",
        lambda v: (
            (
                isinstance(v, int)
                and not isinstance(v, bool)
                or isinstance(v, float)
                and v.is_integer()
            )
            and least <= v < 2**63
        ),
    )


def _finite(v) -> bool:
    """A JSON value holding no NaN or infinity, however deep."""
    if isinstance(v, float):
        return math.isfinite(v)
    if isinstance(v, dict):
        return all(_finite(x) for x in v.values())
    if isinstance(v, list):
        return all(_finite(x) for x in v)
    return True


def _reported(v) -> bool:
    """One of lmms-eval's numbers: text ("N/A") or a number, NaN included (the export's "not measured")."""
    return isinstance(v, str) or _number(v) and not (isinstance(v, float) and math.isinf(v))


def obj(required: tuple = (), **fields: Field) -> Field:
    return Field("an object", lambda v: isinstance(v, dict), fields, required=required)


def listof(each: Field) -> Field:
    return Field("a list", lambda v: isinstance(v, list), each=each)


TEXT = Field("text", lambda v: isinstance(v, str))
FLAG = Field("true or false", lambda v: isinstance(v, bool))
COUNT, POSITIVE = _whole(0), _whole(1)
INTEGER = Field("a whole number", lambda v: isinstance(v, int) and not isinstance(v, bool))
FINITE = Field(
    "JSON without NaN or infinity", _finite
)  # a value recorded as it is (settings, model_args)
# lmms-eval wraps a doc's replies in lists; a reply of another type is kept as its JSON
REPLY = Field("text, or lists of it, without NaN or infinity", _finite)
REPORTED = Field("a number or text", _reported)
DOC_ID = Field(
    "a whole number or text",
    lambda v: isinstance(v, str) or isinstance(v, int) and not isinstance(v, bool),
)

# results.json as a whole; each task VQA Lab exported is checked further (TASK: another benchmark's is not read)
RESULTS = obj(
    results=obj(**{"*": obj()}),
    configs=obj(**{"*": obj(metadata=obj(vqalab_task=TEXT))}),
    config=obj(
        model=TEXT,
        model_args=FINITE,
        model_backend=TEXT,
        **{k: FINITE for k in ("limit", "offset", "gen_kwargs", "random_seed")},
    ),
    lmms_eval_version=TEXT,
    model_name=TEXT,
    model_source=TEXT,
    **{
        k: FINITE for k in ("system_instruction", "chat_template", "fewshot_as_multiturn", "n-shot")
    },
)
TASK = {
    "configs": obj(
        generation_kwargs=obj(max_new_tokens=POSITIVE, **{"*": FINITE}),
        dataset_kwargs=obj(data_files=obj(test=TEXT)),
    ),
    "results": obj(**{"*": REPORTED}),
}
SAMPLE = obj(
    doc_id=DOC_ID,
    input=TEXT,
    resps=REPLY,
    filtered_resps=REPLY,
    token_counts=listof(obj(input_tokens=COUNT, output_tokens=COUNT)),
    **{ROW_KEY: obj(id=TEXT, task=TEXT, raw=TEXT)},
)
EXPORT = obj(
    ("dataset", "name", "tasks", "question_first", "max_new_tokens", "scoring"),
    dataset=TEXT,
    name=TEXT,
    tasks=listof(TEXT),
    question_first=FLAG,
    max_new_tokens=obj(**{"*": POSITIVE}),
    scoring=obj(
        ("n_resamples", "seed"), n_resamples=POSITIVE, seed=INTEGER, tasks=obj(**{"*": obj()})
    ),
    settings_from=obj(model=TEXT, profile=TEXT),
    items_sha256=TEXT,
)


def check_tasks(results: dict, tasks, where: str) -> None:
    """Check what results.json holds of each of ``tasks`` (VQA Lab's) against :data:`TASK`."""
    for task in tasks:
        for part, schema in TASK.items():
            value = (results.get(part) or {}).get(task)
            if value is not None:
                check(value, schema, where, f"{part}.{task}")


def _got(v) -> str:
    if v is None or isinstance(v, bool):
        return json.dumps(v)
    if isinstance(v, float) and not math.isfinite(v):
        return json.dumps(v)  # NaN, Infinity, -Infinity: as the file spells them
    if isinstance(v, str):
        return f"text {v[:60]!r}" + ("..." if len(v) > 60 else "")
    shown = repr(v)
    return {dict: "an object", list: "a list"}.get(
        type(v), shown if len(shown) <= 60 else f"{shown[:60]}..."
    )


def _lone_surrogate(v, path: str) -> tuple[str, str] | None:
    """(where, the text) of the first text or key in ``v`` that UTF-8 cannot hold, else None."""
    if isinstance(v, str):
        try:
            v.encode("utf-8")
        except UnicodeEncodeError:
            return path, v
    elif isinstance(v, dict):
        for k, x in v.items():
            found = _lone_surrogate(k, f"{path} (a key)") or _lone_surrogate(
                x, f"{path}.{k}" if path else str(k)
            )
            if found:
                return found
    elif isinstance(v, list):
        return next(
            filter(None, (_lone_surrogate(x, f"{path}[{i}]") for i, x in enumerate(v))), None
        )
    return None


def check(value, schema: Field, where: str, path: str = "") -> None:
    """Raise :class:`ForeignError` (``where: field path: expected ..., got ...``) unless ``value`` is
    what ``schema`` says, every field below it too."""
    name = path or "(the whole file)"
    if not schema.ok(value):
        raise ForeignError(f"{where}: field {name}: expected {schema.expected}, got {_got(value)}")
    if not schema.fields and schema.each is None:
        found = _lone_surrogate(value, path)
        if found:
            at, text = found
            i = next(i for i, c in enumerate(text) if 0xD800 <= ord(c) <= 0xDFFF)
            raise ForeignError(
                f"{where}: field {at or name}: expected text, got text with a lone surrogate "
                f"({text[i]!r} at character {i}), which UTF-8 cannot hold: a broken file"
            )
    if schema.each is not None:
        for i, x in enumerate(value):
            check(x, schema.each, where, f"{path}[{i}]")
    if schema.fields and isinstance(value, dict):
        for key in schema.required:
            if value.get(key) is None:
                raise ForeignError(
                    f"{where}: field {f'{path}.{key}' if path else key}: expected "
                    f"{schema.fields[key].expected}, got nothing"
                )
        for key, x in value.items():
            sub = schema.fields.get(key, schema.fields.get("*"))
            if sub is not None:
                _key(key, where, path)
                if x is not None:
                    check(x, sub, where, f"{path}.{key}" if path else key)


def _key(key: str, where: str, path: str) -> None:
    if _lone_surrogate(key, path):
        raise ForeignError(
            f"{where}: a key of {path or 'the file'}: expected text, got text with a lone surrogate "
            f"({key!r}), which UTF-8 cannot hold: a broken file"
        )


# --- reading, within limits ---------------------------------------------------------------------------


def regular_file(path: Path) -> int:
    """The size of ``path``, a regular file (a link to one is followed); anything else - a device
    such as ``/dev/zero``, a pipe, a folder - raises :class:`ForeignError` before it is opened."""
    try:
        st = path.stat()
    except OSError as e:
        raise ForeignError(f"{path}: cannot read it ({e.strerror})") from None
    if not stat.S_ISREG(st.st_mode):
        target = f" (a link to {path.resolve()})" if path.is_symlink() else ""
        raise ForeignError(
            f"{path}: not a regular file{target}: a device, a pipe or a folder is no lmms-eval output"
        )
    return st.st_size


def read_json(path: Path, what: str, schema: Field) -> dict:
    """A JSON file of at most :data:`MAX_JSON_BYTES`, checked against ``schema``."""
    if regular_file(path) > MAX_JSON_BYTES:
        raise ForeignError(
            f"{path}: {what} larger than {MAX_JSON_BYTES:,} bytes: not one this import reads"
        )
    try:
        with path.open("rb") as f:
            data = f.read(MAX_JSON_BYTES + 1)
        if len(data) > MAX_JSON_BYTES:
            raise ForeignError(
                f"{path}: {what} grew past {MAX_JSON_BYTES:,} bytes while it was read"
            )
        value = json.loads(data.decode("utf-8"))
    except OSError as e:
        raise ForeignError(f"{path}: cannot read {what}: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise ForeignError(
            f"{path}: {what} is not UTF-8 text ({e.reason} at byte {e.start})"
        ) from None
    except (
        ValueError,
        RecursionError,
    ) as e:  # JSONDecodeError, a number of too many digits, nesting too deep
        raise ForeignError(f"{path}: cannot read {what}: {e}") from None
    check(value, schema, str(path))
    return value


def _lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """``(line number, line)`` of a file, each at most :data:`MAX_LINE_BYTES` (a longer one raises)."""
    regular_file(path)
    with path.open("rb") as f:
        n = 0
        while line := f.readline(MAX_LINE_BYTES + 1):
            n += 1
            if len(line) > MAX_LINE_BYTES:
                raise ForeignError(
                    f"{path}:{n}: a line longer than {MAX_LINE_BYTES:,} bytes: not an lmms-eval "
                    f"sample (a damaged file, or another kind of file)"
                )
            yield n, line


def read_samples(path: Path) -> Iterator[tuple[int, dict]]:
    """``(line number, sample)`` of a samples file, each checked against :data:`SAMPLE`; a line that
    is not one raises :class:`ForeignError` naming the file and the line. Not
    :func:`lib.io.read_jsonl`: the import's later errors (a row without the export's row, an unknown
    or repeated item) name the sample's line too, and a file of another harness gets its own hint."""
    for n, line in _lines(path):
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as e:
            raise ForeignError(
                f"{path}:{n}: not UTF-8 text ({e.reason} at byte {e.start})"
            ) from None
        if not text.strip():
            continue
        try:
            sample = json.loads(text)
        except json.JSONDecodeError as e:
            raise ForeignError(
                f"{path}:{n}: not a JSON line ({e.msg} at column {e.colno}): is this an "
                f"lmms-eval --log_samples file, whole?"
            ) from None
        except (ValueError, RecursionError) as e:  # a number of too many digits, nesting too deep
            raise ForeignError(f"{path}:{n}: not a JSON line ({e})") from None
        if not isinstance(sample, dict):
            raise ForeignError(f"{path}:{n}: a sample is a JSON object, got {_got(sample)}")
        check(sample, SAMPLE, f"{path}:{n}")
        yield n, sample


# --- which files make one lmms-eval run ------------------------------------------------------------

SAMPLES = re.compile(
    r"^(?P<date>.+?)_samples_(?P<task>.+)\.jsonl$"
)  # lmms-eval's EvaluationTracker names


def lmms_eval_files(path: str | Path) -> tuple[dict[str, Path], Path | None]:
    """One lmms-eval run's samples files by task and its ``results.json`` (None when absent).
    ``path``: its ``--output_path`` or model folder (holding one run), a samples file (that task
    alone) or a ``*_results.json`` (every task of that run)."""
    path = Path(path)
    if not path.is_dir() and (path.exists() or path.is_symlink()):
        regular_file(path)  # a device, a pipe or a broken link is refused here
    if path.is_file():
        m = SAMPLES.match(path.name)
        if m:
            folder, date, files = path.parent, m["date"], {m["task"]: path}
        elif path.name.endswith("_results.json"):
            folder, date = path.parent, path.name.removesuffix("_results.json")
            files = {
                m["task"]: f
                for f in sorted(folder.glob(f"{date}_samples_*.jsonl"))
                if (m := SAMPLES.match(f.name))
            }
            if not files:
                raise ForeignError(
                    f"{path}: no samples files beside it ({date}_samples_<task>.jsonl): rerun lmms-eval "
                    f"with --log_samples"
                )
        else:
            raise ForeignError(
                f"{path}: not an lmms-eval samples file (<date>_samples_<task>.jsonl) nor its "
                f"<date>_results.json"
            )
    elif path.is_dir():
        found = [
            (f, m) for f in sorted(path.rglob("*_samples_*.jsonl")) if (m := SAMPLES.match(f.name))
        ]
        runs = sorted({(f.parent, m["date"]) for f, m in found})
        if not runs:
            raise ForeignError(
                f"{path}: no lmms-eval samples (<date>_samples_<task>.jsonl) here: run lmms-eval with "
                f"--log_samples --output_path {path}"
            )
        if len(runs) > 1:
            named = ", ".join(f"{p.name}/{d}" for p, d in runs)
            raise ForeignError(
                f"{path} holds {len(runs)} lmms-eval runs ({named}): "
                f"name one by its <date>_results.json or a samples file"
            )
        (folder, date), files = runs[0], {m["task"]: f for f, m in found}
    else:
        raise ForeignError(f"{path}: no such file or folder")
    results = folder / f"{date}_results.json"
    return files, results if results.exists() else None
