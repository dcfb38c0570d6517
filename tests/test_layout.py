"""The rooms' doors (docs/architecture.md): imports go bench → pipeline → trainer_module, and
what the component images run (pipeline/components/) never imports cloud/ or runs/."""

import ast
import glob
import os

import pytest

from pipeline.pipeline_config import REPO_ROOT

# room → the packages its modules may not import
FORBIDDEN = {
    "trainer_module": ("pipeline", "bench"),
    "pipeline": ("bench",),
    "pipeline/components": ("pipeline.cloud", "pipeline.runs"),
    "pipeline/spans": ("pipeline.cloud",),
}


def _imports(path: str) -> set[str]:
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
    return found


@pytest.mark.parametrize("room", FORBIDDEN)
def test_no_module_imports_against_the_direction(room):
    paths = glob.glob(os.path.join(REPO_ROOT, room, "**", "*.py"), recursive=True)
    assert paths
    for path in paths:
        wrong = {m for m in _imports(path)
                 if any(m == f or m.startswith(f + ".") for f in FORBIDDEN[room])}
        assert not wrong, (os.path.relpath(path, REPO_ROOT), wrong)


def test_every_room_says_what_lives_there():
    for room in ("pipeline", "pipeline/components", "pipeline/spans", "pipeline/cloud",
                 "pipeline/runs", "trainer_module", "bench"):
        with open(os.path.join(REPO_ROOT, room, "__init__.py"), encoding="utf-8") as f:
            assert ast.get_docstring(ast.parse(f.read())), room


def test_the_pipeline_top_level_stays_small_and_the_time_axis_has_its_room():
    """A newcomer finds the DAG, its config and the runner at the top of pipeline/; everything
    about spans, drift and skew is in pipeline/spans/."""
    top = glob.glob(os.path.join(REPO_ROOT, "pipeline", "*.py"))
    assert len(top) <= 12, sorted(os.path.basename(p) for p in top)
    spans = {os.path.basename(p) for p in glob.glob(os.path.join(REPO_ROOT, "pipeline", "spans",
                                                                  "*.py"))}
    assert {"folders.py", "store.py", "intake.py", "drift.py", "skew.py", "drift_validator.py",
            "span_window.py", "span_resolver.py"} <= spans


def _project_imports(path: str) -> set[str]:
    """The project modules `path` imports (anywhere in it, lazily too), as dotted names."""
    modules = set()
    for name in _imports(path):
        for candidate in (name, name.rpartition(".")[0]):
            if candidate and os.path.isfile(os.path.join(REPO_ROOT, *candidate.split("."))
                                            + ".py"):
                modules.add(candidate)
    return modules


def test_no_two_modules_import_each_other():
    """A circle (a module importing one that imports it back, even lazily) means neither can
    be read or changed on its own; one of them holds what both need."""
    graph = {}
    for room in ("pipeline", "trainer_module", "bench"):
        for path in glob.glob(os.path.join(REPO_ROOT, room, "**", "*.py"), recursive=True):
            name = os.path.relpath(path, REPO_ROOT)[:-3].replace(os.sep, ".")
            graph[name] = _project_imports(path)
    circles = sorted({tuple(sorted((a, b))) for a, targets in graph.items() for b in targets
                      if a in graph.get(b, ())})
    assert not circles, circles
