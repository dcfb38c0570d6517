"""Every step's cache key covers the project code it runs, and only that (pipeline/cache_keys.py).

The keys are computed over a copy of the project, so that each module can be edited in turn
without touching the checkout the other tests read.
"""

import json
import os
import shutil
import subprocess
import sys

import pytest

from pipeline import cache_keys, dag
from pipeline.env_settings import from_env
from pipeline.pipeline_config import REPO_ROOT, configure

# A code change, not a comment: the module's behaviour (its attributes) differs.
EDIT = "\n_EDITED_FOR_THE_CACHE_TEST = 1\n"


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The local DAG as `make run` builds it, with warm start (so every kind of step is in)."""
    output = str(tmp_path_factory.mktemp("output"))
    config = configure(from_env(env={"WARM_START": "1", "OUTPUT_DIR": output})).validate()
    return dag.create_pipeline(config)


def _upstream(component) -> set[str]:
    seen, todo = set(), list(component.upstream_nodes)
    while todo:
        node = todo.pop()
        if node.id not in seen:
            seen.add(node.id)
            todo += list(node.upstream_nodes)
    return seen


def _copy_project(tmp_path) -> str:
    root = str(tmp_path / "project")
    for package in cache_keys.PROJECT_PACKAGES:
        shutil.copytree(os.path.join(REPO_ROOT, package), os.path.join(root, package),
                        ignore=shutil.ignore_patterns("__pycache__"))
    return root


def test_editing_any_module_a_step_runs_rekeys_it_and_no_upstream_step_that_does_not(
        built, tmp_path):
    root = _copy_project(tmp_path)
    roots = {c.id: cache_keys.step_roots(c) for c in built.components}
    deps = {node: set(cache_keys.project_modules(r, root)) for node, r in roots.items()}
    upstream = {c.id: _upstream(c) for c in built.components}
    before = {node: cache_keys.code_version(r, root) for node, r in roots.items()}
    edited = sorted(set().union(*deps.values()))
    assert len(edited) > 20, edited
    for module in edited:
        path = cache_keys.module_file(module, root)
        with open(path, encoding="utf-8") as f:
            original = f.read()
        with open(path, "w", encoding="utf-8") as f:
            f.write(original + EDIT)
        try:
            after = {node: cache_keys.code_version(r, root) for node, r in roots.items()}
        finally:
            with open(path, "w", encoding="utf-8") as f:
                f.write(original)
        rekeyed = {node for node in roots if after[node] != before[node]}
        for node, modules in deps.items():
            if module in modules:
                assert node in rekeyed, (module, node)
                # A step upstream re-runs only if it runs the module too.
                assert not {u for u in upstream[node] & rekeyed if module not in deps[u]}, (
                    module, node, rekeyed)
            else:
                assert node not in rekeyed, (module, node)


def test_the_reported_edits_rekey_only_their_step(built):
    """The metrics that decide the blessing and the Pusher's code: each keys its own step; the
    model's code keys the Trainer, never Transform."""
    deps = {c.id: set(cache_keys.project_modules(cache_keys.step_roots(c)))
            for c in built.components}
    owners = {module: {node for node, modules in deps.items() if module in modules}
              for module in ("pipeline.components.eval_metrics", "pipeline.components.pusher",
                             "trainer_module.model", "trainer_module.preprocessing")}
    assert owners == {"pipeline.components.eval_metrics": {"Evaluator"},
                      "pipeline.components.pusher": {"Pusher"},
                      "trainer_module.model": {"Trainer"},
                      "trainer_module.preprocessing": {"Transform"}}


_IMPORT_EACH_STEP = """
import importlib, json, sys
from pipeline import cache_keys
found = {}
for node, roots in json.load(sys.stdin).items():
    for name in [m for m in sys.modules if m.split(".")[0] in cache_keys.PROJECT_PACKAGES]:
        del sys.modules[name]
    for root in roots:
        module = cache_keys.resolve_module(root, cache_keys.REPO_ROOT)
        if module:
            importlib.import_module(module)
    found[node] = sorted(m for m in sys.modules
                         if m.split(".")[0] in cache_keys.PROJECT_PACKAGES)
print(json.dumps(found))
"""


def test_what_python_imports_for_a_step_is_in_its_key(built):
    """The key's import walk is read from the source; Python's own import of each step's
    modules, in a fresh process, loads nothing the walk missed."""
    roots = {c.id: list(cache_keys.step_roots(c)) for c in built.components}
    result = subprocess.run([sys.executable, "-c", _IMPORT_EACH_STEP], input=json.dumps(roots),
                            capture_output=True, text=True, cwd=REPO_ROOT, check=True,
                            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    imported = json.loads(result.stdout.strip().splitlines()[-1])
    for node, modules in imported.items():
        missed = set(modules) - set(cache_keys.project_modules(roots[node]))
        assert not missed, (node, missed)
    assert {"pipeline.components.eval_metrics", "trainer_module.executor"} <= set(
        imported["Evaluator"])


def test_every_step_that_runs_project_code_carries_its_key(built):
    for component in built.components:
        version = cache_keys.step_code_version(component)
        if version and component.id not in ("baseline_resolver", "warm_start_resolver"):
            assert cache_keys.recorded_code_version(component.exec_properties) == version, (
                component.id)
    keyed = {c.id for c in built.components
             if cache_keys.recorded_code_version(c.exec_properties)}
    assert keyed == {"CsvExampleGen", "ImportSchemaGen", "AnomalyGate", "Transform", "Trainer",
                     "Evaluator", "Pusher"}


def test_a_custom_step_without_a_key_parameter_is_refused():
    from tfx.components import StatisticsGen
    from tfx.dsl.components.base import executor_spec

    from pipeline.components.pusher import StagedPusherExecutor

    class Unkeyed(StatisticsGen):
        EXECUTOR_SPEC = executor_spec.BeamExecutorSpec(StagedPusherExecutor)

    from tfx import types
    from tfx.types import standard_artifacts

    step = Unkeyed(examples=types.Channel(type=standard_artifacts.Examples))
    with pytest.raises(cache_keys.UnkeyedStepError, match="has no 'code_version' parameter"):
        cache_keys.key_step(step)
