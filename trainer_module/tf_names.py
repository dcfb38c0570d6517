"""TensorFlow-safe names for a dataset's column names: one mapping, used wherever TensorFlow or
Keras needs a name of its own form.

Keras layer and scope names must match `[A-Za-z0-9.][A-Za-z0-9_.\\/>-]*`, and a SavedModel
signature's inputs are named after their TensorSpecs and called as keyword arguments. A graph
tells op names apart without regard to case (`Age` and `age` become `age` and `age_1`, and the
signature then refuses to save), so names must differ in more than case. A column name that is
already a plain lowercase identifier stays as it is (the shipped datasets' models are
unchanged); any other (capitals, other characters, a Python keyword: signature inputs are
keyword arguments) has every other character replaced and a short hash of the original
appended, so that two distinct column names never map to names that differ only in case.
Everything a person reads (the spec, the report, the serving contract, predictions) keeps the
column's own name.
"""

import hashlib
import keyword
import re
from collections.abc import Iterable

_PLAIN = re.compile(r"^[a-z][a-z0-9_]*$")
_OTHER = re.compile(r"[^A-Za-z0-9_]+")


def tf_name(name: str) -> str:
    """The TensorFlow-safe form of a column (or column-derived) name."""
    # A Python keyword (`class`) cannot name a keyword argument of a signature.
    if _PLAIN.match(name) and not keyword.iskeyword(name):
        return name
    base = _OTHER.sub("_", name).strip("_") or "column"
    if not base[0].isalpha():
        base = "c_" + base
    return f"{base}_{hashlib.sha256(name.encode()).hexdigest()[:6]}"


def loadable_as_keywords(names: Iterable[str]) -> bool:
    """Whether TensorFlow can load back a saved function that takes each of `names` as a
    keyword argument.

    TensorFlow's loader rebuilds such a parameter from the name by its own rule
    (`sanitize_arg_name`, asked here, so the answer follows the installed TensorFlow): a Python
    keyword (`class`), or two names that come out alike, cannot be parameters, and the
    SavedModel does not load.
    """
    from tensorflow.core.function.polymorphism.function_type import sanitize_arg_name

    rebuilt = [sanitize_arg_name(name) for name in names]
    # Placeholders of one graph are told apart without regard to case.
    return (len({r.lower() for r in rebuilt}) == len(rebuilt)
            and not any(map(keyword.iskeyword, rebuilt)))


def clashing(names: Iterable[str]) -> tuple[str, str] | None:
    """Two of `names` whose TensorFlow-safe forms a graph cannot tell apart (the same but for
    case), or None: what `make dataset` and the spec check refuse before anything trains."""
    seen: dict[str, str] = {}
    for name in names:
        key = tf_name(name).lower()
        if key in seen:
            return seen[key], name
        seen[key] = name
    return None
