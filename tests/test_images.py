"""The container images, checked without a Docker engine: what they copy exists, what they
install matches the lock, and the module paths the components load are inside them."""

import ast
import importlib.util
import os
import re

import pytest

from pipeline import cache_keys, dag
from pipeline.cloud import kubeflow_v2_runner
from pipeline.pipeline_config import REPO_ROOT

DOCKERFILES = ("Dockerfile", "Dockerfile.tpu")
# The packages the images' executors run: what they import at run time (the compile-time tools,
# such as the cloud settings reader and the submitter, run on the user's machine).
RUNTIME_PACKAGES = ("pipeline/components", "trainer_module")


def _read(name: str) -> str:
    with open(os.path.join(REPO_ROOT, name), encoding="utf-8") as f:
        return f.read()


def _lock() -> dict[str, str]:
    return dict(re.findall(r"^([a-z0-9_.-]+)==([^\s]+)$", _read("requirements.lock"), re.M))


def _instructions(dockerfile: str, keyword: str) -> list[list[str]]:
    text = _read(dockerfile).replace("\\\n", " ")
    return [line.split()[1:] for line in text.splitlines() if line.startswith(keyword + " ")]


@pytest.mark.parametrize("dockerfile", DOCKERFILES)
def test_every_copied_path_exists_and_lands_where_the_pipeline_looks(dockerfile):
    copies = [c for c in _instructions(dockerfile, "COPY") if not c[0].startswith("--from=")]
    for *sources, _ in copies:
        for source in sources:
            assert os.path.exists(os.path.join(REPO_ROOT, source)), (dockerfile, source)
    [[workdir]] = _instructions(dockerfile, "WORKDIR")
    assert workdir == kubeflow_v2_runner.IMAGE_PROJECT_DIR
    copied = {os.path.normpath(os.path.join(workdir, dest)) for *_, dest in copies}
    for package in ("pipeline", "trainer_module", "schemas"):
        assert os.path.join(workdir, package) in copied, (dockerfile, package)
    assert ["PYTHONPATH=/pipeline"] in _instructions(dockerfile, "ENV")


def test_component_module_paths_resolve_to_copied_files():
    for dotted in (dag.PREPROCESSING_FN, dag.RUN_FN,
                   "pipeline.components.anomaly_gate.AnomalyGate"):
        module, _, attribute = dotted.rpartition(".")
        spec = importlib.util.find_spec(module)
        assert spec and spec.origin.startswith(REPO_ROOT), dotted
        relative = os.path.relpath(spec.origin, REPO_ROOT)
        assert relative.split(os.sep)[0] in ("pipeline", "trainer_module"), relative
        assert hasattr(importlib.import_module(module), attribute), dotted


def test_pipeline_image_is_the_tfx_release_the_lock_pins():
    [[base]] = _instructions("Dockerfile", "FROM")
    assert base == f"gcr.io/tfx-oss-public/tfx:{_lock()['tfx']}"


def test_the_image_stand_in_is_the_base_images_release_on_its_python():
    """`make image-venv` rebuilds the pipeline image's packages from docker/tfx-image.lock: it
    must be the TFX release the Dockerfile starts from, resolved for that image's Python."""
    text = _read("docker/tfx-image.lock")
    [[base]] = _instructions("Dockerfile", "FROM")
    assert base.endswith(":" + re.search(r"^tfx==(\S+)$", text, re.M).group(1))
    assert "--python-version 3.10" in text.splitlines()[1]


