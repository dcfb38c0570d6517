"""CsvExampleGen's executor, with TFX's examples and split, and each row encoded once.

TFX's CSV executor builds every row as Python proto objects (two messages per cell, copied
twice into the example's map), then serializes it twice: deterministically, as the key of
the hash split, and again to write it. This executor reads and parses as TFX's does (its own
steps), infers the same column types while inferring each distinct value once, and encodes
each row straight to the bytes of that deterministic serialization (features in protobuf's
order of their names), which ExampleGen both hashes for the split and writes: the same
examples in the same splits as TFX's executor. On a local runner each split is shuffled
through scratch files (`WriteShuffled`) instead of a Beam reshuffle held in memory.
"""

import hashlib
import json
import os
import struct
import uuid
from collections.abc import Iterable
from typing import Any

import apache_beam as beam
from absl import logging
from apache_beam.options.pipeline_options import DirectOptions
from apache_beam.runners.direct.direct_runner import BundleBasedDirectRunner, SwitchingDirectRunner
from apache_beam.runners.portability.fn_api_runner import FnApiRunner
from apache_beam.transforms.window import GlobalWindow
from apache_beam.utils.timestamp import MIN_TIMESTAMP
from apache_beam.utils.windowed_value import WindowedValue
from tensorflow.core.example import feature_pb2
from tfx import types
from tfx.components import CsvExampleGen as TfxCsvExampleGen
from tfx.components.example_gen import utils, write_split
from tfx.components.example_gen.csv_example_gen import executor as tfx_csv
from tfx.dsl.components.base import base_beam_component, executor_spec
from tfx.dsl.io import fileio
from tfx.proto import example_gen_pb2, range_config_pb2
from tfx.types import artifact_utils, standard_artifacts, standard_component_specs
from tfx.utils import proto_utils
from tfx_bsl.coders import csv_decoder

from pipeline.cache_keys import keyed_spec
from pipeline.csv_check import header_of, nameless
from trainer_module import numbers
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
# The number columns written with a cell format: a JSON object, column → format
# (trainer_module/numbers.py); unset when none is.
NUMBER_FORMATS_KEY = "number_formats"


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
    numbers.check_finite(cell.decode("utf-8", "replace"), value)  # "inf" is no number
    return _FLOAT32.pack(value)


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

    def __init__(self, info: csv_decoder.ColumnInfo, missing: frozenset[str],
                 fmt: numbers.NumberFormat | None = None):
        self.missing = missing
        # Markers that float() reads as numbers ("NaN", "inf") are caught before it; the
        # defaults among them start with n or N.
        self.first = _N | {m.encode()[0] for m in missing if m}
        self.key = _delimited(_FIELD_1, info.name.encode())
        self.tag = _FEATURE_TAG.get(info.type)
        self.value = {csv_decoder.ColumnType.INT: _int64,
                      csv_decoder.ColumnType.FLOAT: _float32}.get(info.type, bytes)
        if fmt is not None and info.type == csv_decoder.ColumnType.FLOAT:
            self.value = lambda cell: _FLOAT32.pack(numbers.parse(cell.decode("utf-8"), fmt))
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

    def __init__(self, missing: frozenset[str],
                 formats: dict[str, numbers.NumberFormat] | None = None) -> None:
        self._missing = missing
        self._formats = formats or {}
        self._columns: list[tuple[int, _Column]] | None = None
        self._unnamed: list[int] = []
        self._width = 0

    def process(self, cells: list[bytes], column_infos: list[csv_decoder.ColumnInfo]
                ) -> Iterable[bytes]:
        if self._columns is None:
            # A column with no name (a spreadsheet's trailing empty columns) is no feature.
            self._unnamed = nameless([info.name for info in column_infos])
            index = {info.name: i for i, info in enumerate(column_infos)
                     if i not in self._unnamed}
            self._columns = [(index[name], _Column(column_infos[index[name]], self._missing,
                                                   self._formats.get(name)))
                             for name in _serialized_order(list(index))]
            self._width = len(column_infos)
        if not cells:  # a blank line, as TFX skips it
            return
        if len(cells) != self._width:
            raise ValueError(f"Invalid CSV line: {cells}")
        held = next((i for i in self._unnamed if cells[i].strip()), None)
        if held is not None:
            raise ValueError(f"column {held + 1} of the header has no name but holds "
                             f"{cells[held]!r}: give the column a name")
        yield _delimited(_FIELD_1, b"".join([column.encode(cells[i])
                                             for i, column in self._columns]))


