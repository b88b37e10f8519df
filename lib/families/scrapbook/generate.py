"""Scrapbook dataset generation: sets, backgrounds, arrangements, images, questions, streamed out.

The top-level flow (:func:`generate`) and the speed machinery it runs: PNGs are encoded on threads
(:class:`BackgroundIO`), and with ``question_worker`` the question lines are made in a worker
process while this one renders scenes (:class:`QuestionLines`; the same bytes, sooner on a large set). The parts it composes: :mod:`~lib.families.scrapbook.params` (the
parameters and their checks), :mod:`~lib.families.scrapbook.scenes` (object sets, units and the
images of one unit), :mod:`~lib.families.scrapbook.items` (the question lines of an image and
their summary) and :mod:`~lib.families.scrapbook.merge` (writing a finished folder, and merging
shards, which restores the unsharded files byte for byte).

Choices where the paper is silent are in :mod:`lib.families.scrapbook.layout`,
:mod:`lib.families.scrapbook.questions` and :mod:`lib.families.scrapbook.programs`, and in the
generator's own modules:
- deterministic selection slides a window one position per set over the vocabulary lists
  (classes, colours) and over the sizes ``70 + 40k`` for ``k < N``, wrapping around;
- the colour list is alphabetical with brown and gray (``vocabulary.yaml`` says why: Figure 9 and
  Tables 5-6 use them; with it the window reproduces Table 5's present counts);
- plain backgrounds are the vocabulary colours unused by the set's objects, in vocabulary order;
  photographs are resized and centre-cropped to the canvas size (the paper's 1280x768 by default);
- question sets per image: the programs of ``templates.yaml``
  (:func:`lib.families.scrapbook.items.queries`); the wrong absolute positions are where the
  unit's other objects are or will be added, completed to ``n_wrong_positions`` (3, as Table 6
  counts) by seeded draws; wrong colours and shapes are drawn
  with the seed from the dataset's own values; a question never needs more than the paper's four
  concepts (a relative question with a two-attribute subject describes its reference by one attribute);
- ``n_questions_per_type`` paraphrases are drawn per query (4.4's "five questions about the
  presence of an object given a specific position"); every absent arrangement object is asked
  about (the paper's absent counts are subsampled in a way it does not describe:
  :mod:`lib.families.scrapbook.paper`).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import traceback
from collections import Counter, deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from pathlib import Path

from PIL import Image

from lib.core.paths import cache_dir
from lib.families.scrapbook.items import Summary, compact_json, item_jsonl
from lib.families.scrapbook.merge import built_aside, finish_dataset
from lib.families.scrapbook.params import ScrapbookParamError, ScrapbookParams
from lib.families.scrapbook.scenes import build_unit, object_sets, prepare, set_backgrounds, units
from lib.io import HashingWriter


def generate(
    params: ScrapbookParams,
    out_dir: str | Path,
    shard: int = 0,
    num_shards: int = 1,
    progress: bool = True,
    question_worker: bool = False,
) -> dict:
    """Generate (this shard of) the dataset into ``out_dir`` as a stream; returns the summary.

    Writes ``images/`` and ``masks/`` (PNG; mask pixel k = object k, 0 = background),
    ``scenes.jsonl``, ``items.jsonl`` (one :class:`lib.core.schema.Item` per line), ``counts.csv``,
    ``concepts.csv``, ``summary.json`` and ``dataset.json`` (last, with the manifest readers check:
    :mod:`lib.io`). Memory stays flat: rows go to disk as they are made. The folder is built beside
    ``out_dir`` under a name no other run uses and swapped in when complete (:func:`built_aside`),
    so a killed run leaves the old dataset or the new one, never a mix, and two runs building the
    same dataset at once each swap in a whole one. ``question_worker``: make the question lines
    in a forked process while this one renders (:class:`QuestionLines`), the same bytes.
    """
    if not 0 <= shard < num_shards:
        raise ScrapbookParamError(f"--shard {shard} must be in [0, --num-shards={num_shards})")
    return built_aside(
        Path(out_dir),
        lambda tmp: _generate(params, tmp, shard, num_shards, progress, question_worker),
    )


def _generate(
    params: ScrapbookParams,
    out: Path,
    shard: int,
    num_shards: int,
    progress: bool,
    question_worker: bool,
) -> dict:
    from tqdm.auto import tqdm

    (out / "images").mkdir(parents=True, exist_ok=True)
    (out / "masks").mkdir(parents=True, exist_ok=True)
    res = prepare(params, cache_dir("scrapbook"))
    sets = object_sets(params, res)
    shapes = list(params.shapes) if params.objects == "shapes" else sorted(res.cutouts)
    colors = list(params.colors)
    backgrounds = [set_backgrounds(params, res, objs, s) for s, objs in enumerate(sets)]
    mine = [u for i, u in enumerate(units(params)) if i % num_shards == shard]
    failures: Counter = Counter()
    images = 0
    with (
        open(out / ".scenes.jsonl.part", "wb") as scenes_f,
        QuestionLines(
            out / ".items.jsonl.part", params, shapes, colors, question_worker
        ) as questions,
        BackgroundIO() as io,
    ):
        for unit in tqdm(mine, desc="scrapbook units", disable=not progress):
            s, b = unit[0], unit[1]
            for step in build_unit(params, unit, sets[s], backgrounds[s][b], failures):
                io.save(step.image, out / step.scene["image"])
                io.save(
                    step.mask, out / step.scene["mask"], compress_level=1
                )  # label maps: fast zlib suffices
                io.write(scenes_f, (compact_json(step.scene) + "\n").encode())
                questions.add(step.scene)
                images += 1
    (out / ".items.jsonl.part").replace(out / "items.jsonl")
    (out / ".scenes.jsonl.part").replace(out / "scenes.jsonl")
    questions.summary.images = images
    info = {
        "params": asdict(params),
        "shard": shard,
        "num_shards": num_shards,
        "units": len(mine),
        "placement_failures": dict(failures),
        "skipped_files": res.skipped,
        "sets": [[o.attributes() for o in objs] for objs in sets],
    }
    return finish_dataset(out, questions.summary, info, questions.bytes, questions.sha256)


class QuestionLines:
    """The question lines of each image (:func:`item_jsonl`), written to ``path`` with their manifest
    (``bytes`` and ``sha256``) and counted in ``summary``: on this thread, or with ``worker`` by a
    worker process while this one renders scenes and encodes PNGs (:func:`_generate`). Both are
    Python that holds the GIL, so on one process the question lines, the largest share of a large
    set's time, wait for the rendering and the other way round. Scenes go to the worker through a
    pipe, in order (a full pipe makes the sender wait: memory stays flat); the worker's error is
    raised here with its traceback. Where processes cannot be forked the lines are made on this
    thread, the same bytes. Hand-written: a pool would not keep one ordered file and its running
    digest."""

    def __init__(
        self,
        path: Path,
        params: ScrapbookParams,
        shapes: list[str],
        colors: list[str],
        worker: bool = False,
    ):
        self.path, self._args, self.worker = Path(path), (params, shapes, colors), worker
        self.summary, self.bytes, self.sha256 = Summary(), 0, ""  # set when the context exits
        self._conn = self._proc = self._here = None

    def __enter__(self) -> QuestionLines:
        if self.worker and "fork" in multiprocessing.get_all_start_methods():
            ctx = multiprocessing.get_context("fork")
            self._conn, child = ctx.Pipe()
            self._proc = ctx.Process(
                target=_question_worker,
                args=(child, self._conn, self.path, *self._args),
                daemon=True,
                name="scrapbook-questions",
            )
            self._proc.start()
            child.close()
        else:
            self._here = _ItemsFile(self.path, *self._args)
        return self

    def add(self, scene: dict) -> None:
        if self._here is not None:
            self._here.add(scene)
            return
        try:
            self._conn.send(scene)
        except OSError:  # the worker has stopped: its error, or its exit code
            self._result()

    def __exit__(self, exc_type, *exc) -> None:
        if self._here is not None:
            self.summary, self.bytes, self.sha256 = self._here.close()
            return
        try:
            if exc_type is not None:
                self._proc.terminate()
                return
            self._conn.send(None)
            self.summary, self.bytes, self.sha256 = self._result()
        finally:
            self._proc.join()
            self._conn.close()

    def _result(self) -> tuple[Summary, int, str]:
        """What the worker sends back when it is done; its error (or its death) raised here."""
        try:
            status, payload = self._conn.recv()
        except EOFError:
            self._proc.join()
            raise RuntimeError(
                f"{self.path}: the question-lines worker died (exit code {self._proc.exitcode})"
            ) from None
        if status == "error":
            raise RuntimeError(
                f"{self.path}: making the question lines failed in the worker:\n{payload}"
            )
        return payload


class _ItemsFile:
    """An items file being written, image by image (:func:`item_jsonl`), with its size and SHA-256
    and the :class:`Summary` of its questions: what :class:`QuestionLines` runs in its worker, or
    here."""

    def __init__(self, path: Path, params: ScrapbookParams, shapes: list[str], colors: list[str]):
        self._f = open(path, "wb")  # noqa: SIM115 - the writer owns the file until its close()
        self._items, self._args, self.summary = (
            HashingWriter(self._f),
            (params, shapes, colors),
            Summary(),
        )

    def add(self, scene: dict) -> None:
        self._items.write(item_jsonl(scene, *self._args, self.summary).encode())

    def close(self) -> tuple[Summary, int, str]:
        self._f.close()
        return self.summary, self._items.bytes, self._items.hexdigest()


def _question_worker(
    conn, parent_end, path: Path, params: ScrapbookParams, shapes: list[str], colors: list[str]
) -> None:
    """:class:`QuestionLines`' worker: each scene received, its lines written, until ``None``; then
    ``("ok", (summary, bytes, sha256))`` or ``("error", traceback)`` sent back. The parent's end of
    the pipe, inherited by the fork, is closed first: a parent that dies (killed) then ends this
    worker's ``recv`` instead of leaving it waiting for ever."""
    parent_end.close()
    try:
        items = _ItemsFile(path, params, shapes, colors)
        while (scene := conn.recv()) is not None:
            items.add(scene)
        conn.send(("ok", items.close()))
    except EOFError:
        return  # the parent is gone: nobody to answer (the folder it was building is cleared by the next build)
    except BaseException:
        with contextlib.suppress(OSError):  # the parent is gone
            conn.send(("error", traceback.format_exc()))
    finally:
        conn.close()


class BackgroundIO:
    """PNG encoding and file writes on worker threads, so question generation overlaps them (zlib
    and file writes release the GIL). Text writes keep their order (one writer thread); at most
    ``max_pending`` jobs wait, so memory stays flat however large the dataset."""

    def __init__(self, image_workers: int = 2, max_pending: int = 16):
        self._images = ThreadPoolExecutor(image_workers, thread_name_prefix="scrapbook-png")
        self._text = ThreadPoolExecutor(1, thread_name_prefix="scrapbook-jsonl")
        self._pending: deque = deque()
        self._max = max_pending

    def save(self, image: Image.Image, path: Path, **options) -> None:
        self._track(self._images.submit(image.save, path, **options))

    def write(self, f, text: str) -> None:
        self._track(self._text.submit(f.write, text))

    def _track(self, future) -> None:
        self._pending.append(future)
        while len(self._pending) > self._max:
            self._pending.popleft().result()  # re-raises a worker's error here

    def __enter__(self) -> BackgroundIO:
        return self

    def __exit__(self, *exc) -> None:
        try:
            while self._pending:
                self._pending.popleft().result()
        finally:
            self._images.shutdown()
            self._text.shutdown()
