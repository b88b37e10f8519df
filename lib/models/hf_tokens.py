"""The hf backend's token-level helpers: the token trie that constrains decoding to the allowed
choices, the shared prompt prefixes whose KV cache a text LM reuses, and the log-likelihood of
each choice's tokens (padded choice rows, the most likely choice per request)."""

from __future__ import annotations

import time
from functools import lru_cache

from lib.core.schema import CONSTRAINED_LOGLIK, Request, Response

PREFIX_MIN_TOKENS = 64  # a shared prompt prefix shorter than this is encoded with each row
PREFIX_SLACK_TOKENS = 32  # a cached prefix this much shorter than the batch's own still serves it
PREFIX_CACHE_ENTRIES = (
    4  # shared prefixes whose KV cache a model keeps (LAVE has two: yes/no and general)
)


@lru_cache(maxsize=1)
def cache_arg() -> str:
    """The KV cache's keyword and output field: ``cache`` in newer transformers 5 releases,
    ``past_key_values`` (deprecated there, with a warning per call) before."""
    from transformers.modeling_outputs import CausalLMOutputWithPast

    return "cache" if "cache" in CausalLMOutputWithPast.__dataclass_fields__ else "past_key_values"


def common_prefix(ids: list[list[int]]) -> int:
    """How many leading tokens all rows share, leaving every row at least one of its own."""
    common, first = min(map(len, ids)) - 1, ids[0]
    for row in ids[1:]:
        common = next((j for j in range(common) if row[j] != first[j]), common)
    return common


class ChoiceTrie:
    """Token-id trie over the allowed answers; a node marked ``end`` completes an answer."""

    def __init__(self, sequences: list[list[int]]):
        self.root: dict = {}
        for seq in sequences:
            node = self.root
            for t in seq:
                node = node.setdefault(t, {})
            node["end"] = True

    def allowed(self, prefix: list[int], eos: int) -> list[int]:
        node = self.root
        for t in prefix:
            if t == eos or t not in node:
                return [eos]
            node = node[t]
        nxt = [t for t in node if t != "end"]
        return nxt + [eos] if node.get("end") or not nxt else nxt


def choice_tensors(tokenizer, choices: list[str], device):
    """Each choice's token ids, right padded, and their mask (one row per choice)."""
    import torch

    ids = [tokenizer.encode(c, add_special_tokens=False) for c in choices]
    width = max(map(len, ids))
    pad = tokenizer.pad_token_id
    rows = torch.tensor([i + [pad] * (width - len(i)) for i in ids], device=device)
    mask = torch.tensor([[1] * len(i) + [0] * (width - len(i)) for i in ids], device=device)
    return rows, mask


def best_choices(
    batch: list[Request], logits, suffix, suffix_mask, prompt_tokens, start: float
) -> list[Response]:
    """The most likely choice per request from the logits that predict each choice's tokens
    (one row per choice; ``prompt_tokens``: each row's prompt length)."""
    import torch

    logp = torch.log_softmax(logits, dim=-1).gather(-1, suffix.unsqueeze(-1)).squeeze(-1)
    totals = (logp * suffix_mask).sum(-1).tolist()
    elapsed = time.perf_counter() - start
    responses, k = [], 0
    for r in batch:
        scores = {c: totals[k + j] for j, c in enumerate(r.constraint.choices)}
        k += len(scores)
        best = max(scores, key=scores.get)
        responses.append(
            Response(
                text=best,
                parsed=best,
                method=CONSTRAINED_LOGLIK,
                valid=True,
                scores=scores,
                prompt_tokens=int(prompt_tokens[k - 1]),
                latency_s=elapsed,
            )
        )
    return responses
