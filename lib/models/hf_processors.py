"""The hf backend's processors and prompts: loading a VLM's processor (the image-only Qwen2-VL
processors where torchvision is missing), the chat prompt a model is asked (and trained) with, and
whether a language model is an encoder-decoder."""

from __future__ import annotations

from functools import cache


def is_encoder_decoder(model) -> bool:
    """Is ``model``'s language model an encoder-decoder (T5, BART), itself or inside a VLM?"""
    config = model.config
    return bool(
        getattr(config, "is_encoder_decoder", False)
        or getattr(getattr(config, "text_config", None), "is_encoder_decoder", False)
    )


def chat_prompt(processor, messages: list[dict], prompt_format: str = "{text}") -> str:
    """A VLM's prompt string for chat ``messages`` (image parts as bare placeholders): the processor's
    chat template, else its tokenizer's (processors such as BLIP-2's do not keep one), else - for
    checkpoints without any (BLIP-2, InstructBLIP, Kosmos-2, Florence-2) - the messages' text in
    ``prompt_format`` (BLIP-2's VQA prompt is ``"Question: {text} Answer:"``). Training uses it too,
    so a model learns on the prompt it is evaluated with."""
    msgs = [
        {
            "role": m["role"],
            "content": m["content"]
            if isinstance(m["content"], str)
            else [{"type": "image"} if p.get("type") == "image" else p for p in m["content"]],
        }
        for m in messages
    ]
    if getattr(processor, "chat_template", None) is not None:
        return processor.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)
    if getattr(processor.tokenizer, "chat_template", None) is not None:
        return processor.tokenizer.apply_chat_template(
            msgs, add_generation_prompt=True, tokenize=False
        )
    text = "\n".join(
        p.get("text", "")
        for m in msgs
        for p in ([{"text": m["content"]}] if isinstance(m["content"], str) else m["content"])
        if p.get("text")
    )
    return prompt_format.format(text=text)


def load_processor(path: str, model_type: str, kw: dict):
    """AutoProcessor, except where it cannot build one without torchvision: Qwen2(.5)-VL's processor needs
    torchvision for its video slot (images never do), and AutoProcessor then silently returns the
    bare tokenizer. There we build the image-only subclass (:func:`qwen2_vl_processor_class`)."""
    from transformers import AutoProcessor, ProcessorMixin

    try:
        processor = AutoProcessor.from_pretrained(path, **kw)
        error = None
    except (ImportError, ValueError, TypeError) as e:
        processor, error = None, e
    if isinstance(processor, ProcessorMixin):
        return processor
    if model_type in ("qwen2_vl", "qwen2_5_vl"):
        cls = (
            qwen2_vl_processor_class() if model_type == "qwen2_vl" else qwen2_5_vl_processor_class()
        )
        return cls.from_pretrained(path, **kw)
    raise RuntimeError(
        f"could not build an image processor for {path!r} (model type {model_type!r}); "
        f"AutoProcessor gave {type(processor).__name__}: {error}"
    )


@cache
def image_only_processor_class(name: str):
    """transformers' processor ``name`` (Qwen2VLProcessor, Qwen2_5_VLProcessor) without its video
    slot: the stock one needs torchvision, which cannot import beside the CPU torch pinned here,
    and images never need it. Built on first use (importing transformers at
    import time would cost seconds) and once per process."""
    import transformers

    base = getattr(transformers, name)

    def __init__(self, image_processor=None, tokenizer=None, chat_template=None, **kwargs):  # noqa: N807 - the built class's own __init__
        base.__init__(
            self,
            image_processor,
            tokenizer,
            video_processor=None,
            chat_template=chat_template,
            **kwargs,
        )

    return type(f"Tiny{name}", (base,), {"__init__": __init__})


def qwen2_vl_processor_class():
    return image_only_processor_class("Qwen2VLProcessor")


def qwen2_5_vl_processor_class():
    return image_only_processor_class("Qwen2_5_VLProcessor")
