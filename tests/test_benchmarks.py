"""Benchmark records (benchmarks/records.py): every record carries the machine and its load."""

import json
import os
from types import SimpleNamespace

import pytest

from benchmarks import records


@pytest.fixture
def loads(monkeypatch, tmp_path):
    """Two cores; each os.getloadavg() call returns the next of the given triples."""
    monkeypatch.setenv("VQALAB_OUTPUTS", str(tmp_path))
    monkeypatch.setattr(os, "cpu_count", lambda: 2)

    def set_loads(*triples):
        seq = iter(triples)
        monkeypatch.setattr(os, "getloadavg", lambda: next(seq))

    return set_loads


def test_a_record_says_what_else_ran(loads, tmp_path):
    loads((0.2, 0.3, 0.4), (0.6, 0.5, 0.45))
    before = records.host_state()
    written = records.record(
        "demo", {"seconds": 1.5, "machine": {"torch_threads": 2}}, before, {"seconds": "<= 2"}
    )
    assert written == json.loads((tmp_path / "bench" / "demo.json").read_text())
    assert written["seconds"] == 1.5
    m = written["machine"]
    assert m["torch_threads"] == 2 and m["cores"] == 2 and m["cpu_model"] and m["platform"]
    load = written["load"]
    assert load["before"] == {"1min": 0.2, "5min": 0.3, "15min": 0.4}
    assert load["after"] == {"1min": 0.6, "5min": 0.5, "15min": 0.45}
    assert load["under_load"] is False and load["own_cores"] >= 0 and "0.5 x cores" in load["rule"]


@pytest.mark.parametrize(
    "before, after, own_cpu_s, busy",
    [
        ((0.9, 0.5, 0.5), (0.9, 0.5, 0.5), 0.0, False),  # 0.9 <= 0.5 x 2 cores
        ((1.2, 0.5, 0.5), (0.1, 0.5, 0.5), 0.0, True),  # busy before the measurement
        (
            (0.1, 0.5, 0.5),
            (1.5, 0.5, 0.5),
            0.0,
            True,
        ),  # busy after it, and not with the benchmark's own work
        (
            (0.1, 0.5, 0.5),
            (2.0, 0.5, 0.5),
            20.0,
            False,
        ),  # 2 cores of its own for 10 s: the load after is its own
        ((0.1, 0.5, 0.5), (3.2, 0.5, 0.5), 20.0, True),  # 1.2 more than its own
    ],
)
def test_under_load_rule(loads, monkeypatch, before, after, own_cpu_s, busy):
    loads(before, after)
    clock = iter([100.0, 110.0])
    monkeypatch.setattr(
        records, "time", SimpleNamespace(monotonic=lambda: next(clock))
    )  # not pytest's clock
    cpu = iter([5.0, 5.0 + own_cpu_s])
    monkeypatch.setattr(os, "times", lambda: os.times_result((next(cpu), 0.0, 0.0, 0.0, 0.0)))
    written = records.record("rule", {"seconds": 1.0}, records.host_state(), {"seconds": "<= 2"})
    assert written["load"]["under_load"] is busy
    assert written["load"]["own_cores"] == own_cpu_s / 10


def test_no_benchmark_target_holds_whenever_both_sides_ran():
    """A speed-up "> 1" or a count "> 0" holds for any run that finished: each target states what
    the user was promised (a margin), so a figure that regressed to barely-better fails it."""
    import importlib
    import pkgutil
    from pathlib import Path

    import benchmarks

    skip = {"run", "publish"}
    found = 0
    for m in pkgutil.iter_modules([str(Path(benchmarks.__file__).parent)]):
        if m.name.startswith("_") or m.name in skip:
            continue
        targets = getattr(importlib.import_module(f"benchmarks.{m.name}"), "TARGETS", {})
        for name, rule in targets.items():
            op, value = records.parse_rule(rule)
            found += 1
            assert not (op == ">" and value in (0, 1)), f"benchmarks/{m.name}.py: {name} {rule}"
            if name.endswith("speedup"):
                assert op == ">=" and value > 1, f"benchmarks/{m.name}.py: {name} {rule}"
    assert found >= 20


def test_make_bench_lets_the_load_of_one_benchmark_settle_before_the_next(monkeypatch):
    """A benchmark started while the last one's load still counts would be marked under load."""
    from benchmarks import run as bench_run

    loads = iter([2.0, 1.5, 0.9, 0.3, 0.3])
    clock = iter(range(0, 10_000, 5))
    waits = []
    monkeypatch.setattr(bench_run.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(bench_run.os, "getloadavg", lambda: (next(loads), 0.0, 0.0))
    monkeypatch.setattr(bench_run.time, "monotonic", lambda: next(clock))
    monkeypatch.setattr(bench_run.time, "sleep", waits.append)
    bench_run.settle()  # 2.0, 1.5 and 0.9 are above 0.6 x 0.5 x 2 cores; 0.3 is not
    assert waits == [5, 5, 5]
    monkeypatch.setattr(bench_run.os, "getloadavg", lambda: (3.0, 0.0, 0.0))
    clock = iter(range(0, 10_000, 5))
    waits.clear()
    bench_run.settle()  # never settles: gives up once SETTLE_AT_MOST_S have passed
    assert sum(waits) == bench_run.SETTLE_AT_MOST_S - 5


def test_the_suite_record_lists_each_slow_test_with_what_it_proves(tmp_path):
    """``benchmarks.suite`` keeps the tests of 20 s or more, slowest first, each with the first line
    of its docstring (else its module's, a notebook's title, or its name in words)."""
    from benchmarks.suite import SLOW_SECONDS, command, slow_tests

    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "test_a.py").write_text(
        '"""Module line."""\n\n\ndef test_one():\n    """Proves one thing.\n\n    More."""\n\n\n'
        "def test_two():\n    pass\n"
    )
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "notebooks" / "05_train.py").write_text("# %% [markdown]\n# # 05 · Train\n")
    timed = [
        ("tests/test_a.py::test_one", SLOW_SECONDS + 1),
        ("tests/test_a.py::test_two[x]", SLOW_SECONDS + 5),
        ("tests/test_a.py::test_fast", SLOW_SECONDS - 0.1),
        ("notebooks/05_train.ipynb::Cell 3", 90.0),
        ("tests/test_gone.py::test_lost_name", 30.0),
    ]
    assert slow_tests(timed, tmp_path) == [
        {
            "test": "notebooks/05_train.ipynb::Cell 3",
            "seconds": 90.0,
            "proves": "notebook 05 · Train runs on the smoke profile (nbval)",
        },
        {"test": "tests/test_gone.py::test_lost_name", "seconds": 30.0, "proves": "lost name"},
        {
            "test": "tests/test_a.py::test_two[x]",
            "seconds": SLOW_SECONDS + 5,
            "proves": "Module line.",
        },
        {
            "test": "tests/test_a.py::test_one",
            "seconds": SLOW_SECONDS + 1,
            "proves": "Proves one thing.",
        },
    ]
    assert command()[1:] == ["-m", "pytest", *command()[3:]] and "-n" in command()
