"""What a command shows a person: its own lines on the terminal, everything else in a log file.

TensorFlow, TFX and Beam write thousands of lines per run (CUDA probes, FutureWarnings, absl
INFO records with whole protobufs), and the lines a person watches for drown in them. Inside
`session`, the process's file descriptors 1 and 2, `sys.stderr` and Python's logging and
warnings go to `<output dir>/logs/<command>-<time>.log`; `print()` (the command's own lines)
reaches the terminal and the log; `error()` reaches the terminal's stderr and the log.
VERBOSE=1 leaves every stream as it is.
"""

import contextlib
import datetime
import logging
import os
import re
import sys
from collections.abc import Iterator

VERBOSE_ENV = "VERBOSE"
LOGS_DIR = "logs"
TAIL_LINES = 25  # the end of the log a failure shows
BAR_WIDTH = 30

_terminal_err = None  # the person's stderr while a session runs quietly


def verbose(env=os.environ) -> bool:
    return env.get(VERBOSE_ENV, "").strip().lower() in ("1", "true", "yes", "on")


class _Tee:
    """A text stream that writes to the terminal and to the log."""

    def __init__(self, terminal, log) -> None:
        self._streams = (terminal, log)

    def write(self, text: str) -> int:
        for stream in self._streams:
            stream.write(text)
            stream.flush()
        return len(text)

    def flush(self) -> None:
        for stream in self._streams:
            stream.flush()

    def isatty(self) -> bool:
        return self._streams[0].isatty()

    @property
    def encoding(self) -> str:
        return self._streams[0].encoding


def error(message: str) -> None:
    """Says `message` on the person's stderr (and in the log, when there is one)."""
    if _terminal_err is not None:
        _terminal_err.write(message + "\n")
        _terminal_err.flush()
    print(message, file=sys.stderr, flush=True)


def log_path(output_dir: str, command: str) -> str:
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S-%f")
    return os.path.join(output_dir, LOGS_DIR, f"{command}-{stamp}.log")


def mark(path: str | None) -> int:
    """Where the log ends now (0 without a log): `show_tail` can stop there, before what the
    command printed since (a summary the person has just read)."""
    sys.stdout.flush()
    sys.stderr.flush()
    return os.path.getsize(path) if path else 0


def tail(path: str, end: int | None = None, lines: int = TAIL_LINES) -> list[str]:
    with open(path, "rb") as f:
        text = f.read() if end is None else f.read(end)
    return text.decode("utf-8", "replace").splitlines()[-lines:]


def show_tail(path: str | None, end: int | None = None) -> None:
    """The end of the log (up to `end`, a `mark`), on the person's stderr, after a failure."""
    if path is None:
        return
    error(f"Last lines of {path}:")
    for line in tail(path, end):
        error(f"  {line}")


def _terminal(stream, fd: int):
    """Where the person reads: a copy of file descriptor `fd` when `stream` writes to it (it is
    about to be pointed at the log), else `stream` itself (e.g. a test's capture)."""
    try:
        if stream.fileno() == fd:
            return os.fdopen(os.dup(fd), "w", encoding="utf-8", buffering=1)
    except (AttributeError, OSError, ValueError):
        pass
    return stream


@contextlib.contextmanager
def session(output_dir: str, command: str, env=os.environ) -> Iterator[str | None]:
    """Runs the block with the process's output split as the module docstring says.

    Args:
      output_dir: the command's output dir; the log goes to its logs/ folder.
      command: the log file's name prefix (run, predict, dataset, ...).
      env: where VERBOSE is read.

    Yields:
      The log file's path, or None with VERBOSE=1 (nothing is redirected).
    """
    global _terminal_err
    if verbose(env):
        yield None
        return
    path = log_path(output_dir, command)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    saved_fds = os.dup(1), os.dup(2)
    saved_streams = sys.stdout, sys.stderr
    log = open(path, "a", encoding="utf-8", buffering=1)
    terminal_out, terminal_err = _terminal(sys.stdout, 1), _terminal(sys.stderr, 2)
    os.dup2(log.fileno(), 1)
    os.dup2(log.fileno(), 2)
    sys.stdout, sys.stderr = _Tee(terminal_out, log), log
    _terminal_err = terminal_err
    logging.captureWarnings(True)
    print(f"Log: {path}  (VERBOSE=1 shows it all here)", flush=True)
    try:
        yield path
    finally:
        logging.captureWarnings(False)
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved_fds[0], 1)
        os.dup2(saved_fds[1], 2)
        for fd in saved_fds:
            os.close(fd)
        sys.stdout, sys.stderr = saved_streams
        _terminal_err = None
        for stream, saved in ((terminal_out, saved_streams[0]), (terminal_err, saved_streams[1])):
            if stream is not saved:
                stream.close()
        log.close()


class ComponentProgress(logging.Handler):
    """Prints each component as it starts and finishes, with its duration, and the Trainer's
    epochs as a progress bar.

    The local orchestrator logs "Component X is running." / "... is finished." through absl,
    and run_fn logs "Epoch n/N finished" (trainer_module/run.py); those lines are what a person
    watching a run wants, without the rest of the INFO log.
    """

    _EVENT = re.compile(r"^Component (\S+) is (running|finished)\.$")
    _EPOCH = re.compile(r"^Epoch (\d+)/(\d+) finished")

    def __init__(self, bars: bool) -> None:
        super().__init__(logging.INFO)
        self._started: dict[str, float] = {}
        self._bars = bars

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        epoch = self._EPOCH.match(message)
        if epoch and self._bars:
            done, total = map(int, epoch.groups())
            filled = BAR_WIDTH * done // total
            sys.stdout.write(f"\r  epochs [{'#' * filled}{'.' * (BAR_WIDTH - filled)}] "
                             f"{done}/{total}" + ("\n" if done == total else ""))
            sys.stdout.flush()
            return
        match = self._EVENT.match(message)
        if not match:
            return
        node, event = match.groups()
        if event == "running":
            self._started[node] = record.created
            print(f"→ {node} started", flush=True)
        else:
            seconds = record.created - self._started.pop(node, record.created)
            print(f"✓ {node} finished in {seconds:.1f} s", flush=True)
