"""The local runner's memoized Beam signatures: the same answers as Beam's own, computed once."""

import functools
import inspect

import apache_beam as beam
from apache_beam.testing.util import assert_that, equal_to
from apache_beam.transforms import core, userstate
from apache_beam.typehints import decorators

from pipeline import beam_signatures

BEAMS_OWN = inspect.unwrap(decorators.get_signature)


class _Counting:
    """Beam's get_signature, counting the calls that reach it."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, func):
        self.calls += 1
        return BEAMS_OWN(func)


class _Stateful(beam.DoFn):
    BUFFER = userstate.BagStateSpec("buffer", beam.coders.VarIntCoder())

    def process(self, element, buffer=beam.DoFn.StateParam(BUFFER)):  # noqa: B008 (Beam idiom)
        yield element


class _Plain(beam.DoFn):
    def process(self, element, scale=2):
        yield element * scale


def _free(a, b=1, *rest, key=None):
    return a


CALLABLES = [_free, _Plain().process, _Plain.process, functools.partial(_free, 3), len, str.strip,
             _Plain, lambda x, y=2: x]


def test_memoized_signatures_equal_beams_own_for_every_kind_of_callable():
    cached = beam_signatures.memoized(BEAMS_OWN)
    for func in CALLABLES:
        expected = BEAMS_OWN(func)
        assert cached(func) == expected, func
        assert cached(func) == expected, func  # from the cache the second time


def test_a_bound_method_is_computed_once_per_function_not_per_bound_object():
    counting = _Counting()
    cached = beam_signatures.memoized(counting)
    first, second = _Plain(), _Plain()
    signature = cached(first.process)
    assert cached(second.process) is signature
    assert cached(first.process) is signature
    assert list(signature.parameters) == ["element", "scale"]  # bound: no self
    unbound = cached(_Plain.process)
    assert list(unbound.parameters) == ["self", "element", "scale"]
    assert counting.calls == 2
    # A method descriptor cannot be weakly referenced: computed each time, never cached.
    cached(str.strip)
    cached(str.strip)
    assert counting.calls == 4


def test_installed_it_still_tells_stateful_dofns_from_plain_ones():
    beam_signatures.install()
    beam_signatures.install()  # once only: the second call keeps the first wrapper
    assert core.get_signature is decorators.get_signature
    assert inspect.unwrap(decorators.get_signature) is not decorators.get_signature
    assert userstate.is_stateful_dofn(_Stateful())
    assert not userstate.is_stateful_dofn(_Plain())
    state_specs, _ = userstate.get_dofn_specs(_Stateful())
    assert [s.name for s in state_specs] == ["buffer"]
    with beam.Pipeline() as pipeline:
        out = (pipeline | beam.Create([("a", 1), ("a", 2), ("b", 3)]) | beam.ParDo(_Stateful())
               | beam.Map(lambda kv: kv[1]) | beam.ParDo(_Plain()))
        assert_that(out, equal_to([2, 4, 6]))
