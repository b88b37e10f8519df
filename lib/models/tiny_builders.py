"""The tiny VLMs of the ``tiny`` backend (:mod:`lib.models.tiny`), built from transformers configs:
one builder per model family (LLaVA, Qwen2-VL, Idefics3, BLIP-2, ...), its weights randomly
initialised from a seed, over the byte-level BPE tokenizer of :mod:`lib.models.tiny_tokenizer`."""

from __future__ import annotations

from lib.models.hf_processors import qwen2_5_vl_processor_class, qwen2_vl_processor_class
from lib.models.tiny_tokenizer import build_tokenizer

IMAGE_SIZE = (
    112  # in trials on CPU, 112 px / patch 16 (49 tokens) was the best speed-to-learning trade-off
)
PATCH = 16


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
        # 0.1 rather than 0.02: at 0.02 tiny models collapse to one constant answer
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
        Config, Model, text_type, processor_cls = (  # noqa: N806 - classes, named as classes
            transformers.Qwen2VLConfig,
            transformers.Qwen2VLForConditionalGeneration,
            "qwen2_vl_text",
            qwen2_vl_processor_class(),
        )
        vision = {"depth": 2, "embed_dim": 64, "hidden_size": 128, "num_heads": 4, "mlp_ratio": 2}
    else:
        Config, Model, text_type, processor_cls = (  # noqa: N806 - classes, named as classes
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
    Config, Model, Processor = (  # noqa: N806 - classes, named as classes
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


def _bart_config(tok):
    """Florence-2's language model: a 2-layer BART encoder-decoder."""
    from transformers import BartConfig

    return BartConfig(
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


def _build_florence2(tok):
    """Florence-2: a DaViT vision tower (2 tiny stages) and a BART encoder-decoder."""
    from transformers import (
        Florence2Config,
        Florence2ForConditionalGeneration,
        Florence2Processor,
    )
    from transformers.models.clip.image_processing_pil_clip import CLIPImageProcessorPil

    text = _bart_config(tok)
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


BUILDERS = {
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

    if kind not in BUILDERS:
        raise ValueError(f"unknown tiny VLM kind {kind!r}; choose one of {tuple(BUILDERS)}")
    tok = build_tokenizer(kind)
    torch.manual_seed(seed)  # weight init has no generator argument; restored below
    state = torch.random.get_rng_state()
    try:
        model, processor = BUILDERS[kind](tok, **options)
    finally:
        torch.random.set_rng_state(state)
    model.generation_config.pad_token_id = tok.pad_token_id
    model.generation_config.eos_token_id = tok.eos_token_id
    return model.eval(), processor