class _ColumnTypeInferrer(csv_decoder.ColumnTypeInferrer):
    """tfx_bsl's column type inference (each column: the highest of its cells' types, INT <
    FLOAT < STRING), inferring each distinct cell value once per worker and skipping columns
    already at STRING: values repeat across rows, and inference tries int() then float() on
    each, which was the largest cost left in this step."""

    MEMO_LIMIT = 1 << 16  # distinct values remembered per worker

    def __init__(self, column_names: list[str], missing: frozenset[str],
                 formatted: frozenset[str] = frozenset()):
        super().__init__(column_names, skip_blank_lines=True)
        self._missing = missing
        self._formatted = formatted  # columns of formatted numbers: FLOAT, parsed when encoded
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
            if name in self._formatted:  # its cells' own types say nothing
                current = (csv_decoder.ColumnType.UNKNOWN if is_missing_bytes(cell, self._missing)
                           else csv_decoder.ColumnType.FLOAT)
                if previous is None or current > previous:
                    accumulator[name] = current
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


def number_formats(exec_properties: dict[str, Any]) -> dict[str, numbers.NumberFormat]:
    """The formatted number columns of the step's parameters, column → format."""
    return {column: numbers.parse_format(fmt) for column, fmt in
            json.loads(exec_properties.get(NUMBER_FORMATS_KEY) or "{}").items()}


class _CsvToSerializedExample(beam.PTransform):
    """TFX's `_CsvToExample` (same files, header checks, line reading and CSV parsing), with
    `ReadCsvRecords`, `_ColumnTypeInferrer` and `_EncodeRows`."""

    def __init__(self, exec_properties: dict[str, Any], split_pattern: str):
        self._csv_pattern = os.path.join(
            exec_properties[standard_component_specs.INPUT_BASE_KEY], split_pattern)
        self._delimiter, self._missing = dialect(exec_properties)
        self._formats = number_formats(exec_properties)

    def expand(self, pipeline: beam.Pipeline) -> beam.PCollection:
        csv_files = fileio.glob(self._csv_pattern)
        if not csv_files:
            raise RuntimeError(f"Split pattern {self._csv_pattern} does not match any files.")
        column_names = _column_names(csv_files[0], self._delimiter)
        for csv_file in csv_files[1:]:
            if _column_names(csv_file, self._delimiter) != column_names:
                raise RuntimeError(
                    f"Files in same split {self._csv_pattern} have different header.")
        column_infos = beam.pvalue.AsSingleton(
            self._parsed(pipeline, csv_files, "")
            | "InferColumnTypes" >> beam.CombineGlobally(
                _ColumnTypeInferrer(column_names, self._missing, frozenset(self._formats))))
        return (self._parsed(pipeline, csv_files, "ForEncoding")
                | "ToSerializedExample" >> beam.ParDo(_EncodeRows(self._missing, self._formats),
                                                      column_infos))

    def _parsed(self, pipeline: beam.Pipeline, csv_files: list[str], label: str
                ) -> beam.PCollection:
        """The files' parsed rows, read anew for each use. Beam holds a collection whole in
        memory when two steps consume it and one of them waits for the other's side input;
        reading the files a second time costs time, but keeps memory flat as the data grows."""
        return (pipeline
                | f"CreateFilenames{label}" >> beam.Create(csv_files)
                | f"ReadFromText{label}" >> beam.ParDo(ReadCsvRecords())
                | f"ParseCSVLine{label}" >> beam.ParDo(
                    csv_decoder.ParseCSVLine(delimiter=self._delimiter))
                | f"ExtractParsedCSVLines{label}" >> beam.Keys())


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


