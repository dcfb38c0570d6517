"""Column names TensorFlow cannot take become names it can, one mapping for every place
(trainer_module/tf_names.py); names it can take stay as they are."""

import keyword
import re

import pytest

from trainer_module.tf_names import clashing, loadable_as_keywords, tf_name

# What Keras accepts as a layer (root scope) name, and what a keyword argument can be.
SCOPE = re.compile(r"^[A-Za-z0-9.][A-Za-z0-9_.\\/>-]*$")


@pytest.mark.parametrize("name", ["fare", "trip_start_hour", "company_xf", "x2"])
def test_plain_lowercase_names_are_kept(name):
    assert tf_name(name) == name


def test_names_that_differ_only_in_case_stay_apart_in_a_saved_signature(tmp_path):
    """A graph uniquifies op names without regard to case, so `Age` and `age` as two signature
    inputs would refuse to save; their TensorFlow-safe names differ in more than case."""
    import tensorflow as tf

    names = ["Age", "age", "AGE", "Species"]
    safe = [tf_name(n) for n in names]
    assert len({s.lower() for s in safe}) == len(names) and clashing(names) is None
    assert not loadable_as_keywords(["Age", "age"])  # as raw keyword arguments they collide
    specs = {s: tf.TensorSpec([None], tf.float32, name=s) for s in safe}
    module = tf.Module()
    module.f = tf.function(lambda columns: {"sum": tf.add_n(list(columns.values()))},
                           input_signature=[specs])
    tf.saved_model.save(module, str(tmp_path / "m"), signatures={"serving": module.f})
    loaded = tf.saved_model.load(str(tmp_path / "m")).signatures["serving"]
    out = loaded(**{s: tf.constant([float(i)]) for i, s in enumerate(safe)})
    assert out["sum"].numpy().tolist() == [6.0]


def test_a_mapping_that_cannot_keep_two_columns_apart_is_named(monkeypatch):
    from trainer_module import tf_names

    monkeypatch.setattr(tf_names, "tf_name", str.lower)  # a mapping that would merge them
    assert tf_names.clashing(["fare", "Age", "x", "age"]) == ("Age", "age")


NAMES = ["Payment Method", "Monthly Charges ($)", "Rate %", "km/h", "x.y", "Größe", "3rd-party",
         "Payment_Method", "Payment-Method", "_private", "%", "Île / Island_xf", "class", "if"]


def test_every_other_name_becomes_a_scope_name_and_an_identifier_of_its_own():
    mapped = [tf_name(n) for n in NAMES]
    for name, safe in zip(NAMES, mapped, strict=True):
        assert SCOPE.match(safe) and safe.isidentifier() and safe.isascii(), (name, safe)
        assert not keyword.iskeyword(safe), (name, safe)  # a signature's keyword argument
    assert len(set(mapped)) == len(NAMES)  # no two columns share a name
    assert tf_name("Payment Method") == tf_name("Payment Method")  # stable across processes


def test_names_a_saved_function_cannot_take_as_keywords_are_told_apart():
    """TensorFlow's loader rebuilds a keyword parameter from a name by its `sanitize_arg_name`
    (other characters as '_', 'arg_' before a leading non-letter); a keyword, or two names
    that come out alike, cannot be parameters (the bird e2e serves a column named `class`)."""
    assert loadable_as_keywords(["fare", "Payment Method", "3rd-party", "Größe", "x.y"])
    assert not loadable_as_keywords(["fare", "class"])
    assert not loadable_as_keywords(["a", "if"])
    assert not loadable_as_keywords(["Payment Method", "Payment_Method"])
    assert not loadable_as_keywords(["1st", "arg_1st"])
