"""Early stopping on the validation slice (trainer_module/early_stopping.py): the callback
stops after `patience` epochs without a new best and always ends on the best epoch's weights.
The epochs' validation losses are the one injected seam; the model and its weights are real."""

import numpy as np
import pytest
import tf_keras

from trainer_module import tasks
from trainer_module.config import MIN_PATIENCE
from trainer_module.early_stopping import MONITOR, BestEpoch, TrainingRecord, selection_loss


def _train(losses: list[float], patience: int, weights: list[float] | None = None,
           l2: float = 0.0, task: str = tasks.REGRESSION) -> tuple[TrainingRecord, float]:
    """Epochs with these validation losses (Keras' val_loss) for a `task` label; each epoch's
    weight is the epoch's number, or `weights`' entry, with an L2 penalty of `l2`. Returns
    the record and the weight training ended on."""
    model = tf_keras.Sequential([tf_keras.Input((1,)), tf_keras.layers.Dense(
        1, kernel_regularizer=tf_keras.regularizers.L2(l2) if l2 else None)])
    record = TrainingRecord(budget=f"{len(losses)} epochs of 1 steps",
                            epochs_budget=len(losses), fit_rows=100, validation_rows=100)
    best = BestEpoch(record, patience, task)
    best.set_model(model)
    for epoch, loss in enumerate(losses):
        model.layers[0].kernel.assign([[weights[epoch] if weights else float(epoch + 1)]])
        logs = {"val_loss": loss}
        best.on_epoch_end(epoch, logs)
        penalty = l2 * model.layers[0].kernel.numpy()[0, 0] ** 2
        assert logs[MONITOR] == pytest.approx(loss - (penalty if task == tasks.REGRESSION else 0))
        if model.stop_training:
            break
    best.on_train_end()
    return record, float(model.layers[0].kernel.numpy()[0][0])


def test_a_regression_labels_epochs_are_compared_without_the_weights_penalty():
    """Keras' val_loss holds the L2 penalty, which falls here as the weights shrink (0.9, 0.4,
    0.1) while the rows' loss rises (0.30, 0.35, 0.40): for a regression label the first
    epoch is the best; a class label's epochs are compared by Keras' loss as it is."""
    record, weight = _train([1.2, 0.75, 0.5], patience=10, weights=[3.0, 2.0, 1.0], l2=0.1)
    assert (record.best_epoch, weight) == (1, 3.0)
    assert record.best_val_loss == pytest.approx(0.3)
    assert not record.still_learning
    for task in (tasks.BINARY, tasks.MULTICLASS):
        record, weight = _train([1.2, 0.75, 0.5], patience=10, weights=[3.0, 2.0, 1.0], l2=0.1,
                                task=task)
        assert (record.best_epoch, weight, record.best_val_loss) == (3, 1.0, 0.5)


def test_the_rows_loss_is_kerass_loss_without_the_penalty():
    """On a real Keras evaluation of a penalized regression model: the loss Keras reports,
    less the penalty, is the loss function's mean over the rows."""
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(64, 3)), rng.normal(size=(64, 1))
    model = tf_keras.Sequential([tf_keras.Input((3,)), tf_keras.layers.Dense(
        4, kernel_regularizer=tf_keras.regularizers.L2(0.5)), tf_keras.layers.Dense(1)])
    model.compile(loss="mse")
    keras_loss = model.evaluate(x, y, batch_size=16, verbose=0)
    rows = float(np.mean((model.predict(x, verbose=0) - y) ** 2))
    assert keras_loss > rows + 0.01  # the penalty is there
    assert selection_loss(keras_loss, model, tasks.REGRESSION) == pytest.approx(rows, rel=1e-5)


def test_training_stops_after_patience_epochs_without_a_new_best_on_the_best_weights():
    record, weight = _train([1.0, 0.5, 0.7, 0.6, 0.4, 0.3], patience=2)
    assert (record.epochs_run, record.best_epoch, record.stopped_early) == (4, 2, True)
    assert record.best_val_loss == 0.5 and weight == 2.0


def test_an_early_best_is_waited_on_for_twice_its_epochs_at_least_ten():
    """With a patience of 30, a best at epoch 4 stops the run MIN_PATIENCE epochs later (at
    14), a best at epoch 12 at epoch 36 (it waits 24), and a best at epoch 20 waits the whole
    30; a later best resets the wait to its own epoch's."""
    def falling_until(best: int, epochs: int = 120) -> list[float]:
        return [1.0 / (e + 1) if e < best else 1.0 for e in range(epochs)]

    assert MIN_PATIENCE == 10
    for best, stop in ((4, 14), (12, 36), (20, 50)):
        record, weight = _train(falling_until(best), patience=30)
        assert (record.epochs_run, record.best_epoch, record.stopped_early) == (stop, best, True)
        assert weight == float(best)
    # A best at epoch 4, then one at epoch 13 (9 epochs on): the wait becomes 26.
    losses = falling_until(4)
    losses[12] = 0.01
    record, weight = _train(losses, patience=30)
    assert (record.epochs_run, record.best_epoch, weight) == (39, 13, 13.0)
    # A patience below MIN_PATIENCE is the wait itself.
    assert _train(falling_until(4), patience=3)[0].epochs_run == 7


def test_a_budget_that_ends_in_a_dip_still_ends_on_the_best_weights():
    record, weight = _train([1.0, 0.5, 0.7, 0.8], patience=10)
    assert (record.epochs_run, record.best_epoch, record.stopped_early) == (4, 2, False)
    assert weight == 2.0
    record, weight = _train([1.0, 0.9, 0.8], patience=10)  # the last is the best: kept as is
    assert (record.best_epoch, weight) == (3, 3.0)
    assert record.still_learning  # the budget ended on its best epoch: still learning


def test_a_budget_that_ends_while_still_learning_is_said(caplog):
    """A fit whose last epoch is its best ran out of budget, not of things to learn: the log
    and the record say so; one that found its best earlier, or stopped early, does not."""
    import logging

    from pipeline.runs import report

    with caplog.at_level(logging.WARNING, logger="absl"):
        record, _ = _train([1.0, 0.8, 0.6, 0.5], patience=10)
    assert record.still_learning and "was still learning" in caplog.text
    assert "the model was still learning" in report._budget(record)
    assert not _train([1.0, 0.5, 0.7, 0.8], patience=10)[0].still_learning
    assert not _train([1.0, 0.5, 0.7, 0.8, 0.9], patience=2)[0].still_learning
