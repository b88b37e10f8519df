"""The hf backend's images: the processed-image cache (:class:`ImageTensors`), which answers a
processor's image processor from tensors prepared before (training uses it too), and the small
conversions images need on their way to a processor or to outlines."""

from __future__ import annotations

import hashlib
import os
import weakref
from pathlib import Path

from lib.io import ByteLRU, load_image

IMAGE_DIGESTS = 4096  # image digests ImageTensors remembers (per image object)
CHECK_IMAGES = 2  # images of the first batch ImageTensors checks against the real call


class ImageTensors:
    """The image processor's output per image, kept (least recently used out past ``max_mb``), so
    a training step or an evaluation batch neither resizes nor normalises an image it has prepared
    before (Scrapbook asks dozens of questions per image; training draws each image many times).

    Installed around the processor's call (:meth:`around`), it answers the processor's
    ``image_processor(images, **kwargs)`` by concatenating each image's cached tensors - what the
    processor itself computes, image by image, for the families whose batch is the concatenation
    of its images (LLaVA's CLIP, BLIP-2, Idefics3 at one size...). On the first batch, the
    cached tensors of its first two images, concatenated, must equal the real call on both
    (checking the whole batch held every picture's float copies at once); where they differ or
    are not per-image tensors (padded across the batch, lists), the real image processor is used
    for every batch (``active`` False). Per-image shapes that differ in a later batch fall back
    to the real call too.

    Decoded images are keyed by their pixels' digest, so the same picture is prepared once
    whatever loads it; image files opened by :meth:`file_image` by the file (path, size and
    modification time), so a prepared file is never decoded again (a Scrapbook evaluation asks
    many questions of one large PNG, which would be decoded only to find its tensors cached). Hand-written:
    transformers has no per-image cache of processed inputs."""

    def __init__(self, max_mb: float):
        self.active: bool | None = None  # None until the first batch is checked
        self._tensors = ByteLRU(max_mb)
        # id(image) -> (weak reference, key, path if opened, not decoded): a decoded image the model
        # keeps (lib.io.ImageCache) is hashed once, not at every question; a file's image is keyed
        # by the file (("file", path, size, mtime)); PIL images are unhashable
        self._digests: dict[int, tuple[weakref.ref, str | tuple, str | None]] = {}
        self._files: dict[str, tuple[tuple, object]] = {}  # path -> (its key, its header image)
        self._opens: bool | None = None  # False once the processor needed an opened image's pixels

    def stats(self) -> dict:
        return {"active": self.active, **self._tensors.stats()}

    @property
    def opens(self) -> bool:
        """Are image files given to the processor opened rather than decoded? Until the processor
        has been seen to need pixels itself (:meth:`needs_pixels`) or the cache has turned itself
        off."""
        return self.active is not False and self._opens is not False

    def needs_pixels(self) -> None:
        """The processor read an opened image's pixels itself: decode files for it from now on."""
        self._opens = False

    def file_image(self, path: str | Path, decode):
        """The image file at ``path`` for the processor, keyed by the file's identity. Opened, not
        decoded (:attr:`opens`): a PIL image with its size and mode and no pixels, which is
        decoded (:func:`lib.io.load_image`, with its checks) only where this cache has no tensors
        for it yet (:meth:`_pixels`), one image at a time. Otherwise ``decode(path)`` (RGB),
        remembered by the same key."""
        from PIL import Image

        path = str(path)
        try:
            st = os.stat(path)
        except OSError:
            load_image(path)  # raises ImageError naming the file
            raise
        key = ("file", path, st.st_size, st.st_mtime_ns)
        if not self.opens:
            image = rgb(decode(path))
            self._remember(image, key, None)
            return image
        known = self._files.get(path)
        if known is not None and known[0] == key:
            return known[1]
        try:
            with Image.open(path) as image:  # reads the header; the file is closed on leaving
                pass
        except (OSError, SyntaxError, ValueError):
            load_image(path)  # raises ImageError with the reason, naming the file
            raise
        if len(self._files) >= IMAGE_DIGESTS // 2:  # at most half the digests are of opened files
            self._files.clear()
        self._files[path] = (key, image)
        self._remember(image, key, path)
        return image

    def _remember(self, image, key, opened: str | None) -> None:
        if len(self._digests) >= IMAGE_DIGESTS:
            # images long gone are forgotten, and decoded ones (hashed again if met again); an opened
            # file's image never is while it lives: it has no pixels to hash
            self._digests = {
                i: v for i, v in self._digests.items() if v[2] is not None and v[0]() is not None
            }
        self._digests[id(image)] = (weakref.ref(image), key, opened)

    def _pixels(self, images):
        """``images`` (an image, or lists of them) with every opened file decoded (RGB), for the
        real image processor."""
        if isinstance(images, (list, tuple)):
            return [self._pixels(im) for im in images]
        known = self._digests.get(id(images))
        opened = known[2] if known is not None and known[0]() is images else None
        return load_image(opened) if opened else images

    def _one(self, real, image, kwargs: dict, pixels=None) -> dict:
        known = self._digests.get(id(image))
        if known is not None and known[0]() is image:
            digest = known[1]
        else:
            digest = hashlib.blake2b(image.tobytes(), digest_size=16).hexdigest()
            self._remember(image, digest, None)
        is_file = isinstance(digest, tuple)
        # a file's decoded pixels are RGB whatever its header says: its mode is not part of its key
        key = (
            (digest, repr(sorted(kwargs.items())))
            if is_file
            else (digest, image.size, image.mode, repr(sorted(kwargs.items())))
        )
        found = self._tensors.get(key)
        if found is not None:
            return found[0]
        out = dict(real([self._pixels(image) if pixels is None else pixels], **kwargs))
        self._tensors.put(
            key, out, sum(v.numel() * v.element_size() for v in out.values() if hasattr(v, "numel"))
        )
        return out

    def _combined(self, real, images, kwargs: dict, pixels: list | None = None):
        import torch
        from transformers import BatchFeature

        if not isinstance(images, list) or not all(hasattr(im, "tobytes") for im in images):
            return None  # nested lists (one per sample): the real call
        parts = [
            self._one(real, im, kwargs, None if pixels is None else pixels[k])
            for k, im in enumerate(images)
        ]
        if not all(torch.is_tensor(v) and v.shape[0] == 1 for part in parts for v in part.values()):
            return None
        try:
            return BatchFeature({k: torch.cat([part[k] for part in parts]) for k in parts[0]})
        except RuntimeError:  # per-image shapes differ (tiles, sizes): the processor pads; let it
            return None

    def around(self, processor):
        """A context in which ``processor``'s image processor answers from this cache."""
        from contextlib import contextmanager

        import torch

        @contextmanager
        def installed():
            real = getattr(processor, "image_processor", None)
            if self.active is False or real is None:
                yield
                return

            def cached(images, **kwargs):
                if (
                    self.active is None
                ):  # the first batch: the cache must give exactly the real output
                    sample = images[:CHECK_IMAGES] if isinstance(images, list) else images
                    pixels = self._pixels(sample)  # opened files decoded once for both calls
                    want = real(pixels, **kwargs)
                    out = self._combined(
                        real, sample, kwargs, pixels if isinstance(sample, list) else None
                    )
                    self.active = (
                        out is not None
                        and set(out) == set(want)
                        and all(
                            torch.is_tensor(want[k])
                            and torch.equal(out[k], torch.as_tensor(want[k]))
                            for k in want
                        )
                    )
                out = self._combined(real, images, kwargs) if self.active else None
                return out if out is not None else real(self._pixels(images), **kwargs)

            processor.image_processor = _Delegate(real, cached)
            try:
                yield
            finally:
                processor.image_processor = real

        return installed()


class _Delegate:
    """``real`` with its call replaced (attributes such as its size and crop settings read through)."""

    def __init__(self, real, call):
        self._real, self._call = real, call

    def __call__(self, *args, **kwargs):
        return self._call(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._real, name)


def rgb(image):
    return image if image.mode == "RGB" else image.convert("RGB")


def with_format(image):
    """outlines wants a PIL image that knows its file format; in-memory images have none."""
    import io

    from PIL import Image

    if image.format:
        return image
    buf = io.BytesIO()
    image.convert("RGB").save(buf, format="PNG")
    buf.seek(0)
    return Image.open(buf)
