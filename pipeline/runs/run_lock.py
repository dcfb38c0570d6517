"""One run at a time per output dir, and honest MLMD records after a run that was killed.

The local orchestrator has no notion of another run using the same pipeline root and SQLite
store: two runs would interleave writes to the same artifact folders and executions. A run
therefore takes an exclusive `flock` on `<output_dir>/.run.lock` before any component starts;
a second run against the same output dir fails at once with a message naming the holder. The
kernel drops the lock when its process dies, even on SIGKILL, so a killed run never blocks the
next one.

A killed run leaves its unfinished executions in state RUNNING forever (a new run registers new
executions in its own pipeline-run context and never looks at them). Whoever holds the lock
knows no other run is live, so it marks those executions CANCELED, with the reason, before it
starts: the store then says what happened instead of claiming work that is not running.
"""

import contextlib
import datetime
import fcntl
import os
import socket
from collections.abc import Iterator

from ml_metadata.proto import metadata_store_pb2

from pipeline.runs import run_summary

LOCK_FILE = ".run.lock"
ABANDONED_PROPERTY = "abandoned"
_UNFINISHED = (metadata_store_pb2.Execution.NEW, metadata_store_pb2.Execution.RUNNING)


class RunInProgressError(RuntimeError):
    """Another run holds the output dir."""


@contextlib.contextmanager
def exclusive_run(output_dir: str) -> Iterator[None]:
    """Holds `<output_dir>/.run.lock` for the duration of the block, or raises at once."""
    os.makedirs(output_dir, exist_ok=True)
    path = os.path.join(output_dir, LOCK_FILE)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 512, 0).decode("utf-8", "replace").strip() or "unknown"
            raise RunInProgressError(
                f"another run is using output_dir={output_dir!r} ({holder}); its pipeline "
                "root and MLMD store take one run at a time. Wait for it to finish, or set "
                "OUTPUT_DIR (--output-dir) to another folder to run in parallel."
            ) from None
        started = datetime.datetime.now().isoformat(timespec="seconds")
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()}, started {started}"
                  .encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the lock


def cancel_abandoned_executions(metadata_path: str) -> list[str]:
    """Marks executions a killed run left NEW/RUNNING as CANCELED; returns what it marked.

    Only call while holding `exclusive_run` for the output dir of `metadata_path`.
    """
    if not os.path.exists(metadata_path):
        return []
    store = run_summary.open_store(metadata_path, create=True)
    abandoned = [e for e in store.get_executions() if e.last_known_state in _UNFINISHED]
    marked = []
    for execution in abandoned:
        execution.last_known_state = metadata_store_pb2.Execution.CANCELED
        execution.custom_properties[ABANDONED_PROPERTY].string_value = (
            "its run stopped (killed or crashed) before this execution finished")
        node = run_summary.node_id_of(store, execution)
        marked.append(f"{node} (execution {execution.id})")
    if abandoned:
        store.put_executions(abandoned)
    return marked
