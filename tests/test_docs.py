"""The documentation stays true: its commands and Python run, the site builds strictly, every test it
names exists, and no page types a timing (timings live in benchmark records, rendered into
docs/performance.md).

Every ```python block of README.md and docs/ runs, and every ```bash block, unless the HTML comment
on the line above it says otherwise:

- ``<!-- docs-test: skip (why; which test exercises it) -->``: the block is expensive (a whole run, a
  GPU, a server) or needs data; the reason names where it is exercised instead - the real profile's
  runs and the README's quick starts in tests/test_real_profile.py, the 2-process forms in
  tests/test_scale_out.py and tests/test_scale_out_train.py, the servers in `make test-services`.
- ``<!-- docs-test: same-as FILE "HEADING" (...) -->``: a copy of FILE's first bash block under
  HEADING (the README's quick starts, run by tests/test_real_profile.py); it must equal it.

```yaml, ```text and other blocks are shown, not run.
"""

from __future__ import annotations

import ast
import dataclasses
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from lib.config import OFFLINE_ENV
from lib.core.paths import ROOT
from lib.pipeline.execute import STAGE_CONFIGS

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^```(\w+)[^\n]*\n(.*?)^```\s*$", re.M | re.S)
DIRECTIVE = re.compile(r"<!-- docs-test: (skip|same-as) (.*?)-->\s*$")
RUN = ("bash", "python")
# A number followed by a unit of time, as prose would state a measured duration.
TIMING = re.compile(
    r"\b\d+(?:[.,]\d+)?\s?(?:ms|s|sec|secs|seconds?|min|mins|minutes?|h|hrs?|hours?)\b(?![-/(])"
)


def blocks() -> list[tuple[str, int, str, str, tuple[str, str] | None]]:
    """(page, line, language, code, (directive, argument) or None) for every fenced block."""
    out = []
    for page in PAGES:
        text = page.read_text()
        for m in FENCE.finditer(text):
            before = text[: m.start()].rstrip("\n").rsplit("\n", 1)[-1]
            d = DIRECTIVE.search(before)
            line = text[: m.start()].count("\n") + 1
            out.append(
                (
                    str(page.relative_to(ROOT)),
                    line,
                    m.group(1),
                    m.group(2),
                    (d.group(1), d.group(2)) if d else None,
                )
            )
    return out


BLOCKS = blocks()
RUNNABLE = [b for b in BLOCKS if b[2] in RUN and b[4] is None]
SKIPPED = [b for b in BLOCKS if b[2] in RUN and b[4] and b[4][0] == "skip"]
COPIES = [b for b in BLOCKS if b[2] in RUN and b[4] and b[4][0] == "same-as"]


def _env(tmp_path) -> dict:
    env = {
        **os.environ,
        **OFFLINE_ENV,
        "VQALAB_OUTPUTS": str(tmp_path / "outputs"),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    }  # `python` is the venv's
    env.pop("VQALAB_PROFILE", None)
    return env


def test_the_pages_have_code_to_run():
    assert len(RUNNABLE) >= 5 and {b[2] for b in RUNNABLE} == {"bash", "python"}


@pytest.mark.parametrize(
    "page, line, lang, code, directive", RUNNABLE, ids=[f"{b[0]}:{b[1]}" for b in RUNNABLE]
)
def test_documented_code_runs(page, line, lang, code, directive, tmp_path):
    cmd = (
        ["bash", "-euo", "pipefail", "-c", code] if lang == "bash" else [sys.executable, "-c", code]
    )
    r = subprocess.run(
        cmd, cwd=ROOT, env=_env(tmp_path), capture_output=True, text=True, timeout=600
    )
    assert r.returncode == 0, (
        f"{page}:{line}: the documented {lang} block fails\n{code}\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}"
    )


@pytest.mark.parametrize(
    "page, line, lang, code, directive", SKIPPED, ids=[f"{b[0]}:{b[1]}" for b in SKIPPED]
)
def test_a_skipped_block_says_why(page, line, lang, code, directive):
    reason = directive[1].strip()
    assert reason.startswith("(") and reason.endswith(")") and len(reason) > 10, (
        f"{page}:{line}: say why the block is not run and which test exercises it: <!-- docs-test: skip (...) -->"
    )


@pytest.mark.parametrize(
    "page, line, lang, code, directive", COPIES, ids=[f"{b[0]}:{b[1]}" for b in COPIES]
)
def test_a_copied_block_equals_its_original(page, line, lang, code, directive):
    m = re.match(r'(\S+) "([^"]+)"', directive[1].strip())
    assert m, f'{page}:{line}: write <!-- docs-test: same-as FILE "HEADING" (...) -->'
    text = (ROOT / m.group(1)).read_text()
    original = re.search(r"```bash\n(.*?)```", text[text.index(m.group(2)) :], re.S).group(1)
    assert code == original, (
        f"{page}:{line} differs from the first bash block under {m.group(2)!r} in {m.group(1)}"
    )


# what else a reader takes as the project's word: the code's docstrings and comments, the profiles, the
# Makefile (benchmarks/, scripts/gpu_check.py and benchmarks/records.py, which writes their records with the
# machine's 1/5/15-minute load, measure, so their texts may speak of time; tests quote model outputs)
STATED = sorted(
    {
        *ROOT.glob("lib/**/*.py"),
        *ROOT.glob("params/*.yaml"),
        ROOT / "Makefile",
        ROOT / "environment.yml",
    }
    - {ROOT / "benchmarks" / "records.py"}
)


