"""`make report` outside a run: what it says when there is nothing to report on.

The report of real runs (blessed, not blessed, stopped by bad data) is checked in headless
Chromium by tests/test_e2e.py, on the runs it makes anyway.
"""

import subprocess
import sys

from pipeline.pipeline_config import REPO_ROOT


def test_report_without_a_run_names_the_store_and_what_to_do(tmp_path):
    result = subprocess.run([sys.executable, "-m", "pipeline.runs.report", "--output-dir",
                             str(tmp_path)], cwd=REPO_ROOT, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 2
    assert f"no run of pipeline 'taxi-tpu' is recorded in {tmp_path}/metadata/metadata.db" \
        in result.stderr
    assert "make run" in result.stderr
    assert not (tmp_path / "report").exists()
