"""Stage 03's settings: :class:`AFConfig`, where the skeletons come from, the models, and the
adversarial-filtering loop's settings (:mod:`lib.af.engine`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import ClassVar

from lib import config
from lib.io import artifacts
from lib.models import check_spec


@dataclass
class AFConfig(config.StageConfig):
    """Stage 03: where the skeletons come from, the models, and the loop's settings."""

    STAGE: ClassVar[str] = artifacts.AF
    MODEL_ROLES: ClassVar[dict] = {
        "generator": "llm",
        "discriminators": "vlm",
        "blind_model": "llm",
    }

    seed: int = 0  # option shuffles and generation seeds
    skeletons_from: str = "annotations"  # "annotations" (stage 02) or a MemeQA JSON path
    memeqa_images: str = ""  # the images folder of a MemeQA JSON
    max_skeletons: int = 0  # 0: all
    completion_blanks: int = (
        3  # completion questions per annotated sentence, at most (the release: 2.5 on average)
    )
    generator: dict = field(
        default_factory=lambda: {"backend": "tiny", "name": "smollm2"}
    )  # any text LLM
    discriminators: list[dict] = field(
        default_factory=lambda: [{"backend": "tiny", "name": "llava"}]
    )  # VLM specs
    blind_model: dict = field(
        default_factory=lambda: {"backend": "tiny", "name": "smollm2"}
    )  # text-only pass ({}: none)
    n_options: int = (
        4  # options per question, "None of the above" included when enabled (cond_sent_id: 3)
    )
    none_of_the_above: bool = True
    # "release": as the release was built - filtering on the 4 options (None-), the None+ twin derived
    # afterwards (one option removed at random, NOTA appended at D and correct exactly when no
    # correct option remains), both written; "last": filtering with an extra NOTA at D that is never
    # correct (a shortcut); "random": an extra NOTA anywhere, never correct
    nota_position: str = "release"
    max_iterations: int = 20  # the seed ran 20 fixed iterations
    stable_tol: float = 0.01
    patience: int = (
        0  # stop when accuracy changed by < stable_tol for this many iterations (0: off)
    )
    stop_when_none_fooled: bool = (
        False  # the original's rule: stop once an iteration after the first fools nothing
    )
    max_retries: int = 2  # extra generator calls per question and iteration after an invalid reply
    generator_image: bool = False  # show the generator the meme's image(s) (a VLM generator)
    paraphrase_threshold: float = 0.9
    min_length_ratio: float = (
        0.4  # generated distractors need >= this share of the correct options' words
    )
    length_tell_guard: bool = (
        True  # never leave a single correct option the uniquely shortest or longest
    )
    combine: str = "vote"  # several discriminators: "vote" (majority right = not fooled) or "all" (all must be fooled)
    max_new_tokens: int = (
        0  # generator tokens per call; 0: sized from the type's released distractor lengths
    )
    discriminator_max_new_tokens: int = (
        12  # a discriminator's answer is an option's letter (or a few)
    )
    temperature: float = 0.0
    # the blind gate (lib.af.blind_gate): the discriminators see the image, so a question whose text
    # alone gives the answer away can fool them and still be answered blind; above this probability
    # of the right answer without the image (the linear blind reader, cross-fitted by image) a
    # question is not kept. 0: off
    blind_threshold: float = 0.0
    # above the threshold: "resample" (new distractors, as when the discriminators answer) or "drop";
    # either way a question still above it after the last iteration is dropped
    blind_action: str = "resample"

    def check(self, source: str) -> None:
        if self.nota_position not in ("release", "last", "random"):
            raise config.ParamsError(
                f"{source}: nota_position must be 'release', 'last' or 'random', got "
                f"{self.nota_position!r}"
            )
        if self.combine not in ("vote", "all"):
            raise config.ParamsError(
                f"{source}: combine must be 'vote' or 'all', got {self.combine!r}"
            )
        if not 0 <= self.blind_threshold < 1:
            raise config.ParamsError(
                f"{source}: blind_threshold must be in [0, 1) (0: off), got {self.blind_threshold!r}"
            )
        if self.blind_action not in ("resample", "drop"):
            raise config.ParamsError(
                f"{source}: blind_action must be 'resample' or 'drop', got {self.blind_action!r}"
            )
        check_spec(self.generator, f"{source}: generator", allow_empty=True)
        check_spec(self.blind_model, f"{source}: blind_model", allow_empty=True)
        if not self.discriminators:
            raise config.ParamsError(f"{source}: discriminators needs at least one model spec")
        for i, spec in enumerate(self.discriminators):
            check_spec(spec, f"{source}: discriminators[{i}]")

    def loop_settings(self) -> dict:
        """What a resumed loop must share with the run it resumes (models and settings, not sources)."""
        skip = {"skeletons_from", "memeqa_images", "max_skeletons", "blind_model"}
        if not self.blind_threshold:  # off: a state saved before the gate existed still resumes
            skip |= {"blind_threshold", "blind_action"}
        return {k: v for k, v in asdict(self).items() if k not in skip}