def test_no_page_states_a_timing_by_hand():
    found = []
    for page in [*PAGES, *STATED]:
        for n, line in enumerate(page.read_text().splitlines(), 1):
            for m in TIMING.finditer(line):
                found.append(
                    f"{page.relative_to(ROOT)}:{n}: {m.group(0)!r} in {line.strip()[:100]!r}"
                )
    assert not found, (
        "timings belong in benchmark records (docs/performance.md renders them):\n"
        + "\n".join(found)
    )


# A path under tests/ (`tests/test_x.py`, `tests/scrapbook/`), maybe a node id (`tests/test_x.py::test_y[case]`)
TEST_PATH = re.compile(
    r"(?<![\w/.-])(tests/(?:[\w.-]+/)*(?:[\w-]+\.py)?)(?:::(\w+(?:::\w+)*)(?:\[[^\]\s]*\])?)?"
)
# A test function named alone in backticks: `test_y` or `test_y[case]`
TEST_NAME = re.compile(r"`(test_\w+)(?:\[[^\]`]*\])?`")


def _tests_in(path: Path) -> set[str]:
    """The node names pytest collects from a test file: ``test*`` functions and ``Test*::test*`` methods."""
    names = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith(
            "test"
        ):
            names.add(node.name)
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            names |= {
                f"{node.name}::{f.name}"
                for f in node.body
                if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                and f.name.startswith("test")
            }
    return names


def test_every_test_the_docs_name_exists():
    """A page that says which test checks a claim must name a real one: a path under tests/ exists,
    a node id's function (a parametrized id's base name) is defined in its file, and a `test_...` name
    alone in backticks is a test somewhere under tests/ - unless it is a stage config field
    (`test_dataset`), which the pages quote the same way. Renaming or deleting a test without the
    docs fails here, page and line named."""
    every_test = {
        name.rsplit("::", 1)[-1] for f in (ROOT / "tests").rglob("*.py") for name in _tests_in(f)
    }
    fields = {f.name for cls in STAGE_CONFIGS.values() for f in dataclasses.fields(cls)}
    missing, seen = [], 0
    for page in PAGES:
        where = page.relative_to(ROOT)
        for n, line in enumerate(page.read_text().splitlines(), 1):
            for m in TEST_PATH.finditer(line):
                seen += 1
                path, node = ROOT / m.group(1), m.group(2)
                if not path.exists():
                    missing.append(f"{where}:{n}: {m.group(0)} - no such file or folder")
                elif node and (path.suffix != ".py" or node not in _tests_in(path)):
                    missing.append(
                        f"{where}:{n}: {m.group(0)} - {m.group(1)} defines no test {node}"
                    )
            for m in TEST_NAME.finditer(line):
                seen += 1
                if m.group(1) not in every_test and m.group(1) not in fields:
                    missing.append(f"{where}:{n}: {m.group(0)} - no test of that name under tests/")
    assert seen >= 20, (
        f"only {seen} test references found: has TEST_PATH or TEST_NAME stopped matching the pages?"
    )
    assert not missing, (
        "the docs name tests that do not exist (point at the test that checks the claim):\n"
        + "\n".join(missing)
    )


def test_every_lib_module_is_on_an_api_page():
    """A module added to lib/ (a new engine piece, a family's module) is listed in docs/api/, so the
    reference a newcomer reads is the whole package."""
    listed = set(
        re.findall(
            r"^::: (lib[\w.]*)$",
            "".join(p.read_text() for p in (ROOT / "docs/api").glob("*.md")),
            re.M,
        )
    )
    modules = {
        ".".join(p.parts[:-1] if p.stem == "__init__" else p.with_suffix("").parts)
        for p in (path.relative_to(ROOT) for path in (ROOT / "lib").rglob("*.py"))
        if p.stem != "__main__" and "data" not in p.parts
    }
    assert not modules - listed - {"lib"}, (
        f"lib modules on no page of docs/api/: {sorted(modules - listed - {'lib'})}"
    )
    assert not listed - modules, f"docs/api/ lists modules lib/ lacks: {sorted(listed - modules)}"


def test_the_readme_is_short_and_points_at_the_docs():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 200
    for heading in (
        "## Two commands",
        "### Your model",
        "### Your dataset",
    ):  # tests/test_real_profile.py reads two
        assert heading in text
    for link in re.findall(r"\]\((docs/[^)#]+)", text):
        assert (ROOT / link).exists(), f"README links to {link}, which does not exist"


def test_the_site_builds_strictly(tmp_path):
    """mkdocs build --strict (what `make docs` and .ci/run do): broken links, missing pages, a failing
    generated block or an unresolved API reference fail it. Run as `make docs` runs it, by the venv's
    ``mkdocs`` script: ``python -m mkdocs`` would put the project root on sys.path, and a hook
    importing a module only the root provides would pass here and fail there."""
    r = subprocess.run(
        [
            str(Path(sys.executable).parent / "mkdocs"),
            "build",
            "--strict",
            "--site-dir",
            str(tmp_path / "site"),
        ],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-5000:]
    site = tmp_path / "site"
    assert "lora_r" in (site / "stages" / "05_train.html").read_text()  # generated from TrainConfig
    assert (
        "doc-heading" in (site / "api" / "stages.html").read_text()
    )  # mkdocstrings rendered the API
    assert "<!-- vqalab:" not in "".join(p.read_text() for p in site.rglob("*.html"))
