"""The ``hf`` backend: transformers image-text-to-text and causal LMs from a hub id or a local path.

Spec keys (all but ``name`` optional)::

    {backend: hf, name: Qwen/Qwen2-VL-7B-Instruct,   # hub id or local folder (a LoRA adapter folder too)
     dtype: bfloat16,          # auto | float32 | bfloat16 | float16
     device_map: auto,         # accelerate placement; "cpu" on machines without a GPU
     batch_size: 16, revision: main, gguf_file: null, attn_implementation: null,
     image_cache_mb: 128,      # decoded images, and again their processed tensors, kept across batches
                               # (an image is asked many questions)
     prefix_cache: true,       # text LMs: a prompt prefix the batch shares (a judge's instructions and
                               # demonstrations) is encoded once and its KV cache reused (see _shared_prefix)
     prompt_format: "Question: {text} Answer:"}   # only for checkpoints without a chat template

Encoder-decoder language models (BLIP-2 / InstructBLIP with Flan-T5, Florence-2's BART) generate
decoder tokens only: answers are read from those, a choice trie constrains them, and a choice's
log-likelihood is that of the decoder producing it.

Requests are grouped by (settings, constraint kind) and run as real batches with left padding.
Choice constraints run either as constrained greedy decoding over a token trie
(``prefix_allowed_tokens_fn``) or by scoring every option's log-likelihood; JSON schemas run
through outlines, batched per schema and settings like the other kinds.

The backend class is here; its images (the processed-image cache) are in :mod:`lib.models.hf_images`,
its processors and chat prompts in :mod:`lib.models.hf_processors`, its token-level helpers (choice
trie, shared prefixes, choice log-likelihoods) in :mod:`lib.models.hf_tokens`; the steps it takes in
from sibling classes - the prompt-prefix cache, choice scoring by log-likelihood, JSON output - in
:mod:`lib.models.hf_prefix`, :mod:`lib.models.hf_loglik` and :mod:`lib.models.hf_json`.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

from lib.core.answers import parse_choice, parse_response
from lib.core.schema import CONSTRAINED_TRIE, INVALID, Request, Response
from lib.io import ImageCache, ImageError
from lib.models.backend import Model, backend
from lib.models.hf_images import ImageTensors, rgb
from lib.models.hf_json import JsonOutput
from lib.models.hf_loglik import ChoiceScoring
from lib.models.hf_prefix import PrefixCache
from lib.models.hf_processors import chat_prompt, is_encoder_decoder, load_processor
from lib.models.hf_tokens import ChoiceTrie
from lib.models.probe import hub_problem

_NESTED_IMAGES = {
    "idefics2",
    "idefics3",
    "smolvlm",
    "mllama",
}  # processors wanting one list per sample


def _local_fingerprint(path: Path) -> dict:
    """Identify a local checkpoint by its config and its weight files' names, sizes and mtimes
    (hashing GBs of weights per run would cost more than the calls it saves)."""
    files = sorted(
        p for p in path.iterdir() if p.suffix in {".safetensors", ".bin", ".gguf", ".pt"}
    )
    config = path / "config.json"
    return {
        "config_sha256": hashlib.sha256(config.read_bytes()).hexdigest()
        if config.exists()
        else None,
        "weights": [(p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in files],
    }


@backend("hf")
class HFModel(PrefixCache, ChoiceScoring, JsonOutput, Model):
    """A transformers model behind the common interface (see the module docstring for the spec): its
    prefix cache, choice scoring and JSON output are taken in from :mod:`lib.models.hf_prefix`,
    :mod:`lib.models.hf_loglik` and :mod:`lib.models.hf_json`."""

    SPEC_KEYS = frozenset(
        {
            "dtype",
            "device_map",
            "batch_size",
            "revision",
            "gguf_file",
            "attn_implementation",
            "prompt_format",
            "image_cache_mb",
            "prefix_cache",
        }
    )

    @classmethod
    def check_spec(cls, spec: dict, where: str) -> None:
        super().check_spec(spec, where)
        cls._needs_name(spec, where)

    @classmethod
    def preflight(cls, spec: dict, offline: bool) -> str | None:
        """Its weights: in the local hub cache, reachable on the hub, or a folder (:func:`hub_problem`)."""
        return hub_problem(str(spec["name"]), offline)

    def __init__(self, spec: dict):
        super().__init__(spec)
        self.batch_size = int(spec.get("batch_size", 8))
        self.model = self.processor = self.tokenizer = None
        self.is_vlm = False
        # (pad tokens, all tokens) this model has encoded: how much batching pads
        self.padding = (0, 0)
        self._images = None  # lib.io.ImageCache, made on first use
        self._tensors = None  # ImageTensors: the processor's output per image, made on first use
        self._prefixes: dict = {}  # shared prompt prefix (token ids) -> its KV cache, most recent last
        self._json_generators: dict = {}  # JSON schema -> its outlines generator, most recent last

    @classmethod
    def from_loaded(cls, model, processor, spec: dict | None = None) -> HFModel:
        """Wrap a model already in memory (e.g. one being trained) behind the common interface.
        Its fingerprint is the spec's: do not use a call store while its weights change."""
        from transformers import ProcessorMixin

        self = cls(spec or {"backend": "hf", "name": type(model).__name__})
        self.model, self.processor = model, processor
        self.is_vlm = isinstance(processor, ProcessorMixin)
        self.tokenizer = processor.tokenizer if self.is_vlm else processor
        self.tokenizer.padding_side = "left"
        self._model_type = model.config.model_type
        self._loaded = True
        return self

    @property
    def encoder_decoder(self) -> bool:
        """Does the language model encode the prompt and decode the answer separately (T5, BART)?
        Then ``generate`` returns decoder tokens only, starting with the decoder start token."""
        return is_encoder_decoder(self.model)

    def resolve_path(self) -> str:
        """The hub id or local folder to load; the ``tiny`` backend overrides this."""
        return str(self.spec["name"])

    @property
    def fingerprint(self) -> str:
        extra = {}
        path = Path(self.resolve_path())
        if path.is_dir():
            extra = _local_fingerprint(path)
        payload = json.dumps({"spec": self.spec, **extra}, sort_keys=True, default=str)
        return hashlib.sha256(payload.encode()).hexdigest()[:16]

    def _load(self) -> None:
        import torch
        from transformers import (
            AutoConfig,
            AutoModelForCausalLM,
            AutoModelForImageTextToText,
            AutoTokenizer,
        )
        from transformers.models.auto.modeling_auto import (
            MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES,
        )

        path = self.resolve_path()
        adapter = Path(path) / "adapter_config.json"
        if (
            adapter.exists()
        ):  # stage 05's LoRA output: the base model it names, with the adapter on top
            path_adapter, path = path, json.loads(adapter.read_text())["base_model_name_or_path"]
        else:
            path_adapter = None
        kw = {
            k: self.spec[k]
            for k in ("revision", "gguf_file", "attn_implementation")
            if self.spec.get(k)
        }
        dtype = self.spec.get("dtype", "auto")
        dtype = dtype if dtype == "auto" else getattr(torch, dtype)
        device_map = self.spec.get("device_map") or ("auto" if torch.cuda.is_available() else "cpu")
        if not torch.cuda.is_available():
            dtype, device_map = cpu_settings(self.spec.get("name"), dtype, device_map)
        try:
            config = AutoConfig.from_pretrained(path, **kw)
        except OSError as e:
            raise OSError(
                f"cannot load model {path!r} named in the model spec {self.spec}: {e}. A hub id needs "
                f"network (or a prior download); a local path must hold config.json and the weights."
            ) from e
        self.is_vlm = config.model_type in MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES
        cls = AutoModelForImageTextToText if self.is_vlm else AutoModelForCausalLM
        self.model = cls.from_pretrained(path, dtype=dtype, device_map=device_map, **kw).eval()
        if path_adapter is not None:
            from peft import PeftModel

            self.model = PeftModel.from_pretrained(self.model, path_adapter).eval()
        if self.is_vlm:
            self.processor = load_processor(path_adapter or path, config.model_type, kw)
            self.tokenizer = self.processor.tokenizer
        else:
            self.tokenizer = self.processor = AutoTokenizer.from_pretrained(path, **kw)
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self._model_type = config.model_type

    # --- batching ---------------------------------------------------------------------------

    def _generate(self, requests: list[Request], on_result) -> list[Response]:
        out: list[Response | None] = [None] * len(requests)
        groups: dict[tuple, list[int]] = {}
        for i, r in enumerate(requests):
            c = r.constraint
            kind = "free" if c is None else ("json" if c.json_schema is not None else c.method)
            # one grammar per batch
            schema = json.dumps(c.json_schema, sort_keys=True) if kind == "json" else ""
            groups.setdefault((kind, schema, tuple(sorted(r.settings().items()))), []).append(i)
        for (kind, _, _), idx in groups.items():
            batch = [requests[i] for i in idx]
            if kind == "json":
                answers = self._json_batch(batch)
            elif kind == "loglik":
                answers = self._loglik(batch)
            else:
                answers = self._decode(batch, trie=(kind == "trie"))
            for i, resp in zip(idx, answers):
                out[i] = resp
                if on_result:
                    on_result(i, resp)
        return out  # type: ignore[return-value]

    def _chat_text(self, r: Request) -> str:
        """The prompt string: image parts become bare ``{"type": "image"}`` placeholders for VLM
        templates; text-only templates (SmolLM2's) get plain string content."""
        if not self.is_vlm and r.images():
            raise ValueError(
                f"model {self.name!r} is a text-only LM but a request carries {len(r.images())} image(s)"
            )
        if self.is_vlm:
            return chat_prompt(self.processor, r.messages, self.spec.get("prompt_format", "{text}"))
        msgs = [
            {
                "role": m["role"],
                "content": m["content"]
                if isinstance(m["content"], str)
                else "".join(p.get("text", "") for p in m["content"]),
            }
            for m in r.messages
        ]
        return self.processor.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)

    def _image(self, image):
        """A request's image: a path is decoded once per model (:class:`lib.io.ImageCache`)."""
        if not isinstance(image, (str, Path)):
            return image
        if self._images is None:
            self._images = ImageCache(float(self.spec.get("image_cache_mb", 128)))
        return self._images(image)

    def _encode(self, batch: list[Request]):
        """Chat-template and tokenise a batch (left padded), images included. Image files are
        opened, not decoded (:meth:`ImageTensors.file_image`): the processed-image cache decodes
        what it has not prepared, one picture at a time. A processor that reads pixels itself
        fails on its first batch, which is made again from decoded images, as is every later one."""
        if self.is_vlm and self._tensors is None:
            self._tensors = ImageTensors(float(self.spec.get("image_cache_mb", 128)))
        texts = [self._chat_text(r) for r in batch]
        if not self.is_vlm:
            enc = self.processor(texts, return_tensors="pt", padding=True, add_special_tokens=False)
        else:
            opened = self._tensors.opens
            try:
                enc = self._vlm_inputs(batch, texts)
            except ImageError:
                raise  # a bad file, named: not the processor's doing
            except (AssertionError, AttributeError, ValueError, OSError):
                if not opened:
                    raise
                self._tensors.needs_pixels()  # this processor reads pixels before its image processor
                enc = self._vlm_inputs(batch, texts)
            if self._tensors.opens and self._images is not None:
                self._images = (
                    None  # decoded images are no longer needed: files are keyed as they are
                )
        mask = enc["attention_mask"]
        self.padding = (
            self.padding[0] + int((mask == 0).sum()),
            self.padding[1] + int(mask.numel()),
        )
        enc = enc.to(self.model.device)
        if "pixel_values" in enc:
            enc["pixel_values"] = enc["pixel_values"].to(self.model.dtype)
        return enc

    def _vlm_inputs(self, batch: list[Request], texts: list[str]):
        images = [
            [
                self._tensors.file_image(im, self._image)
                if isinstance(im, (str, Path))
                else rgb(self._image(im))
                for im in r.images()
            ]
            for r in batch
        ]
        kwargs = {"text": texts, "return_tensors": "pt", "padding": True}
        if any(images):
            kwargs["images"] = (
                images
                if self._model_type in _NESTED_IMAGES
                else [im for ims in images for im in ims]
            )
        with self._tensors.around(self.processor):
            return self.processor(**kwargs)

    def _decode(self, batch: list[Request], trie: bool) -> list[Response]:
        """Generate for a batch; a text LM's prompts are tokenised once here for the prefix cache
        (split by prefix family, then each part from its shared prefix)."""
        ids = self._token_ids(batch) if self._prefix_caching() else None
        groups = self._prefix_groups(ids) if ids is not None else [list(range(len(batch)))]
        if len(groups) == 1:
            return self._decode_batch(batch, trie, ids)
        out: list = [None] * len(batch)
        for idx in groups:
            part = self._decode_batch([batch[i] for i in idx], trie, [ids[i] for i in idx])
            for i, resp in zip(idx, part):
                out[i] = resp
        return out

    def _trie_settings(self, batch: list[Request], skip: int, eos: int) -> dict:
        """``generate`` settings that keep each row to its choices: greedy steps through a token trie
        of them (``skip``: the tokens before the answer), no longer than the longest choice."""
        tries = [
            ChoiceTrie(
                [self.tokenizer.encode(c, add_special_tokens=False) for c in r.constraint.choices]
            )
            for r in batch
        ]
        longest = max(
            len(self.tokenizer.encode(c, add_special_tokens=False))
            for r in batch
            for c in r.constraint.choices
        )
        return {
            "max_new_tokens": longest + 1,
            "prefix_allowed_tokens_fn": lambda b, ids: tries[b].allowed(ids[skip:].tolist(), eos),
        }

    def _read_batch(
        self, batch: list[Request], enc, new, trie: bool, limit: int, elapsed: float
    ) -> list[Response]:
        """The batch's responses from the generated tokens ``new``: each reply read (a trie's choice,
        else as its constraint says), its tokens counted, cut where no end came within ``limit``."""
        eos = self.tokenizer.eos_token_id
        texts = self.tokenizer.batch_decode(new, skip_special_tokens=True)
        responses = []
        for b, (r, text) in enumerate(zip(batch, texts)):
            ids = new[b].tolist()
            n_new = next(
                (j for j, t in enumerate(ids) if t in (eos, self.tokenizer.pad_token_id)), len(ids)
            )
            cut = not trie and n_new >= limit  # no end of turn within the limit
            if trie:
                value, _ = parse_choice(text, r.constraint.choices)
                method, valid = (CONSTRAINED_TRIE, True) if value is not None else (INVALID, False)
            else:
                value, method, valid = parse_response(text, r.constraint)
            responses.append(
                Response(
                    text=text,
                    parsed=value,
                    method=method,
                    valid=valid,
                    prompt_tokens=int(enc["attention_mask"][b].sum()),
                    completion_tokens=n_new,
                    latency_s=elapsed,
                    finish_reason="length" if cut else "stop",
                )
            )
        return responses

    def _decode_batch(
        self, batch: list[Request], trie: bool, ids: list[list[int]] | None = None
    ) -> list[Response]:
        import torch

        r0 = batch[0]
        start = time.perf_counter()
        enc = self._shared_prefix(batch, ids) or self._encode(batch)
        prompt_len = enc["input_ids"].shape[1]
        gen = {
            "max_new_tokens": r0.max_new_tokens,
            "do_sample": r0.temperature > 0,
            "pad_token_id": self.tokenizer.pad_token_id,
        }
        if r0.temperature > 0:
            gen.update(temperature=r0.temperature, top_p=r0.top_p)
            # one seed per batch: sampled answers depend on batch make-up
            torch.manual_seed(r0.seed)
        # decoder-only models return prompt + answer; encoder-decoders the decoder start token + answer
        skip = 1 if self.encoder_decoder else prompt_len
        if trie:
            gen.update(self._trie_settings(batch, skip, self.tokenizer.eos_token_id))
        with torch.inference_mode():
            out = self.model.generate(**enc, **gen)
        elapsed = time.perf_counter() - start
        return self._read_batch(batch, enc, out[:, skip:], trie, gen["max_new_tokens"], elapsed)


def cpu_settings(name, dtype, device_map):
    """Settings only a GPU takes, mapped for a CPU with a printed note (never silently): float16
    weights (slow or unsupported CPU kernels) load as float32, a ``cuda`` device map as ``cpu``.
    bfloat16 and ``auto`` stay: a CPU takes them."""
    import torch

    if dtype is torch.float16:
        print(
            f"note: model {name!r}: dtype float16 needs a GPU; loading float32 on this CPU-only machine"
        )
        dtype = torch.float32
    if isinstance(device_map, str) and device_map.startswith("cuda"):
        print(f"note: model {name!r}: device_map {device_map!r} needs a GPU; using cpu")
        device_map = "cpu"
    return dtype, device_map
