"""CsvExampleGen's executor, with TFX's examples and split, and each row encoded once.

TFX's CSV executor builds every row as Python proto objects (two messages per cell, copied
twice into the example's map), then serializes it twice: deterministically, as the key of
the hash split, and again to write it. This executor reads and parses as TFX's does (its own
steps), infers the same column types while inferring each distinct value once, and encodes
each row straight to the bytes of that deterministic serialization (features in protobuf's
order of their names), which ExampleGen both hashes for the split and writes: the same
examples in the same splits as TFX's executor.
"""

import json
import os
import struct
from collections.abc import Iterable
from typing import Any

import apache_beam as beam
from tensorflow.core.example import feature_pb2
from tfx import types
from tfx.components import CsvExampleGen as TfxCsvExampleGen
from tfx.components.example_gen import utils
from tfx.components.example_gen.csv_example_gen import executor as tfx_csv
from tfx.dsl.components.base import base_beam_component, executor_spec
from tfx.dsl.io import fileio
from tfx.proto import example_gen_pb2
from tfx.types import standard_artifacts, standard_component_specs
from tfx.utils import proto_utils
from tfx_bsl.coders import csv_decoder

from pipeline.cache_keys import keyed_spec
from pipeline.csv_check import header_of
from trainer_module.missing import folded, is_missing_bytes

_UINT64 = 1 << 64
_FLOAT32 = struct.Struct("<f")
# tf.train.Feature's fields: bytes_list = 1, float_list = 2, int64_list = 3 (length-delimited).
_FEATURE_TAG = {csv_decoder.ColumnType.STRING: b"\x0a", csv_decoder.ColumnType.FLOAT: b"\x12",
                csv_decoder.ColumnType.INT: b"\x1a"}
_FIELD_1 = b"\x0a"  # the first field, length-delimited: Example.features, Features.feature
# entries, a map entry's key, and the value lists' `value`
_FIELD_2 = b"\x12"  # a map entry's value
_N = frozenset(b"nN")
# The CSV dialect's parameters: the field delimiter, and the spec's own missing markers (a
# JSON list) besides trainer_module/missing.py's.
DELIMITER_KEY = "delimiter"
MISSING_VALUES_KEY = "missing_values"


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _delimited(tag: bytes, payload: bytes) -> bytes:
    return tag + _varint(len(payload)) + payload


def _float32(cell: bytes) -> bytes:
    value = float(cell)
    try:
        return _FLOAT32.pack(value)
    except OverflowError:  # beyond float32's range: protobuf stores it as ±inf
        return _FLOAT32.pack(float("inf") if value > 0 else float("-inf"))


def _int64(cell: bytes) -> bytes:
    value = int(cell)
    if not -(1 << 63) <= value < 1 << 63:
        raise ValueError(f"Value out of range: {cell!r} is not an int64")
    return _varint(value % _UINT64)


