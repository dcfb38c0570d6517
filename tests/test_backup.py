"""The preemption backup (trainer_module/run.py, `SpacedBackup`): a checkpoint on disk at the
end of an epoch only once `seconds` have passed since the last one, and a fit restarted on the
same folder resumes after the backed-up epoch. The clock is the one injected seam; the model,
Keras' fit and the checkpoint files are real."""

import glob
import os

import numpy as np
import tf_keras

from trainer_module.run import SpacedBackup

EPOCH_SECONDS = 25.0


class _Clock:
    """The backup's clock: `now`, which `_Tick` (placed before the backup) moves by
    EPOCH_SECONDS at the end of each epoch, standing in for epochs that each take that long."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class _Tick(tf_keras.callbacks.Callback):
    def __init__(self, clock: _Clock) -> None:
        super().__init__()
        self.clock = clock

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        self.clock.now += EPOCH_SECONDS


class _Checkpoints(tf_keras.callbacks.Callback):
    """The checkpoint on disk in `folder` at the end of each epoch (after the backup ran)."""

    def __init__(self, folder: str) -> None:
        super().__init__()
        self.folder, self.seen = folder, []

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        self.seen.append(sorted(os.path.basename(path) for path in glob.glob(
            os.path.join(self.folder, "**", "*.index"), recursive=True)))


def _fit(folder: str, seconds: int, epochs: int,
         stop_after: int | None = None) -> tuple[list[list[str]], list[int]]:
    """Fits a small model for `epochs` with a backup every `seconds` into `folder`; returns
    the checkpoint files after each epoch and the epochs (0-based) that ran."""
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(32, 3)), rng.normal(size=(32, 1))
    model = tf_keras.Sequential([tf_keras.Input((3,)), tf_keras.layers.Dense(1)])
    model.compile(optimizer="adam", loss="mse")
    clock, checkpoints, ran = _Clock(), _Checkpoints(folder), []

    class _Stop(tf_keras.callbacks.Callback):
        def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
            ran.append(epoch)

        def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
            if stop_after is not None and epoch + 1 == stop_after:
                raise KeyboardInterrupt  # a preemption: training ends without on_train_end

    try:
        model.fit(x, y, epochs=epochs, batch_size=8, verbose=0, callbacks=[
            _Tick(clock), SpacedBackup(folder, seconds, clock=clock), checkpoints, _Stop()])
    except KeyboardInterrupt:
        pass
    return checkpoints.seen, ran


def test_a_backup_is_written_once_its_seconds_have_passed(tmp_path):
    """Epochs of 25 s with a backup every 60 s: written at the ends of epochs 3 and 6 (75 s
    and 150 s), and never between."""
    seen, _ = _fit(str(tmp_path), seconds=60, epochs=6)
    assert [bool(files) for files in seen] == [False, False, True, True, True, True]
    assert seen[2] == seen[3] == seen[4] != seen[5]


def test_zero_seconds_backs_up_every_epoch(tmp_path):
    seen, _ = _fit(str(tmp_path), seconds=0, epochs=3)
    assert all(seen) and len({tuple(files) for files in seen}) == 3


def test_a_preempted_fit_resumes_after_its_last_backup(tmp_path):
    """Preempted at the end of epoch 5 (0-based 4) with its last backup at epoch 3: the
    restarted fit runs from epoch 4 on, and the backup is deleted when it finishes."""
    _, ran = _fit(str(tmp_path), seconds=60, epochs=6, stop_after=5)
    assert ran == [0, 1, 2, 3, 4]
    _, ran = _fit(str(tmp_path), seconds=60, epochs=6)
    assert ran == [3, 4, 5]
    assert not glob.glob(os.path.join(str(tmp_path), "**", "*.index"), recursive=True)
