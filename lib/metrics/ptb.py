"""coco-caption's tokenisation (Stanford's PTBTokenizer, the jar pycocoevalcap ships, run with Java),
with the tool's chatter kept out of the notebooks.

The jar writes a line per call to its standard error ("PTBTokenizer tokenized 153 tokens at ...",
"Untokenizable: ..."), which a notebook shows as a red stderr block under every scoring cell.
Here the process's file descriptor 2, which the Java child inherits, is pointed at a temporary
file while it runs, and each line is then logged (logger ``lib.metrics.ptb``, INFO): nothing is
lost, and a notebook shows it only when logging asks for it. Hand-written because pycocoevalcap
offers no way to silence the jar, and ``contextlib.redirect_stderr`` moves Python's stream only,
not a child process's.
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

LOG = logging.getLogger(__name__)


@contextmanager
def child_stderr_logged(logger: logging.Logger = LOG) -> Iterator[None]:
    """While the block runs, what this process and its children write to file descriptor 2 goes
    to a temporary file; afterwards each non-empty line is logged at INFO on ``logger``."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            for line in tmp.read().decode("utf-8", errors="replace").splitlines():
                if line.strip():
                    logger.info(line)


def ptb_tokenize(texts: Sequence[str]) -> list[str]:
    """coco-caption's tokenisation: Stanford's PTBTokenizer lower-casing, then its punctuation
    tokens dropped - what ``pycocoevalcap`` feeds every caption metric. One Java process for all
    the texts; empty texts stay empty; the jar's messages logged (:func:`child_stderr_logged`)."""
    from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer

    keep = [i for i, t in enumerate(texts) if t.strip()]
    out = [""] * len(texts)
    if keep:
        with child_stderr_logged():
            tokenized = PTBTokenizer().tokenize({i: [{"caption": texts[i]}] for i in keep})
        for i in keep:
            out[i] = tokenized[i][0]
    return out
