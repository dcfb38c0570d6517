"""Scripts get each command's own exit code: from `tpu-pipeline` as it is, and printed by make
(which exits 2 for any failing recipe). A Python make cannot install on stops before anything
is installed, naming the versions that work."""

import os
import subprocess
import sys

from pipeline import REPO_ROOT
from pipeline.runs import run_lock
from pipeline.tools import cli

ENTRY_POINT = os.path.join(os.path.dirname(sys.executable), "tpu-pipeline")


def _make(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(["make", "--no-print-directory", *args], cwd=REPO_ROOT,
                          capture_output=True, text=True, env={**os.environ, **env},
                          timeout=600)


def test_the_entry_point_returns_the_busy_and_the_bad_setting_codes(tmp_path):
    output = str(tmp_path / "out")
    with run_lock.exclusive_run(output):  # another run holds the output dir
        busy = subprocess.run([ENTRY_POINT, "run", "--output-dir", output],
                              capture_output=True, text=True, timeout=600)
        assert busy.returncode == 3, busy.stderr
        assert "another run is using output_dir" in busy.stderr
        made = _make("run", f"OUTPUT_DIR={output}")
        assert made.returncode == 2
        assert "make run: the command exited with code 3" in made.stderr
    bad = subprocess.run([ENTRY_POINT, "run", "--output-dir", output], capture_output=True,
                         text=True, timeout=600, env={**os.environ, "PIPELINE_NAME": "Bad_Name"})
    assert bad.returncode == 2 and "pipeline_name='Bad_Name'" in bad.stderr


def test_an_unknown_command_lists_the_commands_and_the_codes(capsys):
    assert cli.main(["train"]) == 2
    err = capsys.readouterr().err
    assert all(command in err for command in cli.COMMANDS) and "3 another run" in err


def test_a_python_without_tfx_wheels_is_named_before_anything_installs(tmp_path):
    fake = tmp_path / "python3.12"
    fake.write_text("#!/bin/sh\necho 3.12\n")  # answers as Ubuntu 24.04's python3 would
    fake.chmod(0o755)
    venv = tmp_path / "venv"
    made = _make("venv", f"VENV={venv}", f"PYTHON={fake}")
    assert made.returncode == 2
    assert f"PYTHON={fake} is Python 3.12" in made.stderr
    assert "Python 3.10 or 3.11 only" in made.stderr and "PYTHON=python3.11" in made.stderr
    assert not venv.exists()
