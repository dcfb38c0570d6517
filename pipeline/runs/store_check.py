"""The output dir's ML Metadata store is checked, read-only, before any component runs.

TFX would open a damaged file, or a store written by another ML Metadata version, only when
the first component starts, fail there with a driver error, and, for an SQLite file of some
other program, add its own tables to it. Opened read-only here first, such a file stops the run
with what is wrong and what to do, and stays exactly as it was.
"""

import os
import re

from pipeline.errors import ConfigError


def check_store(metadata_path: str) -> None:
    """Raises ConfigError when `metadata_path` exists and is not a store this ML Metadata
    version can use; the file is only read."""
    if not os.path.exists(metadata_path):
        return  # the first run creates it
    from pipeline.runs import run_summary

    try:
        run_summary.open_store(metadata_path).get_context_types()
    except Exception as e:  # MLMD raises RuntimeError (and subclasses) with SQLite's words
        raise ConfigError(_explain(metadata_path, str(e))) from None


def _explain(path: str, error: str) -> str:
    keep = (f"It was not changed. Move it away (e.g. `mv {path} {path}.bak`) to start a new "
            "history in this output dir, or set OUTPUT_DIR to another folder")
    versions = re.search(r"database version (\d+) is (greater|older) than library version (\d+)",
                         error)
    if versions:
        found, relation, ours = versions.groups()
        fix = ("use the newer ml-metadata that wrote it" if relation == "greater"
               else "upgrade the store with the ml-metadata release that wrote it")
        return (f"ML Metadata store {path} has schema version {found}; this project's "
                f"ml-metadata (1.16) reads version {ours} only: {fix}. {keep}.")
    if "file is not a database" in error:
        return f"{path} is not an SQLite database, so not an ML Metadata store. {keep}."
    if "readonly database" in error or "no such table" in error:
        return (f"{path} is an SQLite database of another program, not an ML Metadata "
                f"store. {keep}.")
    return f"ML Metadata store {path} cannot be read ({error.splitlines()[0][:200]}). {keep}."
