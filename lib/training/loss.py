"""The training loss: the mean cross-entropy over a batch's answer tokens, with the language-model
head applied at those positions only where the model allows it."""

from lib.models.hf_processors import is_encoder_decoder


def keeps_answer_logits(model) -> bool:
    """Can ``model`` compute its logits at the answer positions only (``logits_to_keep`` as a
    boolean mask, transformers' :func:`slice_logits_to_keep`)? Decoder-only models of transformers
    whose forward slices with it; not encoder-decoder ones (their labels are the decoder's own)."""
    import inspect
    import sys

    model = getattr(model, "get_base_model", lambda: model)()  # peft's wrapper passes kwargs on
    module = sys.modules.get(type(model).__module__)
    return (
        not is_encoder_decoder(model)
        and "logits_to_keep" in inspect.signature(model.forward).parameters
        and getattr(module, "slice_logits_to_keep", None) is not None
    )


def answer_loss(model, batch: dict, answer_logits: bool):
    """The batch's mean loss over its answer tokens: ``model(**batch).loss``, computed - where
    ``answer_logits`` (:func:`keeps_answer_logits`) - with the language-model head applied at the
    labelled positions only. Labels cover a few tokens a row (the demo: ~40 of 1,500 positions a
    batch) and the head over every position was 7-19% of a demo step (9% of its forward and
    backward in a later, loaded measurement) for logits training never reads; the loss is the
    same mean cross-entropy over the same tokens."""
    import torch  # deferred on purpose: torch is heavy, and importing lib.training must stay cheap

    if not answer_logits:
        return model(**batch).loss
    labels = batch["labels"]
    # position t predicts token t+1, as the model's own loss shifts its labels
    targets = torch.nn.functional.pad(labels, (0, 1), value=-100)[:, 1:]
    at = targets != -100
    inputs = {k: v for k, v in batch.items() if k != "labels"}
    logits = model(**inputs, logits_to_keep=at).logits
    if logits.shape[:-1] != (int(at.sum()),):
        raise RuntimeError(
            f"{type(model).__name__} kept logits of shape {tuple(logits.shape)} for {int(at.sum())} "
            f"answer positions: its forward does not slice by a boolean logits_to_keep"
        )
    return torch.nn.functional.cross_entropy(logits.float(), targets[at])
