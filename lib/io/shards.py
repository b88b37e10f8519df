"""The shard folders of a stage run as an array of jobs (stages 04 and 06): each shard holds its
folder's lock while it writes it; a merge holds them all while it reads them, and removes them only
once everything made from them is written."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from lib.core.paths import RunBusy, RunLock


@contextmanager
def held(
    out: Path, folders: list[Path], what: str, doing: str, error: Callable[[str], Exception]
) -> Iterator[None]:
    """The lock (:class:`lib.core.paths.RunLock`) of each of the shard ``folders`` there is, held for
    the block; ``error`` raised naming every one a shard process still holds (``what``: the shards'
    name, ``doing``: what such a process is still doing), before anything is merged."""
    with ExitStack() as locks:
        busy = []
        for k, folder in enumerate(folders):
            if not folder.is_dir():
                continue  # a shard never made: the merge's own check names it
            try:
                locks.enter_context(RunLock(folder))
            except RunBusy:
                busy.append(f"{folder}: shard {k} of {len(folders)} is still {doing}")
        if busy:
            wait = "wait for those shards to finish, then merge again (nothing was written)"
            raise error("\n".join([f"{out}: the {what} cannot be merged yet:", *busy, wait]))
        yield


def remove(folders: list[Path], shards: Path) -> None:
    """The merged shard ``folders`` removed (one that is a link: the link only), then ``shards``
    when that leaves it empty; a ``shards`` that is a link (to a scratch disk) is the user's."""
    for folder in folders:
        folder.unlink() if folder.is_symlink() else shutil.rmtree(folder)
    if not shards.is_symlink() and not any(shards.iterdir()):
        shards.rmdir()