def _read_varint(data: bytes, position: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[position]
        value |= (byte & 0x7F) << shift
        position += 1
        if byte < 0x80:
            return value, position
        shift += 7


def _serialized_order(names: list[str]) -> list[str]:
    """The order in which this process's protobuf writes these feature names in a
    deterministic serialization, read off one it writes: upb puts a name before any name it
    is the start of ('fs' before 'f'), plain sorting does the opposite."""
    features = feature_pb2.Features()
    for name in names:
        features.feature[name].SetInParent()
    data = features.SerializeToString(deterministic=True)
    order, position = [], 0
    while position < len(data):  # each entry: field 1 (the map) → its key, field 1 again
        length, start = _read_varint(data, position + 1)
        key_length, key_start = _read_varint(data, start + 1)
        order.append(data[key_start:key_start + key_length].decode())
        position = start + length
    return order


def _entry(key: bytes, feature: bytes) -> bytes:
    """One Features.feature map entry (key, then value), as a field of Features."""
    return _delimited(_FIELD_1, key + _delimited(_FIELD_2, feature))


class _Column:
    """Encodes one column's cells as map entries: the bytes around a cell's value depend
    only on the column and the value's length, so they are built once per length."""

    def __init__(self, info: csv_decoder.ColumnInfo, missing: frozenset[str]):
        self.missing = missing
        # Markers that float() reads as numbers ("NaN", "inf") are caught before it; the
        # defaults among them start with n or N.
        self.first = _N | {m.encode()[0] for m in missing if m}
        self.key = _delimited(_FIELD_1, info.name.encode())
        self.tag = _FEATURE_TAG.get(info.type)
        self.value = {csv_decoder.ColumnType.INT: _int64,
                      csv_decoder.ColumnType.FLOAT: _float32}.get(info.type, bytes)
        self.numeric = self.value is not bytes
        # No value anywhere in the column: TFX writes an empty feature; an empty cell is
        # the column type's empty list.
        self.empty = _entry(self.key, b"" if self.tag is None else self.tag + b"\x00")
        self._prefixes: dict[int, bytes] = {}

    def encode(self, cell: bytes) -> bytes:
        if not cell or self.tag is None:
            return self.empty
        # A missing marker (trainer_module/missing.py) is a gap in a number column: the words
        # start with n or N (float() would read "NaN" as a value), spaces fail the conversion.
        if self.numeric and cell[0] in self.first and is_missing_bytes(cell, self.missing):
            return self.empty
        try:
            value = self.value(cell)
        except ValueError:
            if self.numeric and is_missing_bytes(cell, self.missing):
                return self.empty
            raise
        prefix = self._prefixes.get(len(value))
        if prefix is None:  # everything of the entry before the value's bytes
            entry = _entry(self.key, _delimited(self.tag, _delimited(_FIELD_1, value)))
            prefix = self._prefixes[len(value)] = entry[:len(entry) - len(value)]
        return prefix + value


class _EncodeRows(beam.DoFn):
    """Parsed CSV rows → serialized tf.Example, as TFX's `_ParsedCsvToTfExample` builds them,
    in deterministic serialization (map entries in protobuf's order of their keys)."""

    def __init__(self, missing: frozenset[str]) -> None:
        self._missing = missing
        self._columns: list[tuple[int, _Column]] | None = None

    def process(self, cells: list[bytes], column_infos: list[csv_decoder.ColumnInfo]
                ) -> Iterable[bytes]:
        if self._columns is None:
            index = {info.name: i for i, info in enumerate(column_infos)}
            self._columns = [(index[name], _Column(column_infos[index[name]], self._missing))
                             for name in _serialized_order(list(index))]
        if not cells:  # a blank line, as TFX skips it
            return
        if len(cells) != len(self._columns):
            raise ValueError(f"Invalid CSV line: {cells}")
        yield _delimited(_FIELD_1, b"".join([column.encode(cells[i])
                                             for i, column in self._columns]))


class _ColumnTypeInferrer(csv_decoder.ColumnTypeInferrer):
    """tfx_bsl's column type inference (each column: the highest of its cells' types, INT <
    FLOAT < STRING), inferring each distinct cell value once per worker and skipping columns
    already at STRING: values repeat across rows, and inference tries int() then float() on
    each, which was the largest cost left in this step."""

    MEMO_LIMIT = 1 << 16  # distinct values remembered per worker

    def __init__(self, column_names: list[str], missing: frozenset[str]):
        super().__init__(column_names, skip_blank_lines=True)
        self._missing = missing
        self._memo: dict[bytes, csv_decoder.ColumnType] = {}

    def add_input(self, accumulator: dict, cells: list[bytes]) -> dict:
        if cells and len(cells) != len(self._column_names):
            raise ValueError("Columns do not match specified csv headers: "
                             f"{self._column_names} -> {cells}")
        memo = self._memo
        for name, cell in zip(self._column_names, cells, strict=False):
            previous = accumulator.get(name)
            if previous == csv_decoder.ColumnType.STRING:
                continue
            current = memo.get(cell)
            if current is None:
                # A missing marker (trainer_module/missing.py) types nothing, as an empty cell.
                current = (csv_decoder.ColumnType.UNKNOWN
                           if is_missing_bytes(cell, self._missing)
                           else csv_decoder._InferValueType(cell))
                if len(memo) < self.MEMO_LIMIT:
                    memo[cell] = current
            if previous is None or current > previous:
                accumulator[name] = current
        return accumulator


class ReadCsvRecords(beam.DoFn):
    """TFX's `_ReadCsvRecordsFromTextFile`: the header skipped, one record per row, a row
    spanning lines where a quoted value holds a line break. It reads line by line, since the
    file object Beam opens for a .gz file (decompressing it) cannot be iterated."""

    def process(self, csv_file: str) -> Iterable[str]:
        with beam.io.filesystems.FileSystems.open(csv_file) as f:
            f.readline()
            record = tfx_csv._CsvLineBuffer()
            for line in iter(f.readline, b""):
                record.write(line.decode("utf-8"))
                if record.is_complete_line():
                    yield record.read()
            if not record.is_empty():
                raise ValueError(f"Csv record had unbalanced quotes. File: {csv_file}")


def _column_names(csv_file: str, delimiter: str) -> list[str]:
    """The header as the checks before the run read it (TFX splits the line on commas, which
    keeps the quotes of a quoted name and a byte-order mark), the file opened as the record
    reader opens it (a .gz file decompressed)."""
    with beam.io.filesystems.FileSystems.open(csv_file) as f:
        return header_of(f.readline().decode("utf-8"), delimiter)


def dialect(exec_properties: dict[str, Any]) -> tuple[str, frozenset[str]]:
    """(delimiter, folded extra missing markers) of the step's parameters."""
    return (exec_properties.get(DELIMITER_KEY) or ",",
            folded(json.loads(exec_properties.get(MISSING_VALUES_KEY) or "[]")))


class _CsvToSerializedExample(beam.PTransform):
    """TFX's `_CsvToExample` (same files, header checks, line reading and CSV parsing), with
    `ReadCsvRecords`, `_ColumnTypeInferrer` and `_EncodeRows`."""

    def __init__(self, exec_properties: dict[str, Any], split_pattern: str):
        self._csv_pattern = os.path.join(
            exec_properties[standard_component_specs.INPUT_BASE_KEY], split_pattern)
        self._delimiter, self._missing = dialect(exec_properties)

    def expand(self, pipeline: beam.Pipeline) -> beam.PCollection:
        csv_files = fileio.glob(self._csv_pattern)
        if not csv_files:
            raise RuntimeError(f"Split pattern {self._csv_pattern} does not match any files.")
        column_names = _column_names(csv_files[0], self._delimiter)
        for csv_file in csv_files[1:]:
            if _column_names(csv_file, self._delimiter) != column_names:
                raise RuntimeError(
                    f"Files in same split {self._csv_pattern} have different header.")
        parsed = (pipeline
                  | "CreateFilenames" >> beam.Create(csv_files)
                  | "ReadFromText" >> beam.ParDo(ReadCsvRecords())
                  | "ParseCSVLine" >> beam.ParDo(
                      csv_decoder.ParseCSVLine(delimiter=self._delimiter))
                  | "ExtractParsedCSVLines" >> beam.Keys())
        column_infos = beam.pvalue.AsSingleton(
            parsed | "InferColumnTypes" >> beam.CombineGlobally(
                _ColumnTypeInferrer(column_names, self._missing)))
        return parsed | "ToSerializedExample" >> beam.ParDo(_EncodeRows(self._missing),
                                                            column_infos)


@beam.ptransform_fn
def _csv_to_examples(pipeline: beam.Pipeline, exec_properties: dict[str, Any],
                     split_pattern: str) -> beam.PCollection:
    output_config = example_gen_pb2.Output()
    proto_utils.json_to_proto(exec_properties[standard_component_specs.OUTPUT_CONFIG_KEY],
                              output_config)
    if output_config.split_config.HasField("partition_feature_name"):
        # Splitting by a feature's value reads the example's fields: TFX's own protos.
        return pipeline | tfx_csv._CsvToExample(exec_properties, split_pattern)
    return pipeline | _CsvToSerializedExample(exec_properties, split_pattern)


class Executor(tfx_csv.Executor):
    """TFX's CsvExampleGen executor, its rows encoded by `_EncodeRows`."""

    def GetInputSourceToExamplePTransform(self) -> beam.PTransform:  # noqa: N802 (TFX API)
        return _csv_to_examples


def _dialect_spec(base: type) -> type:
    from tfx.types.component_spec import ExecutionParameter

    parameters = {**base.PARAMETERS, DELIMITER_KEY: ExecutionParameter(type=str, optional=True),
                  MISSING_VALUES_KEY: ExecutionParameter(type=str, optional=True)}
    return type(base.__name__, (base,), {"PARAMETERS": parameters})


CsvExampleGenSpec = keyed_spec(_dialect_spec(standard_component_specs.FileBasedExampleGenSpec))


class CsvExampleGen(TfxCsvExampleGen):
    """TFX's CsvExampleGen running `Executor` (node id still "CsvExampleGen"), writing
    gzipped TFRecords of tf.Example."""

    SPEC_CLASS = CsvExampleGenSpec
    EXECUTOR_SPEC = executor_spec.BeamExecutorSpec(Executor)

    def __init__(self, *, input_base: str, input_config: example_gen_pb2.Input,
                 output_config: example_gen_pb2.Output | None = None, delimiter: str = ",",
                 missing_values: tuple[str, ...] = ()) -> None:
        spec = CsvExampleGenSpec(
            input_base=input_base, input_config=input_config,
            delimiter=delimiter, missing_values=json.dumps(list(missing_values)),
            output_config=output_config or utils.make_default_output_config(input_config),
            custom_config=None, range_config=None,
            output_data_format=example_gen_pb2.FORMAT_TF_EXAMPLE,
            output_file_format=example_gen_pb2.FORMAT_TFRECORDS_GZIP,
            examples=types.Channel(type=standard_artifacts.Examples))
        base_beam_component.BaseBeamComponent.__init__(self, spec=spec)
