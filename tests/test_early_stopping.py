"""Early stopping on the validation slice (trainer_module/early_stopping.py): the callback
stops after `patience` epochs without a new best and always ends on the best epoch's weights.
The epochs' validation losses are the one injected seam; the model and its weights are real."""

import tf_keras

from trainer_module.early_stopping import BestEpoch, TrainingRecord


def _train(losses: list[float], patience: int) -> tuple[TrainingRecord, float]:
    """Epochs with these validation losses; each epoch's weights are the epoch's number.
    Returns the record and the weight training ended on."""
    model = tf_keras.Sequential([tf_keras.Input((1,)), tf_keras.layers.Dense(1)])
    record = TrainingRecord(budget=f"{len(losses)} epochs of 1 steps",
                            epochs_budget=len(losses), fit_rows=100, validation_rows=100)
    best = BestEpoch(record, patience)
    best.set_model(model)
    for epoch, loss in enumerate(losses):
        model.layers[0].kernel.assign([[float(epoch + 1)]])
        best.on_epoch_end(epoch, {"val_loss": loss})
        if model.stop_training:
            break
    best.on_train_end()
    return record, float(model.layers[0].kernel.numpy()[0][0])


def test_training_stops_after_patience_epochs_without_a_new_best_on_the_best_weights():
    record, weight = _train([1.0, 0.5, 0.7, 0.6, 0.4, 0.3], patience=2)
    assert (record.epochs_run, record.best_epoch, record.stopped_early) == (4, 2, True)
    assert record.best_val_loss == 0.5 and weight == 2.0


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
