"""WordNet 3.0 for METEOR: NLTK reads it from ``<nltk_data>/corpora/wordnet``; offline, Debian's
``wordnet-base`` and ``wordnet-sense-index`` packages provide the files (``python -m lib.metrics.wordnet`` installs them).
The project reads it in English only (:func:`ensure_wordnet`).
"""

from __future__ import annotations

import re
import shutil
import sys
import warnings
from functools import lru_cache
from pathlib import Path

WORDNET_SYSTEM = Path("/usr/share/wordnet")  # Debian's wordnet-base (WordNet 3.0)
_LEXNAMES_MAN = Path("/usr/share/man/man5/lexnames.5WN.gz")
_CATEGORY = {"adj": 3, "adv": 4, "noun": 1, "verb": 2}


def nltk_data_dir() -> Path:
    """Where the project puts NLTK data: ``<sys.prefix>/nltk_data``, a path NLTK searches by default."""
    return Path(sys.prefix) / "nltk_data"


@lru_cache(maxsize=1)
def ensure_wordnet():
    """NLTK's WordNet reader, English only (:func:`english_wordnet`), installing WordNet from
    Debian's ``wordnet-base`` into :func:`nltk_data_dir` when NLTK cannot find one (copies the
    files, writes ``lexnames``)."""
    import nltk

    try:
        root = nltk.data.find("corpora/wordnet")
    except LookupError:
        root = install_wordnet()
    return english_wordnet(root)


def english_wordnet(root):
    """NLTK's :class:`WordNetCorpusReader` on ``root`` without the Open Multilingual Wordnet.

    Hand-made because of one step of NLTK's reader: on every load it maps the loaded WordNet's
    synsets to those of "wordnet" (``map_wn``, reading ``index.sense``'s 200,000 lines twice through
    NLTK's stream reader) - most of the seconds a process spends loading WordNet. The map serves
    only the OMW's other languages (it re-keys their data files as they load); METEOR and the topic
    words look up English lemmas, and no OMW is installed, so this reader skips it. Every English
    lookup is NLTK's own (tests/metrics/test_text.py compares it with NLTK's stock reader)."""
    from nltk.corpus.reader import WordNetCorpusReader

    class EnglishWordNet(WordNetCorpusReader):
        def map_wn(self, version="wordnet"):
            return None  # the OMW's map: no other language is read

    with warnings.catch_warnings():  # "the multilingual functions are not available": as meant
        warnings.simplefilter("ignore")
        return EnglishWordNet(root, None)


def install_wordnet(target: Path | None = None) -> Path:
    """Copy Debian's WordNet 3.0 into ``<nltk_data>/corpora/wordnet`` with the ``lexnames`` file NLTK needs."""
    import gzip

    import nltk

    data = target or nltk_data_dir()
    dest = data / "corpora" / "wordnet"
    if not all((WORDNET_SYSTEM / f).exists() for f in ("data.noun", "index.sense")):
        raise LookupError(
            "METEOR needs WordNet 3.0 and none was found: install the Debian package "
            "`wordnet-base` and `wordnet-sense-index` (apt-get install wordnet-base wordnet-sense-index; `make` does it when run as root), "
            "or, online, run python -c \"import nltk; nltk.download('wordnet')\"."
        )
    dest.mkdir(parents=True, exist_ok=True)
    for f in WORDNET_SYSTEM.iterdir():
        if f.is_file():
            shutil.copyfile(
                f, dest / f.name
            )  # a copy: NLTK rejects corpus roots reached through links
    lines = []
    with gzip.open(_LEXNAMES_MAN, "rt", errors="replace") as man:
        for raw in man:
            m = re.match(r"^(\d\d)\s+((adj|adv|noun|verb)\.\w+)", raw)
            if m:
                lines.append(f"{m.group(1)}\t{m.group(2)}\t{_CATEGORY[m.group(3)]}")
    if len(lines) != 45:
        raise LookupError(
            f"could not read WordNet's 45 lexicographer file names from {_LEXNAMES_MAN} (got {len(lines)})"
        )
    (dest / "lexnames").write_text("\n".join(lines) + "\n")
    if str(data) not in nltk.data.path:
        nltk.data.path.insert(0, str(data))
    return nltk.data.find("corpora/wordnet")


if __name__ == "__main__":  # python -m lib.metrics.text: set up WordNet for METEOR (make does this)
    print(f"WordNet {ensure_wordnet().get_version()} for METEOR: {ensure_wordnet().root}")
