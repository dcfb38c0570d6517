"""The code part of every step's cache key, derived in one place.

Vertex AI, Kubeflow Pipelines and TFX's local runner reuse a step's earlier result when its
inputs, parameters, image and command are unchanged. An edit to the project's code behind the
same executor class path and image tag changes none of those, so each step that runs project
code carries a hash of that code in a parameter (`names.CODE_VERSION`, inside `custom_config`
for TFX's Transform and Trainer): an edit re-runs the step and, through its new outputs,
everything after it.

What a step runs is read off the built component, never listed by hand: the modules of its
component and executor classes, and the project modules its parameters name as strings
(`run_fn`, `preprocessing_fn`, `module_path`, a TFMA metric's `module`), each with every project
module it imports, transitively. The local runner, the compiled Kubeflow/Vertex specs and
`make preflight` all take their keys from `step_code_version`.

Only standard-library imports: the executors' images run Python 3.10 and import this module's
package.
"""

import ast
import functools
import hashlib
import json
import os
import re
from collections.abc import Iterable

from pipeline import REPO_ROOT, names

PROJECT_PACKAGES = ("pipeline", "trainer_module")
HASH_LENGTH = 16
# A project module named inside a string (a function path, a TFMA metric's module).
_NAMED_MODULE = re.compile(rf"\b(?:{'|'.join(PROJECT_PACKAGES)})(?:\.\w+)+")


def keyed_spec(base: type) -> type:
    """A TFX ComponentSpec class `base` plus the optional parameter the step's code hash goes
    in (`key_step` fills it)."""
    from tfx.types.component_spec import ExecutionParameter

    parameters = {**base.PARAMETERS,
                  names.CODE_VERSION: ExecutionParameter(type=str, optional=True)}
    return type(base.__name__, (base,), {"PARAMETERS": parameters, "__doc__": keyed_spec.__doc__})


class UnkeyedStepError(ValueError):
    """A step runs project code but has no parameter to carry its code hash."""


def file_hash(*paths: str, root: str = REPO_ROOT) -> str:
    """Hash of the files' names (relative to `root`) and contents."""
    digest = hashlib.sha256()
    for path in paths:
        digest.update(os.path.relpath(path, root).encode())
        with open(path, "rb") as f:
            digest.update(f.read())
    return digest.hexdigest()[:HASH_LENGTH]


def module_file(module: str, root: str) -> str | None:
    """The source file of a dotted project module under `root` (a package's __init__.py)."""
    base = os.path.join(root, *module.split("."))
    for path in (base + ".py", os.path.join(base, "__init__.py")):
        if os.path.isfile(path):
            return path
    return None


def resolve_module(name: str, root: str) -> str | None:
    """The longest prefix of dotted `name` that is a project module under `root`."""
    parts = name.split(".")
    if parts[0] not in PROJECT_PACKAGES:
        return None
    for end in range(len(parts), 0, -1):
        module = ".".join(parts[:end])
        if module_file(module, root):
            return module
    return None


@functools.lru_cache(maxsize=1024)
def _imports(path: str, mtime_ns: int) -> tuple[str, ...]:
    """Every dotted name the file imports, at any depth (imports inside functions count:
    they run when the step does)."""
    del mtime_ns  # keys the cache: an edited file is parsed again
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.append(node.module)
            found += [f"{node.module}.{alias.name}" for alias in node.names]
    return tuple(found)


def project_modules(roots: Iterable[str], root: str = REPO_ROOT) -> tuple[str, ...]:
    """The project modules `roots` (dotted names) run: themselves, the packages holding them
    and every project module they import, transitively; sorted."""
    seen: set[str] = set()
    todo = [m for m in (resolve_module(r, root) for r in roots) if m]
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        parts = module.split(".")
        todo += [".".join(parts[:end]) for end in range(1, len(parts))]  # enclosing packages
        path = module_file(module, root)
        for name in _imports(path, os.stat(path).st_mtime_ns):
            resolved = resolve_module(name, root)
            if resolved and resolved not in seen:
                todo.append(resolved)
    return tuple(sorted(seen))


def code_version(roots: Iterable[str], root: str = REPO_ROOT) -> str:
    """Hash of every project module `roots` run (see project_modules)."""
    modules = project_modules(roots, root)
    return file_hash(*(module_file(m, root) for m in modules), root=root) if modules else ""


def _named_in(value: object) -> list[str]:
    """Project module names inside a parameter's value (a string, a proto, a class)."""
    if isinstance(value, type):
        return [value.__module__]
    if value is None or isinstance(value, (int, float, bool)):
        return []
    text = value if isinstance(value, str) else str(value)
    return _NAMED_MODULE.findall(text)


def step_roots(component) -> tuple[str, ...]:
    """The modules a built TFX component runs: its class's, its executor's, and those its
    parameters name (module_path, run_fn, preprocessing_fn, TFMA metric modules)."""
    roots = [type(component).__module__]
    executor = getattr(getattr(component, "executor_spec", None), "executor_class", None)
    if executor is not None:
        roots.append(executor.__module__)
    for key, value in component.exec_properties.items():
        if key != names.CODE_VERSION:
            roots += _named_in(value)
    return tuple(roots)


def step_code_version(component, root: str = REPO_ROOT) -> str:
    """The code hash of a built component's step ('' when it runs no project code).

    Args:
      component: a TFX component, as create_pipeline builds it.
      root: the project's root (another copy of the project, in tests).

    Returns:
      A 16-hex-digit hash, or ''.
    """
    return code_version(step_roots(component), root)


def key_step(component) -> None:
    """Puts the step's code hash into the component's parameters (see the module docstring).

    Raises:
      UnkeyedStepError: the step runs project code and has nowhere to carry the hash.
    """
    if _never_cached(component):
        return
    version = step_code_version(component)
    if not version:
        return
    parameters = component.spec.PARAMETERS
    if names.CODE_VERSION in parameters:
        component.exec_properties[names.CODE_VERSION] = version
    elif names.CUSTOM_CONFIG in parameters:
        config = component.exec_properties.get(names.CUSTOM_CONFIG)
        decoded = json.loads(config) if isinstance(config, str) else dict(config or {})
        decoded[names.CODE_VERSION] = version
        component.exec_properties[names.CUSTOM_CONFIG] = (
            json.dumps(decoded, sort_keys=True) if isinstance(config, str) else decoded)
    else:
        raise UnkeyedStepError(
            f"step {component.id} runs project code ({', '.join(step_roots(component))}) but "
            f"its spec has no {names.CODE_VERSION!r} parameter: add one to its spec class")


def _never_cached(component) -> bool:
    """TFX resolvers and importers are not cached: they run every time."""
    from tfx.dsl.components.common import importer, resolver

    return isinstance(component, (resolver.Resolver, importer.Importer))


def recorded_code_version(exec_properties: dict) -> str | None:
    """The code hash a step's parameters carry (compiled or recorded), or None."""
    if exec_properties.get(names.CODE_VERSION) is not None:
        return exec_properties[names.CODE_VERSION]
    config = exec_properties.get(names.CUSTOM_CONFIG)
    if isinstance(config, str):
        config = json.loads(config or "null")
    return config.get(names.CODE_VERSION) if isinstance(config, dict) else None
