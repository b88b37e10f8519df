"""The ``hf`` backend's choice scoring (:class:`lib.models.hf.HFModel` takes it in): a choice
constraint answered by the log-likelihood of every option after the prompt, from one prefill of the
prompt where the model can continue from a cache."""

from __future__ import annotations

import time

from lib.core.schema import Request, Response
from lib.models.hf_tokens import best_choices, cache_arg, choice_tensors

# VLMs whose forward continues from a KV cache without the images (log-likelihood from one prefill);
# Qwen-VL's rotary positions and BLIP-2 / Kosmos-2 / Florence-2's image inputs need the whole row
PREFILL_TYPES = {"llava", "llava_next", "idefics3"}


class ChoiceScoring:
    """The log-likelihood steps of :class:`lib.models.hf.HFModel` (its ``model``, ``tokenizer`` and
    ``_encode``)."""

    def _loglik(self, batch: list[Request]) -> list[Response]:
        """Score every choice's tokens after the prompt; answer the most likely (sum of log-probs).
        Where the model can continue from a cache without its images (text LMs, LLaVA, LLaVA-NeXT,
        Idefics3), the prompt and its images are encoded once and every choice is scored from the
        cached prefix (:meth:`_loglik_prefill`); elsewhere each (prompt, choice) row is encoded whole."""
        import torch

        start = time.perf_counter()
        if self._can_prefill():
            return self._loglik_prefill(batch, start)
        rows = [(r, c) for r in batch for c in r.constraint.choices]
        enc = self._encode([r for r, _ in rows])
        suffix, suffix_mask = choice_tensors(
            self.tokenizer, [c for _, c in rows], self.model.device
        )
        prompt_len = enc["input_ids"].shape[1]
        if (
            self.encoder_decoder
        ):  # the choice is the decoder's target: its log-likelihood given the prompt
            labels = suffix.masked_fill(suffix_mask == 0, -100)
            with torch.inference_mode():
                logits = self.model(**enc, labels=labels).logits.float()
            return best_choices(
                batch, logits, suffix, suffix_mask, enc["attention_mask"].sum(-1), start
            )
        for name in list(
            enc.keys()
        ):  # per-token tensors (ids, mask, token types) grow by the suffix
            t = enc[name]
            if (
                name == "pixel_values"
                or not hasattr(t, "shape")
                or t.dim() != 2
                or t.shape[1] != prompt_len
            ):
                continue
            extra = (
                suffix
                if name == "input_ids"
                else suffix_mask
                if name == "attention_mask"
                else torch.zeros_like(suffix)
            )
            enc[name] = torch.cat([t, extra.to(t.dtype)], dim=1)
        with torch.inference_mode():
            logits = self.model(**enc).logits[:, prompt_len - 1 : -1].float()
        # the rows grew by the choices
        prompt_tokens = enc["attention_mask"].sum(-1) - suffix_mask.sum(-1)
        return best_choices(batch, logits, suffix, suffix_mask, prompt_tokens, start)

    def _can_prefill(self) -> bool:
        return not self.encoder_decoder and (not self.is_vlm or self._model_type in PREFILL_TYPES)

    def _loglik_prefill(self, batch: list[Request], start: float) -> list[Response]:
        """One prefill per request: the prompt (images included) is encoded once, its KV cache is
        repeated for the request's choices, and every choice's tokens are scored from it - the same
        positions and attention as encoding each row whole, at a fraction of the cost."""
        import torch

        enc = self._encode(batch)
        with torch.inference_mode():
            prefix = self.model(**enc, use_cache=True)
        rows = [(b, c) for b, r in enumerate(batch) for c in r.constraint.choices]
        idx = torch.tensor([b for b, _ in rows], device=self.model.device)
        cache = getattr(prefix, cache_arg())
        cache.reorder_cache(idx)  # one copy of the request's prefix per choice
        suffix, suffix_mask = choice_tensors(
            self.tokenizer, [c for _, c in rows], self.model.device
        )
        prompt_mask = enc["attention_mask"][idx]
        with torch.inference_mode():
            tail = self.model(
                input_ids=suffix,
                attention_mask=torch.cat([prompt_mask, suffix_mask], dim=1),
                use_cache=False,
                **{cache_arg(): cache},
            ).logits
        logits = torch.cat([prefix.logits[:, -1][idx].unsqueeze(1), tail[:, :-1]], dim=1).float()
        return best_choices(batch, logits, suffix, suffix_mask, prompt_mask.sum(-1), start)
