"""The placer's tries compiled: the same positions on the same random stream, without Python's
cost per draw.

:meth:`lib.families.scrapbook.layout.Placer.place` draws a position (x, then y, each
``randint``'s stream) until the box fits its region, overlaps no other box and passes a check;
a Scrapbook set makes tens of thousands of placements of up to 400 tries each, and in Python the
draws and the overlap tests were most of a set's generation. Here numba runs the Mersenne Twister
behind ``random.Random`` from the generator's own state (CPython's ``genrand_uint32``: the same
32-bit words), walks every try as the Python loop does (``_randbelow``: the top ``k`` bits of a
word, drawn again while out of range), and returns the positions that fit with the word count
after each; the caller checks them in order and moves the generator on to just after the one it
takes: every box and every later draw is the one the Python loop gives, seed for seed.
Hand-written: neither random nor numpy offers ``randint``'s rejection stream compiled.
"""

from __future__ import annotations

import random

import numpy as np

N, M = 624, 397  # the Mersenne Twister's state words and its shift (CPython's _randommodule.c)


def _mersenne():
    """CPython's Mersenne Twister and ``_randbelow``, compiled: ``(below, advance)``."""
    import numba  # deferred on purpose: compiling is needed only where a Scrapbook set is made

    @numba.njit(cache=True)
    def word(mt, pos):
        """The next 32-bit output and the position after it (``mt`` twisted in place at 624)."""
        if pos >= N:
            for kk in range(N):
                y = (mt[kk] & np.uint32(0x80000000)) | (mt[(kk + 1) % N] & np.uint32(0x7FFFFFFF))
                mt[kk] = (
                    mt[(kk + M) % N]
                    ^ (y >> np.uint32(1))
                    ^ (np.uint32(0x9908B0DF) * (y & np.uint32(1)))
                )
            pos = 0
        y = mt[pos]
        y ^= y >> np.uint32(11)
        y ^= (y << np.uint32(7)) & np.uint32(0x9D2C5680)
        y ^= (y << np.uint32(15)) & np.uint32(0xEFC60000)
        y ^= y >> np.uint32(18)
        return y, pos + 1

    @numba.njit(cache=True)
    def below(mt, pos, n, shift):
        """``_randbelow(n)``: the top bits of a word, again while they reach ``n``; with the
        position after it and the words it drew."""
        used = 0
        while True:
            r, pos = word(mt, pos)
            used += 1
            r = np.int64(r >> np.uint32(shift))
            if r < n:
                return r, pos, used

    @numba.njit(cache=True)
    def advance(mt, pos, count):
        """The state after ``count`` more words."""
        for _ in range(count):
            _, pos = word(mt, pos)
        return pos

    return below, advance


def _tries(below):
    """The placer's tries over ``below`` (:func:`_mersenne`'s), compiled."""
    import numba  # deferred on purpose, as in _mersenne

    @numba.njit(cache=True)
    def tries(mt, pos, count, lo, n, shift, size, region, others, margin):
        """``count`` tries of (x, y) from state (``mt``, ``pos``): the positions inside ``region``
        (3/4 of the box; none: region[0] < 0) that overlap no row of ``others``, each with the
        number of words drawn up to its end, and the total drawn."""
        found = np.empty((count, 3), np.int64)
        k, drawn, w, h = 0, 0, size[0], size[1]
        for _ in range(count):
            x, pos, used_x = below(mt, pos, n[0], shift[0])
            y, pos, used_y = below(mt, pos, n[1], shift[1])
            drawn += used_x + used_y
            x, y = x + lo[0], y + lo[1]
            x1, y1 = x + w, y + h
            if region[0] >= 0:
                iw = min(x1, region[2]) - max(x, region[0])
                ih = min(y1, region[3]) - max(y, region[1])
                if iw <= 0 or ih <= 0 or iw * ih / (w * h) < 0.75:
                    continue
            free = True
            for o in others:
                if not (
                    x1 + margin <= o[0]
                    or o[2] + margin <= x
                    or y1 + margin <= o[1]
                    or o[3] + margin <= y
                ):
                    free = False
                    break
            if free:
                found[k, 0], found[k, 1], found[k, 2] = x, y, drawn
                k += 1
        return found[:k], drawn

    return tries


_KERNELS = None


def free_positions(rng: random.Random, box, lo, span, region, others, margin: int, count: int):
    """What :meth:`Placer.place`'s ``count`` tries accept before its check: ``(found, drawn,
    move_on)``, ``found`` the accepted ``(x, y, words drawn up to its try's end)`` in order,
    ``drawn`` the words of all the tries, ``move_on(words)`` moves ``rng`` on by that many words
    (after the try the caller takes, or all of them). ``box``: (w, h); ``lo``/``span``: each
    axis's lowest position and number of positions; ``region``: a box or None."""
    global _KERNELS
    if _KERNELS is None:
        below, advance = _mersenne()
        _KERNELS = _tries(below), advance
    tries, advance = _KERNELS
    version, internal, gauss = rng.getstate()
    start, pos = np.array(internal[:N], dtype=np.uint32), internal[N]
    found, drawn = tries(
        start.copy(),
        pos,
        count,
        np.array(lo, np.int64),
        np.array(span, np.int64),
        np.array([32 - int(v).bit_length() for v in span], np.int64),
        np.array(box, np.int64),
        np.array(region if region is not None else (-1, -1, -1, -1), np.int64),
        np.array(others, np.int64).reshape(-1, 4),
        margin,
    )

    def move_on(words: int) -> None:
        state = start.copy()
        after = int(advance(state, pos, words))  # twists ``state`` in place where it wraps
        rng.setstate((version, (*state.tolist(), after), gauss))

    return found.tolist(), int(drawn), move_on
