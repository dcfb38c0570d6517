"""Beam's function signatures, computed once per function in a local run.

Beam inspects the signature of every method of every DoFn each time it asks whether the DoFn
keeps state (`userstate.get_dofn_specs`): when a transform is applied, when the pipeline is
translated to its runner proto (several times), and again for each DoFn that a bundle
processor unpickles. A local run of the taxi DAG spends about 3 s of its Beam components in
`inspect.signature` that way, on the same few hundred functions. A function's signature does
not change, so it is computed once per function and kept while the function lives.

Only the local runner's process installs this (`install`); Beam workers in other processes
(DirectRunner's multi_processing mode, Dataflow) run Beam unchanged.
"""

import importlib
import inspect
import threading
import types
import weakref
from collections.abc import Callable
from typing import Any

# The modules that imported Beam's get_signature by name (each holds its own reference).
_BEAM_MODULES = ("apache_beam.typehints.decorators", "apache_beam.transforms.core",
                 "apache_beam.transforms.ptransform", "apache_beam.transforms.util")

_install_lock = threading.Lock()
_installed: Callable[[Any], inspect.Signature] | None = None


def memoized(get_signature: Callable[[Any], inspect.Signature]
             ) -> Callable[[Any], inspect.Signature]:
    """`get_signature` remembered per function.

    A bound method is keyed by its function (the object it is bound to does not change its
    signature, and a new bound method object is made at every attribute access). Callables
    that cannot be weakly referenced or hashed (method descriptors such as str.strip, some
    callable objects) are computed every time, as before.
    """
    cache: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def cached(func: Any) -> inspect.Signature:
        bound = isinstance(func, types.MethodType)
        key = func.__func__ if bound else func
        try:
            per_key = cache.get(key)
        except TypeError:  # unhashable, or no weak reference to it
            return get_signature(func)
        if per_key is not None and bound in per_key:
            return per_key[bound]
        signature = get_signature(func)
        cache.setdefault(key, {})[bound] = signature  # `key` is weakly referable: get took it
        return signature

    cached.__wrapped__ = get_signature  # type: ignore[attr-defined]
    return cached


def install() -> None:
    """Replaces Beam's get_signature with the memoized one in this process (once)."""
    global _installed
    decorators = importlib.import_module(_BEAM_MODULES[0])
    with _install_lock:
        if _installed is not None:
            return
        _installed = memoized(decorators.get_signature)
    for name in _BEAM_MODULES:
        module = importlib.import_module(name)
        if hasattr(module, "get_signature"):
            module.get_signature = _installed
