"""Early stopping on the validation slice, and the record of what the budget bought.

Keras' own EarlyStopping restores the best weights only when it stops the run, so a budget
that ends during a late dip in validation loss would export the last weights rather than the
best. `BestEpoch` keeps the best epoch's weights and always ends on them.
"""

import dataclasses
import json
import math
import os

import numpy as np
import tf_keras
from absl import logging

from trainer_module import tasks
from trainer_module.config import patience_after

# The file in the Trainer's model_run_dir that records the budget and where training stopped
# (the run report reads it).
RECORD_FILE = "training.json"
# What early stopping, the refit's check and the Tuner compare (`selection_loss`).
MONITOR = "val_selection_loss"
KERAS_MONITOR = "val_loss"


@dataclasses.dataclass
class TrainingRecord:
    """What one training run did with its budget.

    budget: the budget as configured ("100 epochs of 36 steps", "1000 steps in 5 epochs").
    epochs_budget: Keras epochs the budget allowed; epochs_run: epochs trained.
    best_epoch: the epoch whose weights were kept (1-based; 0: the last, without validation).
    stopped_early: training stopped before the budget ended.
    best_val_loss: the kept epoch's validation loss (MONITOR; None without validation).
    fit_rows / validation_rows: the training split's two parts.
    refit_epochs: epochs of the refit on both parts (0: no refit ran).
    refit_val_loss: the refit's validation loss (MONITOR's kind; None: no refit ran).
    refit_kept: the refit was exported; it is kept only when its loss on the slice is not above
      the kept epoch's (False: the kept epoch's weights were exported).
    still_learning: the budget ended while the validation loss was still falling (the last
      epoch was the best): a larger budget would likely have trained a better model.
    fold / folds: which of the run's models this is, of how many (TrainingConfig.
      validation_folds; each fold's record is in its own folder, `run.fold_dir`).
    """

    budget: str
    epochs_budget: int
    fit_rows: int
    validation_rows: int
    epochs_run: int = 0
    best_epoch: int = 0
    stopped_early: bool = False
    best_val_loss: float | None = None
    refit_epochs: int = 0
    refit_val_loss: float | None = None
    refit_kept: bool = False
    still_learning: bool = False
    fold: int = 0
    folds: int = 1

    def write(self, model_run_dir: str) -> None:
        import tensorflow as tf

        tf.io.gfile.makedirs(model_run_dir)
        with tf.io.gfile.GFile(os.path.join(model_run_dir, RECORD_FILE), "w") as f:
            f.write(json.dumps(dataclasses.asdict(self), indent=2))


def read_record(model_run_dir: str) -> TrainingRecord | None:
    """The record a run wrote in its model_run_dir (None: a run from before records)."""
    import tensorflow as tf

    path = os.path.join(model_run_dir, RECORD_FILE)
    if not tf.io.gfile.exists(path):
        return None
    with tf.io.gfile.GFile(path) as f:
        return TrainingRecord(**json.loads(f.read()))


def penalty(model: tf_keras.Model) -> float:
    """The weights' penalty Keras adds to a model's loss (its regularization losses), at the
    model's current weights."""
    import tensorflow as tf

    return float(tf.add_n(model.losses)) if model.losses else 0.0


def selection_loss(keras_loss: float, model: tf_keras.Model, task: str) -> float:
    """The loss that chooses between epochs and models, from one Keras reported for `model`
    on the validation slice (training's objective: the rows' loss plus the weights' penalty).

    For a regression label, the rows' loss alone: their squared error on the standardized
    label, which is what the Evaluator's RMSE judges. The penalty, the same for every row
    (it depends only on the weights, fixed while Keras scores a slice), shrinks as training
    goes on and can outweigh that error on small data, where it is heaviest: a late epoch
    would win for its lighter weights while its error rose. For a class label the rows' log
    loss is itself only a stand-in for AUC or accuracy, and the loss Keras reports is kept:
    the log loss alone chose earlier epochs that scored lower (docs/trainer-and-tpu.md).
    """
    return float(keras_loss) - (penalty(model) if task == tasks.REGRESSION else 0.0)


class BestEpoch(tf_keras.callbacks.Callback):
    """Tracks the validation slice's loss for a `task` label (MONITOR, `selection_loss`,
    which it adds to the epoch's logs for the callbacks after it and the history) each epoch;
    stops after `patience_after(best epoch, patience)` epochs without a new best (patience 0:
    never), and ends training on the best epoch's weights."""

    def __init__(self, record: TrainingRecord, patience: int, task: str) -> None:
        super().__init__()
        self.record = record
        self.patience = patience
        self.task = task
        self._best_weights: list[np.ndarray] | None = None
        self._waited = 0

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        self.record.epochs_run = epoch + 1
        logs = logs if logs is not None else {}
        if KERAS_MONITOR in logs:
            logs[MONITOR] = selection_loss(logs[KERAS_MONITOR], self.model, self.task)
        loss = logs.get(MONITOR)
        if loss is None or not math.isfinite(float(loss)):
            return
        best = self.record.best_val_loss
        if best is None or float(loss) < best:
            self.record.best_val_loss, self.record.best_epoch = float(loss), epoch + 1
            self._best_weights = self.model.get_weights()
            self._waited = 0
            return
        self._waited += 1
        if self.patience and self._waited >= patience_after(self.record.best_epoch,
                                                            self.patience):
            self.record.stopped_early = True
            self.model.stop_training = True

    def on_train_end(self, logs: dict | None = None) -> None:
        if self._best_weights is not None and self.record.best_epoch != self.record.epochs_run:
            self.model.set_weights(self._best_weights)
        self.record.still_learning = (not self.record.stopped_early
                                      and self.record.best_epoch == self.record.epochs_run > 0
                                      and self.record.epochs_run > 1)
        if self.record.still_learning:
            logging.warning(
                "The budget of %d epochs ended while the validation loss was still falling "
                "(its last epoch was the best): the model was still learning; a larger budget "
                "(EPOCHS, or the spec's [training] epochs) would likely train a better one",
                self.record.epochs_budget)
        logging.info("Training ended after %d of %d epochs%s; kept epoch %s (%s %s)",
                     self.record.epochs_run, self.record.epochs_budget,
                     " (early stop)" if self.record.stopped_early else "",
                     self.record.best_epoch or "last", MONITOR,
                     "n/a" if self.record.best_val_loss is None
                     else f"{self.record.best_val_loss:.5f}")
