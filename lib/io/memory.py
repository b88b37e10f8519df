"""Speed tricks for reading and holding many records, and the reason for each.

- **One ``json.loads`` per chunk of lines** (:func:`decode_lines`, ``CHUNK_LINES`` lines at a
  time): the lines are wrapped as one JSON list (``[[line1],[line2],...]``) and decoded by one
  call, because the decoder shares equal keys within a call: the records of a chunk share their
  keys' strings instead of each holding copies, and one call is faster than one per line. The
  reading is kept only when it is certain to be the per-line one - each line gives a
  one-element list holding an object: a line left open (``{"a": [1``) meets its closing bracket
  inside an object and fails, a line holding two objects gives a longer list, and each line
  keeps its newline, so no string runs across lines. Otherwise the lines are decoded one by one
  and the bad line is named (``_decode_chunk``).
- **Short strings shared between records** (:func:`share_strings`): the records of a dataset
  repeat the same labels, image paths and answers, which would otherwise be held once per
  record; the reader interns those up to ``SHARED_STRING_CHARS`` characters in the fields that
  repeat (the keys are shared by the decoder, above). A pass that lets each record go at once
  skips it (``share=False``): interning would cost it time and save nothing.
- **The cyclic garbage collector paused while records are built** (:func:`paused_gc`): records
  hold no cycles, and the collector's passes over a growing list of them would be most of the
  time of reading a dataset.
- **Freed memory handed back after a phase** (:func:`release_memory`): the collector's pass, then
  glibc's ``malloc_trim``. glibc keeps freed heap memory for reuse, and its dynamic mmap
  threshold moves large buffers (numpy arrays, tensors) into that heap, so what a finished phase
  freed would still count in the next phase's peak resident memory. Hand-written, through
  ``ctypes``: the standard library has no binding for ``malloc_trim`` (a no-op under another libc).
  The collector's pass is skipped (``collect=False``) where the phase's garbage holds no cycles -
  a pass over records, a model its last reference freed (:class:`Outlived`) - since it walks every
  object the process holds, torch's and transformers' included, for nothing to find (stage 06's
  largest cost of its own, ``benchmarks/overhead.py``); the trim alone costs next to nothing.
"""

from __future__ import annotations

import ctypes
import functools
import gc
import json
import sys
import weakref
from contextlib import contextmanager

CHUNK_LINES = 2048  # lines decoded by one json.loads (see decode_lines)
SHARED_STRING_CHARS = 64  # labels, paths and answers up to this length are shared between records


def share_strings(record, fields: tuple[str, ...]):
    """``record`` (a decoded JSON object) with the short strings under ``fields`` interned, in
    place, at any depth (why: the module docstring); anything but an object is returned as it is,
    for the record's own check to refuse."""
    if type(record) is dict:
        for k in fields:
            if k in record:
                record[k] = _shared(record[k])
    return record


def _shared(value, intern=sys.intern):
    kind = type(value)
    if kind is str:
        return intern(value) if len(value) <= SHARED_STRING_CHARS else value
    if kind is dict or kind is list:
        for k, v in value.items() if kind is dict else enumerate(value):
            t = type(v)
            if t is str:
                if len(v) <= SHARED_STRING_CHARS:
                    value[k] = intern(v)
            elif t is dict or t is list:
                _shared(v)
    return value


def release_memory(collect: bool = True) -> None:
    """Hand memory freed by a finished phase back to the system: the garbage collector's pass
    (unless ``collect=False``: the phase left no cycles), then glibc's ``malloc_trim`` (no-op
    elsewhere; why: the module docstring)."""
    if collect:
        gc.collect()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


class Outlived:
    """Weak references to objects a phase let go (:meth:`watch`), to tell whether any outlived its
    last reference (:meth:`__bool__`): held by a reference cycle, which only the collector's pass
    frees. An object that takes no weak reference counts as outlived."""

    def __init__(self):
        self._refs: list = []
        self._unwatchable = False

    def watch(self, obj) -> None:
        self._refs = [ref for ref in self._refs if ref() is not None]
        try:
            self._refs.append(weakref.ref(obj))
        except TypeError:
            self._unwatchable = True

    def __bool__(self) -> bool:
        return self._unwatchable or any(ref() is not None for ref in self._refs)


@functools.cache
def _malloc_trim():
    """glibc's ``malloc_trim`` from the running process's own symbols, or None (another libc)."""
    try:
        return getattr(ctypes.CDLL(None), "malloc_trim", None)
    except (OSError, TypeError):  # TypeError: Windows has no handle for the process itself
        return None


@contextmanager
def paused_gc():
    """The cyclic garbage collector paused while many records are built (and enabled again after,
    if it was; why: the module docstring)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def decode_lines(chunk: list[str | bytes]) -> list | None:
    """The JSON object on each line of ``chunk``, decoded by one ``json.loads`` over the lines,
    each wrapped in brackets (``[[line1],[line2],...]``); None when that reading is not certain,
    for the caller to decode line by line and name the bad line (why one call, and why the
    reading it keeps is certain: the module docstring)."""
    if not chunk:
        return []
    binary = isinstance(chunk[0], bytes)
    text = b"[[" + b"],[".join(chunk) + b"]]" if binary else "[[" + "],[".join(chunk) + "]]"
    try:
        rows = json.loads(text)
    except json.JSONDecodeError:
        return None
    if len(rows) != len(chunk) or not all(
        type(r) is list and len(r) == 1 and type(r[0]) is dict for r in rows
    ):
        return None
    return [r[0] for r in rows]


def _decode_chunk(lines: list[str | bytes], error) -> list:
    """Each line's JSON value: the chunk at once (:func:`decode_lines`) or, where that reading is
    not certain, line by line, raising ``error(k, e)`` for the first line ``k`` that is no JSON."""
    rows = decode_lines(lines)
    if rows is not None:
        return rows
    out = []
    for k, line in enumerate(lines):
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError as e:
            raise error(k, e) from None
    return out
