"""What the quality suite judges the pipeline by: the trees it stands beside, the metric each
task is judged on, and the targets on quality and on the Trainer's time.

One owner for both sides of the suite: bench/quality.py runs it and decides each target met or
missed, bench/quality_report.py shows the result.
"""

from trainer_module import tasks

# The trees the pipeline is judged against, each with its library's defaults.
HIST_GBT, CATBOOST, LIGHTGBM = "HistGradientBoosting", "CatBoost", "LightGBM"
TREES = (HIST_GBT, CATBOOST, LIGHTGBM)
# Targets against the best tree: AUC (binary) or accuracy (multiclass) at least its minus
# CLASSIFICATION_GAP, RMSE at most RMSE_RATIO times its.
CLASSIFICATION_GAP = 0.005
RMSE_RATIO = 1.03
# The metric each task's target is on.
TARGET_METRIC = {tasks.BINARY: "auc", tasks.MULTICLASS: "accuracy", tasks.REGRESSION: "rmse"}
# Time to quality: each run's Trainer takes at most the larger of TRAINER_SECONDS_FLOOR and
# TREE_TIME_RATIO times the best tree's fit (per seed, on the same rows and machine). The floor
# is the Trainer's own start and export, which a tree's fit does not pay.
TRAINER_SECONDS_FLOOR = 60.0
TREE_TIME_RATIO = 5.0


def better(metric: str, value: float, than: float) -> bool:
    """`value` is better than `than` on `metric`: lower for RMSE, higher for AUC and accuracy."""
    return value < than if metric == "rmse" else value > than


def best_tree(scores: dict, task: str) -> str:
    """The tree with the best mean of the task's target metric (the first of TREES on a tie)."""
    metric = TARGET_METRIC[task]
    best = TREES[0]
    for tree in TREES[1:]:
        if better(metric, scores[tree][metric]["mean"], scores[best][metric]["mean"]):
            best = tree
    return best


def quality_line(metric: str, best: float) -> float:
    """The worst value of `metric` that meets the target against a best tree's `best`."""
    return RMSE_RATIO * best if metric == "rmse" else best - CLASSIFICATION_GAP


def trainer_seconds_limit(best_tree_seconds: float) -> float:
    """The most seconds a run's Trainer may take beside a best tree that fits in these."""
    return max(TRAINER_SECONDS_FLOOR, TREE_TIME_RATIO * best_tree_seconds)