# Input bytes per output file of a split: the shuffle holds one file's examples in memory.
SHARD_INPUT_BYTES = 64 << 20
MAX_SHARDS = 1024
# The examples artifact's own scratch directory for the shuffle, removed once the splits are
# written (downstream steps read only the split directories).
SCRATCH_DIR = ".shuffle"
_LENGTH = struct.Struct("<I")


def shard_count(patterns: list[str], workers: int) -> int:
    """Output files per split for the input files: one per SHARD_INPUT_BYTES of input (a .gz
    file counts its compressed bytes, so its examples go to fewer, larger files), rounded up
    to a multiple of the Beam workers. A gzipped file is read whole by one worker, so three
    files on two workers leave one of them two: later steps took a third longer."""
    size = sum(metadata.size_in_bytes
               for matched in beam.io.filesystems.FileSystems.match(patterns)
               for metadata in matched.metadata_list)
    shards = max(1, min(MAX_SHARDS, -(-size // SHARD_INPUT_BYTES)))
    return -(-shards // workers) * workers


def _record_key(record: bytes, occurrence: int = 0) -> int:
    """A pseudo-random number fixed by the record's bytes and which of its copies it is."""
    return int.from_bytes(hashlib.blake2b(
        record, digest_size=8, salt=occurrence.to_bytes(16, "little")).digest(), "little")


class _Scatter(beam.DoFn):
    """Appends each record to one of `shards` scratch files of its bundle, picked by a hash of
    its bytes (so every copy of a row lands in one shard); when the bundle ends, yields
    (shard, file) for each file it wrote."""

    def __init__(self, scratch: str, shards: int) -> None:
        self._scratch, self._shards = scratch, shards

    def start_bundle(self) -> None:
        self._files: dict[int, tuple[str, Any]] = {}
        self._bundle = uuid.uuid4().hex

    def process(self, record: bytes) -> None:
        shard = _record_key(record) % self._shards
        opened = self._files.get(shard)
        if opened is None:
            path = os.path.join(self._scratch, f"{self._bundle}-{shard:05d}")
            opened = self._files[shard] = (path, beam.io.filesystems.FileSystems.create(path))
        opened[1].write(_LENGTH.pack(len(record)) + record)

    def finish_bundle(self) -> Iterable[WindowedValue]:
        for shard, (path, f) in self._files.items():
            f.close()
            yield WindowedValue((shard, path), MIN_TIMESTAMP, [GlobalWindow()])


def _scattered_records(path: str) -> list[bytes]:
    with beam.io.filesystems.FileSystems.open(path) as f:
        data = f.read()
    records, position = [], 0
    while position < len(data):
        (length,) = _LENGTH.unpack_from(data, position)
        position += _LENGTH.size
        records.append(data[position:position + length])
        position += length
    return records


class _Gather(beam.DoFn):
    """Reads every scratch file of one shard, orders their records by `_record_key` and writes
    them as the split's file of that shard (gzipped TFRecords, named as Beam's TFRecord sink
    names them).

    The k-th copy of a row is keyed by its bytes and k, so the copies of a repeated row spread
    over the file as distinct rows do; which copy is which cannot change the bytes written.
    The order is thus a function of the rows alone, whatever bundles Beam made of them."""

    def __init__(self, output_prefix: str, shards: int) -> None:
        self._output_prefix, self._shards = output_prefix, shards

    def process(self, shard: int, scattered: list[tuple[int, str]]) -> None:
        import tensorflow as tf

        copies: dict[bytes, int] = {}
        keyed = []
        for owner, path in scattered:
            if owner != shard:
                continue
            for record in _scattered_records(path):
                occurrence = copies.get(record, 0)
                copies[record] = occurrence + 1
                keyed.append((_record_key(record, occurrence), record))
        keyed.sort()
        path = f"{self._output_prefix}-{shard:05d}-of-{self._shards:05d}.gz"
        tf.io.gfile.makedirs(os.path.dirname(path))
        with tf.io.TFRecordWriter(path, tf.io.TFRecordOptions(compression_type="GZIP")) as f:
            for _, record in keyed:
                f.write(record)


class WriteShuffled(beam.PTransform):
    """Writes serialized records to `shards` gzipped TFRecord files of a split directory, in
    an order that looks random and is fixed by the rows (each row's file and place in it
    follow a hash of its bytes), through scratch files rather than a Beam shuffle: at most
    one file's records are in memory at once. The same CSV thus gives the same files, record
    for record, on every run: the Trainer's validation slice, drawn by file and position,
    holds the same rows."""

    def __init__(self, split_dir: str, scratch: str, shards: int) -> None:
        super().__init__()
        self._split_dir, self._scratch, self._shards = split_dir, scratch, shards

    def expand(self, records: beam.PCollection) -> beam.PCollection:
        scattered = records | "Scatter" >> beam.ParDo(_Scatter(self._scratch, self._shards))
        return (records.pipeline
                | "Shards" >> beam.Create(range(self._shards))
                | "Gather" >> beam.ParDo(
                    _Gather(os.path.join(self._split_dir, write_split.DEFAULT_TF_RECORD_FILE_NAME),
                            self._shards),
                    beam.pvalue.AsList(scattered)))


def is_local(pipeline: beam.Pipeline) -> bool:
    """Whether the pipeline runs on Beam's local runner (in memory or multi-processing)."""
    return isinstance(pipeline.runner, (SwitchingDirectRunner, BundleBasedDirectRunner,
                                        FnApiRunner))


def resolve_span(exec_properties: dict[str, Any], examples: list[types.Artifact]) -> None:
    """Resolves the span of the input config's patterns where no driver did before the step.

    TFX resolves `{SPAN}` (or a date) before the executor runs, in the ExampleGen's driver: the
    local runner's, or on Vertex AI the task's `lifecycle.preCacheCheck` container
    (tfx/orchestration/kubeflow/v2/file_based_example_gen/driver.py). An orchestrator that
    runs no such hook (kfp.local) hands the executor the patterns as compiled. They are then
    resolved here by the same TFX input processor, newest span within the range config, and
    the span is recorded on the Examples as the driver records it.
    """
    from tfx.components.example_gen import driver, input_processor

    input_config = example_gen_pb2.Input()
    proto_utils.json_to_proto(exec_properties[standard_component_specs.INPUT_CONFIG_KEY],
                              input_config)
    if not any(spec in split.pattern for split in input_config.splits
               for spec in (utils.SPAN_SPEC, utils.YEAR_SPEC)):
        return
    range_config = None
    if exec_properties.get(standard_component_specs.RANGE_CONFIG_KEY):
        range_config = range_config_pb2.RangeConfig()
        proto_utils.json_to_proto(exec_properties[standard_component_specs.RANGE_CONFIG_KEY],
                                  range_config)
    processor = input_processor.FileBasedInputProcessor(
        exec_properties[standard_component_specs.INPUT_BASE_KEY], input_config.splits,
        range_config)
    span, version = processor.resolve_span_and_version()
    exec_properties[utils.SPAN_PROPERTY_NAME] = span
    exec_properties[utils.VERSION_PROPERTY_NAME] = version
    exec_properties[utils.FINGERPRINT_PROPERTY_NAME] = processor.get_input_fingerprint(
        span, version)
    for split in input_config.splits:
        split.pattern = processor.get_pattern_for_span_version(split.pattern, span, version)
    exec_properties[standard_component_specs.INPUT_CONFIG_KEY] = proto_utils.proto_to_json(
        input_config)
    for artifact in examples:
        driver.update_output_artifact(exec_properties, artifact.mlmd_artifact)
    logging.info("No ExampleGen driver ran before this step: span %d resolved here (%s)", span,
                 ", ".join(split.pattern for split in input_config.splits))


class Executor(tfx_csv.Executor):
    """TFX's CsvExampleGen executor, its rows encoded by `_EncodeRows`, each split written by
    `WriteShuffled` on a local runner."""

    def Do(self, input_dict: dict[str, list[types.Artifact]],  # noqa: N802 (TFX API)
           output_dict: dict[str, list[types.Artifact]], exec_properties: dict[str, Any]
           ) -> None:
        # GenerateExamplesByBeam, which writes the splits here, is not given the outputs.
        self._examples = output_dict[standard_component_specs.EXAMPLES_KEY]
        resolve_span(exec_properties, self._examples)
        scratch = os.path.join(self._examples[0].uri, SCRATCH_DIR)
        try:
            super().Do(input_dict, output_dict, exec_properties)
        finally:
            if fileio.exists(scratch):
                fileio.rmtree(scratch)

    def GenerateExamplesByBeam(self, pipeline: beam.Pipeline,  # noqa: N802 (TFX API)
                               exec_properties: dict[str, Any]) -> dict[str, Any]:
        """On a local runner, writes TFX's splits, each in random order as TFX writes them,
        and leaves none for TFX's `Do` to write: TFX shuffles with a Beam reshuffle, which the
        local runner holds whole in memory (6 GB for the 1.5M rows of 100× taxi). Other
        runners (Dataflow) shuffle on their own service: TFX's `Do` writes there."""
        splits = super().GenerateExamplesByBeam(pipeline, exec_properties)
        if not is_local(pipeline):
            return splits
        input_config = example_gen_pb2.Input()
        proto_utils.json_to_proto(exec_properties[standard_component_specs.INPUT_CONFIG_KEY],
                                  input_config)
        workers = pipeline.options.view_as(DirectOptions).direct_num_workers or os.cpu_count()
        shards = shard_count([
            os.path.join(exec_properties[standard_component_specs.INPUT_BASE_KEY], split.pattern)
            for split in input_config.splits], workers or 1)
        for name, examples in splits.items():
            _ = (examples
                 | f"MaybeSerialize[{name}]" >> beam.ParDo(write_split.MaybeSerialize())
                 | f"WriteSplit[{name}]" >> WriteShuffled(
                     artifact_utils.get_split_uri(self._examples, name),
                     os.path.join(self._examples[0].uri, SCRATCH_DIR, name), shards))
        return {}

    def GetInputSourceToExamplePTransform(self) -> beam.PTransform:  # noqa: N802 (TFX API)
        return _csv_to_examples


def _dialect_spec(base: type) -> type:
    from tfx.types.component_spec import ExecutionParameter

    parameters = {**base.PARAMETERS, DELIMITER_KEY: ExecutionParameter(type=str, optional=True),
                  MISSING_VALUES_KEY: ExecutionParameter(type=str, optional=True),
                  NUMBER_FORMATS_KEY: ExecutionParameter(type=str, optional=True)}
    return type(base.__name__, (base,), {"PARAMETERS": parameters})


CsvExampleGenSpec = keyed_spec(_dialect_spec(standard_component_specs.FileBasedExampleGenSpec))


class CsvExampleGen(TfxCsvExampleGen):
    """TFX's CsvExampleGen running `Executor` (node id still "CsvExampleGen"), writing
    gzipped TFRecords of tf.Example."""

    SPEC_CLASS = CsvExampleGenSpec
    EXECUTOR_SPEC = executor_spec.BeamExecutorSpec(Executor)

    def __init__(self, *, input_base: str, input_config: example_gen_pb2.Input,
                 output_config: example_gen_pb2.Output | None = None, delimiter: str = ",",
                 missing_values: tuple[str, ...] = (),
                 number_formats: tuple[tuple[str, str], ...] = (),
                 range_config: range_config_pb2.RangeConfig | None = None) -> None:
        spec = CsvExampleGenSpec(
            input_base=input_base, input_config=input_config,
            delimiter=delimiter, missing_values=json.dumps(list(missing_values)),
            number_formats=json.dumps(dict(number_formats)) if number_formats else None,
            output_config=output_config or utils.make_default_output_config(input_config),
            custom_config=None, range_config=range_config,
            output_data_format=example_gen_pb2.FORMAT_TF_EXAMPLE,
            output_file_format=example_gen_pb2.FORMAT_TFRECORDS_GZIP,
            examples=types.Channel(type=standard_artifacts.Examples))
        base_beam_component.BaseBeamComponent.__init__(self, spec=spec)
