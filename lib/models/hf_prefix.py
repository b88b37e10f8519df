"""The ``hf`` backend's prompt-prefix cache (:class:`lib.models.hf.HFModel` takes it in): a text LM's
batch that shares a long prompt prefix - LAVE's task definition and demonstrations, a generator's
instructions - encodes it once and continues every row from a copy of its KV cache."""

from __future__ import annotations

from lib.core.schema import Request
from lib.models.hf_tokens import (
    PREFIX_CACHE_ENTRIES,
    PREFIX_MIN_TOKENS,
    PREFIX_SLACK_TOKENS,
    cache_arg,
    common_prefix,
)


class PrefixCache:
    """The prefix-cache steps of :class:`lib.models.hf.HFModel` (its ``model``, ``tokenizer``,
    ``_prefixes`` and ``padding``): which rows share a prefix, and the inputs that start from it."""

    def _prefix_caching(self) -> bool:
        return not (self.is_vlm or self.encoder_decoder) and bool(
            self.spec.get("prefix_cache", True)
        )

    def _token_ids(self, batch: list[Request]) -> list[list[int]]:
        return [self.tokenizer.encode(self._chat_text(r), add_special_tokens=False) for r in batch]

    def _prefix_groups(self, ids: list[list[int]]) -> list[list[int]]:
        """The batch split where its rows fall into families sharing much longer prefixes than the
        whole batch does (LAVE's yes/no and general demonstrations sorted next to each other): each
        family of two or more rows whose common prefix is ``PREFIX_MIN_TOKENS`` longer, then the
        rest (``ids``: the rows' prompt tokens). One group (the batch) when there is no such family."""
        whole = [list(range(len(ids)))]
        if len(ids) < 3:
            return whole
        common = common_prefix(ids)
        families: dict[int, list[int]] = {}
        for i, row in enumerate(ids):
            families.setdefault(row[common] if len(row) > common else -1, []).append(i)
        gaining = [
            idx
            for idx in families.values()
            if len(idx) > 1 and common_prefix([ids[i] for i in idx]) - common >= PREFIX_MIN_TOKENS
        ]
        if not gaining:
            return whole
        taken = {i for idx in gaining for i in idx}
        rest = [i for i in range(len(ids)) if i not in taken]
        return gaining + ([rest] if rest else [])

    def _cached_prefix(self, ids: list[list[int]], rows: int) -> tuple[tuple, object] | None:
        """The prefix the batch continues from (its token ids) and its KV cache: one already encoded
        that every row starts with, at most ``PREFIX_SLACK_TOKENS`` shorter than what the batch
        shares, else the batch's common prefix, encoded now; None where one row alone would use it.
        The last ``PREFIX_CACHE_ENTRIES`` prefixes are kept for the next batches."""
        import torch

        common, first = common_prefix(ids), ids[0]
        # a prefix already encoded that this batch shares serves it, unless the batch shares much more
        key = max(
            (
                k
                for k in self._prefixes
                if common - PREFIX_SLACK_TOKENS <= len(k) <= common and tuple(first[: len(k)]) == k
            ),
            key=len,
            default=None,
        )
        if key is None and rows == 1:
            return None  # a prefix of one row's own is shared with nothing
        key = key or tuple(first[:common])
        cache = self._prefixes.pop(key, None)
        if cache is None:
            with torch.inference_mode():
                prefix = self.model(
                    input_ids=torch.tensor([list(key)], device=self.model.device), use_cache=True
                )
                cache = getattr(prefix, cache_arg())
        self._prefixes[key] = cache
        while len(self._prefixes) > PREFIX_CACHE_ENTRIES:
            self._prefixes.pop(next(iter(self._prefixes)))
        return key, cache

    def _shared_prefix(self, batch: list[Request], ids: list[list[int]] | None):
        """Inputs for ``generate`` that start from a cached prefix, or None where there is none.

        A text LM's batch often shares a long prompt prefix: LAVE's task definition and eight
        demonstrations precede every question, MemeQA-style generators repeat their instructions.
        That prefix (the batch's longest common run of tokens, at least ``PREFIX_MIN_TOKENS``, or a
        prefix already encoded that every row starts with, at most ``PREFIX_SLACK_TOKENS`` shorter:
        batches of LAVE's prompts differ in their questions' first words) is encoded once per model -
        kept for the next batches, the last ``PREFIX_CACHE_ENTRIES`` prefixes - and each row
        continues from a copy of its KV cache. Rows are laid out
        ``prefix + left padding + own suffix`` with the padding masked, so each token sees the
        same tokens at the same positions (positions come from the attention mask) as in the plain
        left-padded batch: the same answers (tested), the long prefix paid once instead of per row.
        VLM prompts carry images and encoder-decoders encode the whole prompt: they never take it."""
        import copy

        import torch

        if ids is None or common_prefix(ids) < PREFIX_MIN_TOKENS:
            return None
        found = self._cached_prefix(ids, len(batch))
        if found is None:
            return None
        key, cache = found
        common, first = len(key), ids[0]
        device = self.model.device
        cache = copy.deepcopy(cache)
        # one copy per row
        cache.reorder_cache(torch.zeros(len(batch), dtype=torch.long, device=device))
        width = max(len(row) for row in ids) - common
        pad = self.tokenizer.pad_token_id
        input_ids = [
            first[:common] + [pad] * (width - len(row) + common) + row[common:] for row in ids
        ]
        mask = [
            [1] * common + [0] * (width - len(row) + common) + [1] * (len(row) - common)
            for row in ids
        ]
        self.padding = (
            self.padding[0] + sum(m.count(0) for m in mask),
            self.padding[1] + sum(map(len, mask)),
        )
        return {
            "input_ids": torch.tensor(input_ids, device=device),
            "attention_mask": torch.tensor(mask, device=device),
            cache_arg(): cache,
        }
