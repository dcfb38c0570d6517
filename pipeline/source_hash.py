"""Content hashes for the cache keys of the pipeline's steps.

Vertex AI and Kubeflow Pipelines reuse a step's earlier result when its inputs, parameters,
image and command are unchanged (TFX's local runner likewise, without the image). A schema
edited behind the same path, or a custom component's code rebuilt into the same image tag,
changes none of those: the hash of that content goes into a parameter of the step, so an
edit re-runs the step and everything after it.
"""

import hashlib
import os

# The project's root (not pipeline.datasets.REPO_ROOT: this module runs in the Python 3.10
# images, where that module's tomllib does not exist).
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CODE_VERSION_KEY = "code_version"  # the parameter holding a step's code hash
HASH_LENGTH = 16


def file_hash(*paths: str) -> str:
    """Hash of the files' names (relative to the project) and contents."""
    digest = hashlib.sha256()
    for path in paths:
        digest.update(os.path.relpath(path, REPO_ROOT).encode())
        with open(path, "rb") as f:
            digest.update(f.read())
    return digest.hexdigest()[:HASH_LENGTH]


def module_hash(*modules: str) -> str:
    """Hash of the project's modules given by dotted name (e.g. 'pipeline.anomaly_gate')."""
    return file_hash(*(os.path.join(REPO_ROOT, *m.split(".")) + ".py" for m in modules))