def test_pipeline_image_runs_the_locks_beam_kfp_and_aiplatform():
    """The TFX 1.16 image pins apache-beam 2.59, kfp 2.5 and google-cloud-aiplatform 1.70
    (tfx/tools/docker/requirements.txt at v1.16.0); the tests here run the lock's versions, so
    the image installs those, with the Beam boot Dataflow starts workers with from the same
    Beam release, and tells that boot to use the image's environment (tensorflow/tfx#6386)."""
    from pipeline.cloud import preflight

    files = preflight.ProjectFiles.read()
    lock = _lock()
    pins = dict(re.findall(r"^([a-z0-9_.-]+)(?:\[[a-z,]+\])?==(\S+)$", files.image_requirements,
                           re.M))
    assert set(pins) == set(preflight.IMAGE_PINNED)
    assert all(lock[name] == version for name, version in pins.items()), pins
    [[_, source, dest]] = [c for c in _instructions("Dockerfile", "COPY")
                           if c[0].startswith("--from=")]
    assert source == dest == "/opt/apache/beam"
    assert _instructions("Dockerfile", "COPY")[0][0] != "--from"
    assert preflight.BEAM_SDK_IMAGE_RE.search(files.dockerfile).group(1) == lock["apache-beam"]
    assert ["RUN_PYTHON_SDK_IN_DEFAULT_ENVIRONMENT=1"] in _instructions("Dockerfile", "ENV")
    assert _instructions("Dockerfile", "ENTRYPOINT") == [['["/opt/apache/beam/boot"]']]


def test_tpu_image_installs_the_locked_versions_and_the_matching_tensorflow_tpu():
    [[base]] = _instructions("Dockerfile.tpu", "FROM")
    assert base.startswith("python:3.10")
    lock = _lock()
    pins = dict(re.findall(r"^([a-z0-9_.-]+)(?:\[[a-z,]+\])?==([^\s]+)$",
                           _read("docker/requirements-tpu.txt"), re.M))
    assert {"tfx", "tensorflow", "tensorflow-transform", "apache-beam"} <= set(pins)
    for name, version in pins.items():
        assert lock[name] == version, f"{name}: image {version}, lock {lock[name]}"
    [tpu_version] = re.findall(r"tensorflow-tpu==([0-9.]+)", _read("Dockerfile.tpu"))
    assert tpu_version == lock["tensorflow"]
    # tensorflow-tpu 2.16.2's wheel requires libtpu==2.16.0rc0, served by Google's libtpu
    # index; PJRT (v5e) loads it from /lib.
    installs = " ".join(" ".join(r) for r in _instructions("Dockerfile.tpu", "RUN"))
    assert re.findall(r"libtpu==(\S+)", installs) == ["2.16.0rc0"]
    assert "-f https://storage.googleapis.com/libtpu-tf-releases/index.html" in _read(
        "Dockerfile.tpu")
    copy = [r for r in _instructions("Dockerfile.tpu", "RUN") if "/lib/libtpu.so" in r]
    assert copy and copy[0][0] == "cp" and "test" in copy[0]


def test_code_that_runs_in_the_images_is_python_3_10():
    """The TFX 1.16 images run Python 3.10; the venv here is 3.11."""
    roots = [os.path.join(package, n)[:-3].replace("/", ".") for package in RUNTIME_PACKAGES
             for n in os.listdir(os.path.join(REPO_ROOT, package)) if n.endswith(".py")]
    paths = [os.path.relpath(cache_keys.module_file(m, REPO_ROOT), REPO_ROOT)
             for m in cache_keys.project_modules(roots)]
    assert "pipeline/names.py" in paths and "trainer_module/run.py" in paths, paths
    for path in paths:
        tree = ast.parse(_read(path), filename=path, feature_version=(3, 10))
        imported = {alias.name.split(".")[0] for node in ast.walk(tree)
                    if isinstance(node, ast.Import | ast.ImportFrom)
                    for alias in (node.names if isinstance(node, ast.Import)
                                  else [ast.alias(node.module or "")])}
        assert not imported & {"tomllib", "wsgiref.types"}, (path, imported)


def test_dockerignore_keeps_local_state_out_of_the_images():
    ignored = set(_read(".dockerignore").split())
    assert {".venv", "output", "build", "cloud.toml"} <= ignored


def _imports(path: str) -> set[str]:
    tree = ast.parse(_read(path), filename=path)
    return {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
            for alias in node.names} | {node.module or "" for node in ast.walk(tree)
                                        if isinstance(node, ast.ImportFrom)}


def test_trainer_module_never_imports_the_pipeline():
    """The TPU image and Dataflow workers import trainer_module alone."""
    for name in os.listdir(os.path.join(REPO_ROOT, "trainer_module")):
        if name.endswith(".py"):
            imported = _imports(os.path.join("trainer_module", name))
            assert not {m for m in imported if m.split(".")[0] in ("pipeline", "bench")}, name
