"""The Tuner's `tuner_fn` (TFX Tuner, KerasTuner): a search over the network's depth, width,
dropout and learning rate, each trial trained on the training plan `run_fn` uses.

A trial is one `run_fn` training without the export: the same strategy, batch, learning-rate
scaling, validation slice and early stopping, so the best trial's values mean the same thing
when the Trainer receives them (`apply`). The search's objective is the validation slice's
loss; the Evaluator's eval split stays unseen.
"""

import copy
from typing import Any

import keras_tuner
from absl import logging
from tfx.components.trainer.fn_args_utils import FnArgs
from tfx.components.tuner.component import TunerFnResult

from trainer_module import early_stopping
from trainer_module.config import TUNER_TRIALS_KEY, TrainerConfig
from trainer_module.dataset_spec import DatasetSpec
from trainer_module.plan import make_plan, run_inputs

# Hyperparameter names → how each is searched.
LEARNING_RATE, DEPTH, WIDTH, DROPOUT = "learning_rate", "depth", "width", "dropout"


def _search_space(hp: keras_tuner.HyperParameters) -> dict[str, Any]:
    return {LEARNING_RATE: hp.Float(LEARNING_RATE, 1e-4, 3e-3, sampling="log"),
            DEPTH: hp.Int(DEPTH, 1, 3),
            WIDTH: hp.Choice(WIDTH, [128, 256, 512]),
            DROPOUT: hp.Float(DROPOUT, 0.0, 0.5, step=0.1)}


def _tuned(config: TrainerConfig, values: dict[str, Any]) -> TrainerConfig:
    return config.replace(learning_rate=float(values[LEARNING_RATE]),
                          hidden_units=(int(values[WIDTH]),) * int(values[DEPTH]),
                          dropout=float(values[DROPOUT]))


def apply(config: TrainerConfig, hyperparameters: dict[str, Any] | None) -> TrainerConfig:
    """The config with the Tuner's best values (a KerasTuner HyperParameters config, as the
    Trainer's fn_args carry it); the config itself without them."""
    if not hyperparameters:
        return config
    values = keras_tuner.HyperParameters.from_config(hyperparameters).values
    tuned = _tuned(config, values)
    logging.info("Tuned hyperparameters: %s", ", ".join(f"{k}={v}" for k, v in
                                                         sorted(values.items())))
    return tuned


class PlanSearch(keras_tuner.RandomSearch):
    """KerasTuner's random search, each trial fitted here: KerasTuner 1.4 checks for Keras 3
    models, and the plan builds Keras 2 (tf_keras) ones, which TFX 1.16 exports. A trial's
    score is its best epoch's validation loss, the epoch `run_fn` would keep."""

    def run_trial(self, trial: keras_tuner.engine.trial.Trial, *args: Any,
                  **kwargs: Any) -> dict[str, float]:
        trial_model = self.hypermodel.build(trial.hyperparameters)
        kwargs["callbacks"] = copy.deepcopy(kwargs.get("callbacks", []))
        history = trial_model.fit(*args, **kwargs)
        return {early_stopping.MONITOR: min(history.history[early_stopping.MONITOR])}


def tuner_fn(fn_args: FnArgs) -> TunerFnResult:
    """TFX Tuner entry point: a RandomSearch of `custom_config[TUNER_TRIALS_KEY]` trials.

    Args:
      fn_args: TFX's FnArgs; custom_config carries the trainer settings, the dataset spec and
        the trial budget.

    Returns:
      The tuner and the arguments of its search (the plan's datasets, epochs and steps).
    """
    config = TrainerConfig.from_custom_config(fn_args.custom_config)
    spec = DatasetSpec.from_custom_config(fn_args.custom_config)
    trials = int((fn_args.custom_config or {}).get(TUNER_TRIALS_KEY) or 1)
    # Trials need a slice to be scored on, however small.
    inputs = run_inputs(config, spec, fn_args, min_validation_rows=1)
    plan = inputs.plan
    if inputs.validation is None:
        raise ValueError(
            f"the Tuner scores trials on the validation slice, and validation_fraction="
            f"{config.data.validation_fraction:g} leaves {plan.validation_examples} rows: set "
            "VALIDATION_FRACTION above 0, or turn TUNE off")

    def build(hp: keras_tuner.HyperParameters):
        tuned = make_plan(_tuned(config, _search_space(hp)), spec, fn_args.train_steps,
                          examples=inputs.examples, dist=plan.strategy)
        return tuned.compiled_model(inputs.tf_transform_output, inputs.label_scale)

    tuner = PlanSearch(
        build, objective=keras_tuner.Objective(early_stopping.MONITOR, direction="min"),
        max_trials=trials, seed=config.training.seed,
        directory=fn_args.working_dir, project_name="search", overwrite=True)
    best = early_stopping.BestEpoch(inputs.new_record(),
                                    config.training.early_stopping_patience, spec.task)
    return TunerFnResult(tuner=tuner, fit_kwargs={
        "x": inputs.train, "validation_data": inputs.validation, "epochs": plan.epochs,
        "steps_per_epoch": plan.steps_per_epoch, "validation_steps": plan.validation_steps,
        "callbacks": [best], "verbose": 0})
