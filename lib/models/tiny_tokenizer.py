"""The tokenizer of the tiny VLMs (:mod:`lib.models.tiny_builders`): byte-level BPE trained in
milliseconds on ``lib/data/tiny_corpus.txt``, with each family's special tokens and a ChatML chat
template whose image parts become the model's image placeholder."""

from __future__ import annotations

from lib.core.paths import DATA

SPECIAL_TOKENS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<image>",  # LLaVA and Idefics3 image placeholder
    "<|vision_start|>",
    "<|vision_end|>",
    "<|image_pad|>",
    "<|video_pad|>",  # Qwen2-VL
    "<fake_token_around_image>",
    "<global-img>",
    "<end_of_utterance>",  # Idefics3
]
_IMAGE_MARKUP = {  # BLIP-2 / InstructBLIP prepend their query placeholders themselves: no markup
    "llava": "<image>",
    "llava_next": "<image>",
    "qwen2_vl": "<|vision_start|><|image_pad|><|vision_end|>",
    "qwen2_5_vl": "<|vision_start|><|image_pad|><|vision_end|>",
    "idefics3": "<image>",
    "kosmos2": "",
    "florence2": "",  # Kosmos-2 / Florence-2 processors add theirs
}


def chat_template(kind: str) -> str:
    """A ChatML template whose image parts become the model's single image placeholder."""
    image = _IMAGE_MARKUP.get(kind, "")
    return (
        "{% for m in messages %}<|im_start|>{{ m['role'] }}\n"
        "{% if m['content'] is string %}{{ m['content'] }}{% else %}{% for c in m['content'] %}"
        "{% if c['type'] == 'image' %}"
        + image
        + "{% elif c['type'] == 'text' %}{{ c['text'] }}{% endif %}"
        "{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )


def build_tokenizer(kind: str = "text", vocab_size: int = 1024):
    """Train a byte-level BPE tokenizer on the shipped corpus and wrap it for transformers."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    lines = (DATA / "tiny_corpus.txt").read_text().splitlines()
    bpe.train_from_iterator(lines, trainer=trainer)
    tok = PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        bos_token="<|im_start|>",
        unk_token=None,
        extra_special_tokens={},
    )
    tok.add_special_tokens({"additional_special_tokens": SPECIAL_TOKENS[3:]})
    tok.padding_side = "left"  # decoder-only batching pads on the left
    tok.chat_template = chat_template(kind)
    return tok
