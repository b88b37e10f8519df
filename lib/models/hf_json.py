"""The ``hf`` backend's structured output (:class:`lib.models.hf.HFModel` takes it in): a batch of
requests under one JSON schema decoded through outlines, its compiled generators kept per schema."""

from __future__ import annotations

import json
import time

from lib.core.answers import parse_response, without_beside_pattern
from lib.core.schema import INVALID, JSON_SCHEMA, Request, Response
from lib.models.hf_images import with_format

JSON_GENERATORS = 8  # compiled JSON-schema generators a model keeps


def decoding_schema(schema):
    """``schema`` as outlines decodes it here: a string with a ``pattern`` loses the pattern and its
    ``minLength``/``maxLength``; the reply is checked against the whole schema
    (:func:`parse_response`), so a string that breaks either is invalid, never accepted.

    The same strings outlines decodes from the whole schema, without its cost: given a length beside
    a pattern, outlines_core drops the pattern and bounds a plain JSON string by the length, and
    compiling that bound into its index (a state per character of the length) costs seconds per
    schema in every process, the index hundreds of megabytes - for a bound the token budget already
    sets (the adversarial filter's options are such strings). Decoded unbounded, a reply differs
    only where a string runs to the length, and then it is invalid instead of cut. The pattern is
    not enforced while decoding either: outlines matches it against the JSON text, not the string
    it encodes, and the options' pattern admits the quote that ends the string."""
    return without_beside_pattern(schema, ("pattern", "minLength", "maxLength"))


class JsonOutput:
    """The JSON-schema steps of :class:`lib.models.hf.HFModel` (its ``model``, ``processor``,
    ``_chat_text``, ``_image`` and ``_json_generators``)."""

    def _json_prompts(self, batch: list[Request]) -> list:
        """Each request as outlines takes it: its chat text, with its images where it has some."""
        import outlines

        prompts = []
        for r in batch:
            text = self._chat_text(r)
            images = [self._image(im) for im in r.images()]
            prompts.append(
                [text, *[outlines.inputs.Image(with_format(im)) for im in images]]
                if images
                else text
            )
        return prompts

    def _json_generator(self, schema: str):
        """The outlines generator of ``schema`` (a JSON text), compiled once and kept (the last
        ``JSON_GENERATORS`` schemas), on the model's outlines wrapper."""
        import outlines
        from outlines.types import JsonSchema

        generator = self._json_generators.pop(schema, None) or outlines.Generator(
            self._outlines, JsonSchema(schema)
        )
        self._json_generators[schema] = (
            generator  # compiling a schema's index takes seconds; outlines resets it per call
        )
        while len(self._json_generators) > JSON_GENERATORS:
            self._json_generators.pop(next(iter(self._json_generators)))
        return generator

    def _json_batch(self, batch: list[Request]) -> list[Response]:
        """Structured output under one JSON schema for a batch of requests, through outlines
        (constrained decoding; its transformers model batches with left padding: the same answers
        as one request at a time, tested).

        The batch shares its settings (``_generate`` groups by them). Temperature 0 decodes
        greedily; above 0 it samples (``temperature``, ``top_p``) from the batch's ``seed``, so an
        adversarial-filtering retry, which asks again at a temperature with another seed, gets a
        new reply, and the same seed gives the same reply again. As in :meth:`_decode_batch`, one
        seed serves the batch: a sampled reply depends on the batch it ran in. The seed is set
        inside a forked torch RNG, so the caller's global RNG state is left as it was."""
        import outlines
        import torch

        if not hasattr(self, "_outlines"):
            self._outlines = outlines.from_transformers(self.model, self.processor)
        start = time.perf_counter()
        prompts = self._json_prompts(batch)
        # key order is the output's property order
        generator = self._json_generator(
            json.dumps(decoding_schema(batch[0].constraint.json_schema))
        )
        r0 = batch[0]
        settings = {"max_new_tokens": r0.max_new_tokens, "do_sample": r0.temperature > 0}
        if r0.temperature > 0:
            settings.update(temperature=r0.temperature, top_p=r0.top_p)
        devices = list(range(torch.cuda.device_count())) if torch.cuda.is_available() else []
        with torch.random.fork_rng(devices=devices):
            torch.manual_seed(r0.seed)  # only sampling draws from it; greedy decoding is unchanged
            texts = (
                generator.batch(prompts, **settings)
                if len(batch) > 1
                else [generator(prompts[0], **settings)]
            )
        elapsed = time.perf_counter() - start
        out = []
        for r, text in zip(batch, texts):
            value, method, valid = parse_response(text, r.constraint)
            out.append(
                Response(
                    text=text,
                    parsed=value,
                    method=JSON_SCHEMA if valid else INVALID,
                    valid=valid,
                    latency_s=elapsed,
                )
            )
        return out
