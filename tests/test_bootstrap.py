"""`make dataset` on CSV files it has never seen: TFDV's schema and a role per column with the
reason beside it, a spec the pipeline loads, and clear errors for a label that cannot be."""

import csv
import random
import tomllib

import pytest

from pipeline import bootstrap, datasets


def _write(path, rows: list[dict]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


@pytest.fixture(scope="module")
def churn(tmp_path_factory):
    """600 made-up customers: an id, free text, a wide and a small string column, an hour of
    day, a long-tailed amount with gaps, a plain number, and a yes/no label."""
    rng = random.Random(3)
    rows = []
    for i in range(600):
        amount = rng.lognormvariate(3, 1.2)
        rows.append({
            "customer_id": f"C{100000 + i}",
            "complaint": " ".join(rng.choice(["slow", "late", "rude", "broken", "refund", "app",
                                              "crashed", "again", "never", "support"])
                                  for _ in range(12)) + f" #{i}",
            "city": f"city-{rng.randrange(1500)}",
            "plan": rng.choice(["basic", "plus", "pro"]),
            "signup_hour": str(rng.randrange(24)),
            "monthly_spend": "" if i % 17 == 0 else f"{amount:.2f}",
            "tenure_months": f"{rng.gauss(30, 8):.1f}",
            "churned": "yes" if amount < 12 or rng.random() < 0.1 else "no",
        })
    folder = tmp_path_factory.mktemp("churn")
    _write(folder / "customers.csv", rows)
    return str(folder)


def test_roles_follow_the_data_with_their_reasons(churn, tmp_path):
    code = bootstrap.main(["--name", "churn", "--data-dir", churn, "--label", "churned",
                           "--task", "binary", "--schemas-dir", str(tmp_path)])
    assert code == 0
    with open(tmp_path / "churn" / datasets.SPEC_FILE, "rb") as f:
        spec = tomllib.load(f)
    features = spec["features"]
    assert features["customer_id"]["role"] == "ignore"
    assert features["customer_id"]["why"].startswith("id-like: 600 distinct values")
    assert features["complaint"]["role"] == "ignore"
    assert features["complaint"]["why"].startswith("free text")
    assert features["city"]["role"] == "hashed" and features["city"]["buckets"] >= 256
    assert features["plan"]["role"] == "vocabulary"
    assert features["signup_hour"] == {"role": "integer", "range": [0, 23],
                                       "why": "24 distinct integers in [0, 23]"}
    assert features["monthly_spend"]["role"] == "log_zscore"
    assert features["tenure_months"]["role"] == "zscore"
    assert spec["label"] == {"column": "churned", "task": "binary", "classes": ["no", "yes"],
                             "missing": "stop"}
    majority = spec["evaluation"]["thresholds"]["accuracy"]["min"]
    assert 0.5 < majority < 1 and spec["evaluation"]["slices"] == ["plan"]
    # What it wrote is what the pipeline reads.
    loaded, schema = datasets.load_spec(str(tmp_path / "churn"))
    assert loaded.task == "binary" and loaded.classes == ("no", "yes")
    spend = next(f for f in schema.feature if f.name == "monthly_spend")
    assert spend.value_count.min == 0 and not spend.HasField("shape")  # gaps allowed
    label = next(f for f in schema.feature if f.name == "churned")
    assert list(label.not_in_environment) == ["SERVING"]


@pytest.mark.parametrize("label, task, message", [
    ("plan", "binary", "LABEL='plan' has 3 distinct values (basic, plus, pro): a binary label "
                       "has exactly two; use TASK=multiclass"),
    ("plan", "regression", "LABEL='plan' holds text (BYTES); a regression label is a number"),
    ("tenure_months", "multiclass", "LABEL='tenure_months' holds fractional numbers; use "
                                    "TASK=regression"),
    ("nope", "binary", "LABEL='nope' is not a column of the CSV files"),
    ("plan", "ranking", "TASK='ranking': expected one of binary, multiclass, regression"),
])
def test_a_label_that_cannot_be_is_refused(churn, tmp_path, capsys, label, task, message):
    code = bootstrap.main(["--name", "churn", "--data-dir", churn, "--label", label,
                           "--task", task, "--schemas-dir", str(tmp_path)])
    assert code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "churn" / datasets.SPEC_FILE).exists()
