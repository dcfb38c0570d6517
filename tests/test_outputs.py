"""Nothing in the Makefile destroys pushed models or run history unless the user says so."""

import os
import shutil
import subprocess

from ml_metadata.proto import metadata_store_pb2

from conftest import tree_hashes
from pipeline.pipeline_config import REPO_ROOT
from pipeline.runs import outputs, run_summary


def _output_dir(path) -> str:
    """An output dir as runs leave it: a real MLMD store recording two pipelines, a pushed
    version of each, artifacts."""
    store_path = path / "metadata" / "metadata.db"
    store_path.parent.mkdir(parents=True)
    store = run_summary.open_store(str(store_path), create=True)
    type_id = store.put_context_type(metadata_store_pb2.ContextType(name="pipeline"))
    store.put_contexts([metadata_store_pb2.Context(type_id=type_id, name=n)
                        for n in ("taxi-tpu", "penguins-tpu")])
    for pipeline, version in (("taxi-tpu", "1700000001"), ("penguins-tpu", "1700000002")):
        model = path / "serving_model" / pipeline / version
        model.mkdir(parents=True)
        (model / "saved_model.pb").write_bytes(os.urandom(2048))
    (path / "pipeline_root" / "Trainer").mkdir(parents=True)
    return str(path)


def test_make_clean_leaves_outputs_byte_identical(tmp_path):
    """The real `make clean`, run in a copy of the project's Makefile with an output dir and
    rebuildable folders beside it."""
    shutil.copy(os.path.join(REPO_ROOT, "Makefile"), tmp_path / "Makefile")
    output = _output_dir(tmp_path / "output")
    before = tree_hashes(output)
    for rebuildable in ("build", "bench/work/data_1x", "pipeline/__pycache__"):
        (tmp_path / rebuildable).mkdir(parents=True)
        (tmp_path / rebuildable / "x").write_text("x")
    result = subprocess.run(["make", "clean"], cwd=tmp_path, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    assert tree_hashes(output) == before and before
    assert not any((tmp_path / p).exists() for p in ("build", "bench/work", "pipeline/__pycache__"))


def test_clean_outputs_lists_and_deletes_only_when_confirmed(tmp_path, capsys):
    output = _output_dir(tmp_path / "out")
    before = tree_hashes(output)
    assert outputs.main(["--output-dir", output]) == 0
    said = capsys.readouterr().out
    assert "pushed models of taxi-tpu: 1 version(s) 1700000001" in said
    assert "pushed models of penguins-tpu: 1 version(s) 1700000002" in said
    assert "the run history of penguins-tpu, taxi-tpu" in said
    assert "Nothing was deleted" in said and "CONFIRM=1" in said
    assert tree_hashes(output) == before

    assert outputs.main(["--output-dir", output, "--confirm"]) == 0
    assert f"Deleted {output}" in capsys.readouterr().out
    assert not os.path.exists(output)


def _damaged_store_cases(tmp_path) -> dict[str, tuple[str, str]]:
    """name → (store path, what the error must say), each a file TFX would choke on."""
    import sqlite3

    cases = {}
    garbage = tmp_path / "garbage" / "metadata" / "metadata.db"
    garbage.parent.mkdir(parents=True)
    garbage.write_bytes(b"\x00not a database" * 64)
    cases["garbage"] = (str(garbage), "is not an SQLite database")
    foreign = tmp_path / "foreign" / "metadata" / "metadata.db"
    foreign.parent.mkdir(parents=True)
    with sqlite3.connect(foreign) as db:
        db.execute("CREATE TABLE notes (text)")
    cases["foreign"] = (str(foreign), "an SQLite database of another program")
    for name, version, says in (("newer", 99, "has schema version 99; this project's "
                                 "ml-metadata (1.16) reads version 10 only: use the newer"),
                                ("older", 6, "has schema version 6; this project's ml-metadata "
                                 "(1.16) reads version 10 only: upgrade the store")):
        path = tmp_path / name / "metadata" / "metadata.db"
        path.parent.mkdir(parents=True)
        run_summary.open_store(str(path), create=True).get_context_types()
        with sqlite3.connect(path) as db:
            db.execute("UPDATE MLMDEnv SET schema_version = ?", (version,))
        cases[name] = (str(path), says)
    return cases


def test_a_damaged_or_foreign_store_stops_the_run_untouched(tmp_path, capsys):
    from pipeline import local_runner

    for name, (store, says) in _damaged_store_cases(tmp_path).items():
        with open(store, "rb") as f:
            before = f.read()
        output = os.path.dirname(os.path.dirname(store))
        assert local_runner.main(["--output-dir", output]) == 2, name
        err = capsys.readouterr().err
        assert store in err and says in err and "It was not changed" in err, (name, err)
        with open(store, "rb") as f:
            assert f.read() == before, name
        assert sorted(os.listdir(output)) == [".run.lock", "metadata"], name  # nothing ran
