"""A Hugging Face hub-layout cache of tiny random models saved under real repo ids, so that a real
profile's exact params run offline: ``$HF_HOME/hub/models--<org>--<name>/snapshots/<hash>/`` plus
``refs/main``, the layout ``huggingface_hub`` resolves offline. Each id gets a model of the same
architecture and processor classes as the real checkpoint, a few hundred thousand parameters."""

from __future__ import annotations

import hashlib
from pathlib import Path


def _qwen2_vl(folder: Path) -> None:
    from lib.models.tiny import build_tiny_vlm

    model, processor = build_tiny_vlm("qwen2_vl")
    model.save_pretrained(folder)
    processor.save_pretrained(folder)


def _qwen2_lm(folder: Path) -> None:
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from lib.models.tiny_tokenizer import build_tokenizer

    tok = build_tokenizer("text")
    config = Qwen2Config(
        vocab_size=len(tok),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        tie_word_embeddings=True,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    model = Qwen2ForCausalLM(config)
    model.generation_config.pad_token_id, model.generation_config.eos_token_id = (
        tok.pad_token_id,
        tok.eos_token_id,
    )
    model.save_pretrained(folder)
    tok.save_pretrained(folder)


def _clip(folder: Path) -> None:
    from transformers import CLIPConfig, CLIPModel
    from transformers.models.clip.image_processing_pil_clip import CLIPImageProcessorPil

    from lib.models.tiny_tokenizer import build_tokenizer

    tok = build_tokenizer("text")
    config = CLIPConfig(
        text_config={
            "vocab_size": len(tok),
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "max_position_embeddings": 77,
            "bos_token_id": tok.bos_token_id,
            "eos_token_id": tok.eos_token_id,
            "pad_token_id": tok.pad_token_id,
        },
        vision_config={
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "image_size": 32,
            "patch_size": 8,
        },
        projection_dim=16,
    )
    CLIPModel(config).save_pretrained(folder)
    CLIPImageProcessorPil(
        size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}
    ).save_pretrained(folder)
    tok.save_pretrained(folder)


def _roberta(folder: Path) -> None:
    """bert-score reads layer 17 of roberta-large (its table): the tiny copy has 24 layers too."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import RobertaConfig, RobertaModel, RobertaTokenizerFast

    from lib.core.paths import DATA

    special = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    bpe = Tokenizer(models.BPE(unk_token="<unk>"))
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(
        (DATA / "tiny_corpus.txt").read_text().splitlines(),
        trainer=trainers.BpeTrainer(
            vocab_size=600,
            special_tokens=special,
            show_progress=False,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        ),
    )
    bpe.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0))
    tok = RobertaTokenizerFast(
        tokenizer_object=bpe,
        bos_token="<s>",
        eos_token="</s>",
        sep_token="</s>",
        cls_token="<s>",
        unk_token="<unk>",
        pad_token="<pad>",
        mask_token="<mask>",
        model_max_length=512,
    )
    config = RobertaConfig(
        vocab_size=len(tok),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=24,
        num_attention_heads=4,
        max_position_embeddings=514,
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=2,
    )
    RobertaModel(config).save_pretrained(folder)
    tok.save_pretrained(folder)


# The architectures of the real checkpoints the shipped real profiles and the README name.
BUILDERS = {
    "Qwen/Qwen2-VL-7B-Instruct": _qwen2_vl,
    "Qwen/Qwen2-VL-2B-Instruct": _qwen2_vl,  # the README's "your model"
    "Qwen/Qwen2.5-7B-Instruct": _qwen2_lm,
    "openai/clip-vit-base-patch32": _clip,
    "roberta-large": _roberta,
}


def save_under_repo_id(hf_home: Path, repo_id: str) -> Path:
    """Build the tiny stand-in of ``repo_id`` into the hub cache under ``hf_home``; its snapshot folder."""
    repo = Path(hf_home) / "hub" / ("models--" + repo_id.replace("/", "--"))
    revision = hashlib.sha1(repo_id.encode()).hexdigest()
    snapshot = repo / "snapshots" / revision
    if not (snapshot / "config.json").exists():
        snapshot.mkdir(parents=True, exist_ok=True)
        BUILDERS[repo_id](snapshot)
        (repo / "refs").mkdir(exist_ok=True)
        (repo / "refs" / "main").write_text(revision)
    return snapshot
