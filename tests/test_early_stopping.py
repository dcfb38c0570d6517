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
