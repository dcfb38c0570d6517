"""The CSV executor against TFX's own: the same examples, byte for byte as TFX hashes them,
in the same splits."""

import collections
import csv
import io

import pytest
import tensorflow as tf
from google.protobuf import json_format
from tfx.components.example_gen import utils
from tfx.components.example_gen.csv_example_gen import executor as tfx_csv
from tfx.proto import example_gen_pb2
from tfx.types import standard_artifacts
from tfx_bsl.coders import csv_decoder

from dataset_rows import TAXI
from pipeline import cache_keys
from pipeline.components import example_gen
from pipeline.dag import csv_input_config
from trainer_module.missing import is_missing_bytes

# Negative and extreme int64s, floats beyond float32 (±inf), nan, a column with no value at
# all, text longer than 127 bytes (a two-byte length), non-ASCII text, quotes, commas and a
# line break inside a cell, empty cells of every type, and columns whose type rises late: a
# float column with a text, an int column with an int beyond int64 (text, as TFX infers it).
EDGE_CSV = """i,f,s,none,big,q,fs,is
-5,1e38,hello,,9223372036854775807,"a, ""quoted"" text",1.5,5
0,-1e38,h\u00e9llo w\u00f6rld,,-9223372036854775808,,2,7
127,nan,,,128,x,abc,99999999999999999999
,1e-45,{long},,16384,"two
lines",,
300,3.4028235e38,1,,-1,y,0.25,1
""".format(long="A" * 200)


def _rows(text: str) -> tuple[list[str], list[list[bytes]]]:
    header, *rows = csv.reader(io.StringIO(text))
    return header, [[cell.encode() for cell in row] for row in rows]


def _column_infos(inferrer: csv_decoder.ColumnTypeInferrer, rows: list[list[bytes]]) -> list:
    """Infers over two halves of the rows, merged, as Beam combines over bundles."""
    accumulators = []
    for part in (rows[:len(rows) // 2], rows[len(rows) // 2:]):
        accumulator = inferrer.create_accumulator()
        for row in part:
            accumulator = inferrer.add_input(accumulator, row)
        accumulators.append(accumulator)
    return inferrer.extract_output(inferrer.merge_accumulators(accumulators))


def _markers_blank(row: list[bytes], infos: list) -> list[bytes]:
    numbers = (csv_decoder.ColumnType.INT, csv_decoder.ColumnType.FLOAT)
    return [b"" if info.type in numbers and is_missing_bytes(cell) else cell
            for cell, info in zip(row, infos, strict=True)]


def _shipped_csv() -> str:
    with open(TAXI.csv_path, encoding="utf-8") as f:
        return f.read()


@pytest.mark.parametrize("text", [EDGE_CSV, _shipped_csv()], ids=["edge cases", "taxi"])
def test_types_and_rows_as_tfx_infers_and_serializes_them(text):
    header, rows = _rows(text)
    infos = _column_infos(csv_decoder.ColumnTypeInferrer(header, skip_blank_lines=True), rows)
    inferrer = example_gen._ColumnTypeInferrer(header, frozenset())
    inferrer.MEMO_LIMIT = 50  # values beyond it are inferred every time
    assert _column_infos(inferrer, rows) == infos
    if text is EDGE_CSV:
        assert [info.type for info in infos] == [
            csv_decoder.ColumnType.INT, csv_decoder.ColumnType.FLOAT,
            csv_decoder.ColumnType.STRING, csv_decoder.ColumnType.UNKNOWN,
            csv_decoder.ColumnType.INT, csv_decoder.ColumnType.STRING,
            csv_decoder.ColumnType.STRING, csv_decoder.ColumnType.STRING]
    tfx_rows, ours = tfx_csv._ParsedCsvToTfExample(), example_gen._EncodeRows(frozenset())
    for row in rows:
        # A missing marker in a number column ("nan" here) is a gap, where TFX keeps a NaN.
        [expected] = tfx_rows.process(_markers_blank(row, infos), infos)
        assert list(ours.process(row, infos)) == [expected.SerializeToString(deterministic=True)]
    assert list(ours.process([], infos)) == []  # a blank line, skipped as TFX skips it
    with pytest.raises(ValueError, match="Invalid CSV line"):
        list(ours.process(rows[0][1:], infos))
    with pytest.raises(ValueError, match="Columns do not match specified csv headers"):
        inferrer.add_input({}, rows[0][1:])


def _train_and_eval() -> example_gen_pb2.Output:
    """TFX's default split of one input, as the pipeline's CsvExampleGen writes it: train and
    eval, 2:1 by hash."""
    return utils.make_default_output_config(csv_input_config())


def _run(executor_class, data_dir, out_dir, output_config: example_gen_pb2.Output,
         **properties: str) -> dict:
    """Runs an executor (Beam in-process); returns each split's records."""
    examples = standard_artifacts.Examples()
    examples.uri = str(out_dir)
    executor_class().Do({}, {"examples": [examples]}, {
        **properties,
        "input_base": str(data_dir),
        "input_config": json_format.MessageToJson(csv_input_config()),
        "output_config": json_format.MessageToJson(output_config),
        "output_data_format": example_gen_pb2.FORMAT_TF_EXAMPLE,
        "output_file_format": example_gen_pb2.FORMAT_TFRECORDS_GZIP,
    })
    return {split.name: [r.numpy() for r in tf.data.TFRecordDataset(
        [str(p) for p in sorted((out_dir / f"Split-{split.name}").glob("*.gz"))], "GZIP")]
        for split in output_config.split_config.splits}


def _by_content(records: list[bytes]) -> collections.Counter:
    return collections.Counter(tf.train.Example.FromString(r).SerializeToString(
        deterministic=True) for r in records)


@pytest.mark.parametrize("partition_feature", ["", "payment_type"])
def test_executor_writes_tfx_examples_in_tfx_splits(tmp_path, partition_feature):
    """Two files of taxi rows through TFX's executor and this one: every split holds the same
    examples. Hash splits hash the deterministic bytes, which is what this executor writes;
    splitting by a feature's value keeps TFX's own protos."""
    text = _shipped_csv()
    header, *lines = text.splitlines(keepends=True)
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    for name, part in (("a.csv", lines[:1500]), ("b.csv", lines[1500:2400])):
        (data_dir / name).write_text(header + "".join(part), encoding="utf-8")
    output_config = _train_and_eval()
    if partition_feature:
        output_config.split_config.partition_feature_name = partition_feature
    expected = _run(tfx_csv.Executor, data_dir, tmp_path / "tfx", output_config)
    ours = _run(example_gen.Executor, data_dir, tmp_path / "ours", output_config)
    assert sum(len(records) for records in ours.values()) == 2400
    for split, records in expected.items():
        assert 0 < len(records) < 2400
        assert _by_content(ours[split]) == _by_content(records), split
        if not partition_feature:
            assert collections.Counter(ours[split]) == _by_content(records), split


def test_a_gzip_compressed_file_gives_the_examples_its_text_gives(tmp_path):
    """The same rows as a.csv and as b.csv.gz beside it: one split, the same examples in the
    same splits as the plain files give (Beam's reader decompresses by the name)."""
    import gzip

    header, *lines = _shipped_csv().splitlines(keepends=True)
    plain, mixed = tmp_path / "plain", tmp_path / "mixed"
    plain.mkdir()
    mixed.mkdir()
    for folder in (plain, mixed):
        (folder / "a.csv").write_text(header + "".join(lines[:600]), encoding="utf-8")
    (plain / "b.csv").write_text(header + "".join(lines[600:1200]), encoding="utf-8")
    with gzip.open(mixed / "b.csv.gz", "wt", encoding="utf-8") as f:
        f.write(header + "".join(lines[600:1200]))
    output_config = _train_and_eval()
    expected = _run(example_gen.Executor, plain, tmp_path / "from_plain", output_config)
    got = _run(example_gen.Executor, mixed, tmp_path / "from_mixed", output_config)
    assert sum(len(records) for records in got.values()) == 1200
    for split, records in expected.items():
        assert collections.Counter(got[split]) == collections.Counter(records), split


def test_a_spreadsheets_trailing_empty_columns_are_no_features(tmp_path):
    """Excel's export of a sheet ends its header with ',,,' and every row with empty cells:
    the examples are those of the same rows without them; a value under no name stops."""
    header, *lines = _shipped_csv().splitlines(keepends=True)
    plain, excel = tmp_path / "plain", tmp_path / "excel"
    plain.mkdir()
    excel.mkdir()
    (plain / "a.csv").write_text(header + "".join(lines[:300]), encoding="utf-8")
    (excel / "a.csv").write_text("".join(line.rstrip("\r\n") + ",,,\n"
                                         for line in [header, *lines[:300]]), encoding="utf-8")
    output_config = _train_and_eval()
    expected = _run(example_gen.Executor, plain, tmp_path / "from_plain", output_config)
    got = _run(example_gen.Executor, excel, tmp_path / "from_excel", output_config)
    for split, records in expected.items():
        assert collections.Counter(got[split]) == collections.Counter(records), split
    (excel / "a.csv").write_text(header.rstrip("\n") + ",,\n" + lines[0].rstrip("\n") + ",x,\n",
                                 encoding="utf-8")
    with pytest.raises(Exception, match="column .* of the header has no name but holds"):
        _run(example_gen.Executor, excel, tmp_path / "held", output_config)


ONE_SPLIT = example_gen_pb2.Output(split_config=example_gen_pb2.SplitConfig(
    splits=[example_gen_pb2.SplitConfig.Split(name="all", hash_buckets=1)]))


def test_formatted_numbers_are_read_through_their_columns_format(tmp_path):
    """Fares written as a spreadsheet's "$1,234.50" give the examples plain fares give; a cell
    that breaks the format, and an infinite or float32-overflowing number, stop the step."""
    import json

    header, *lines = _shipped_csv().splitlines(keepends=True)
    names = next(csv.reader([header]))
    rows = [next(csv.reader([line])) for line in lines[:300]]
    fare = names.index("fare")
    plain, formatted = tmp_path / "plain", tmp_path / "formatted"
    for folder, shown in ((plain, lambda v: v), (formatted, lambda v: f"${float(v):,.2f}")):
        folder.mkdir()
        with open(folder / "a.csv", "w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow(names)
            writer.writerows([*r[:fare], shown(r[fare]), *r[fare + 1:]] for r in rows)
    formats = {example_gen.NUMBER_FORMATS_KEY: json.dumps({"fare": "$#,##0"})}
    expected = _run(example_gen.Executor, plain, tmp_path / "from_plain", ONE_SPLIT)
    got = _run(example_gen.Executor, formatted, tmp_path / "from_formatted", ONE_SPLIT, **formats)
    assert collections.Counter(got["all"]) == collections.Counter(expected["all"])

    def one_row(folder, cell: str) -> None:
        (folder / "a.csv").write_text(
            header + ",".join([*rows[0][:fare], cell, *rows[0][fare + 1:]]) + "\n",
            encoding="utf-8")

    one_row(formatted, "12.50")  # no "$": not the column's format
    with pytest.raises(Exception, match="is not written as the column's format"):
        _run(example_gen.Executor, formatted, tmp_path / "bad", ONE_SPLIT, **formats)
    for bad in ("inf", "-Infinity", "1e39"):
        one_row(plain, bad)
        with pytest.raises(Exception, match="is not a finite number|is beyond the largest"):
            _run(example_gen.Executor, plain, tmp_path / "inf", ONE_SPLIT)


def test_component_runs_this_executor_and_keys_its_cache_on_its_code():
    component = example_gen.CsvExampleGen(input_base="/data", input_config=csv_input_config())
    assert component.id == "CsvExampleGen"
    assert component.executor_spec.executor_class is example_gen.Executor
    cache_keys.key_step(component)
    assert component.exec_properties["code_version"] == cache_keys.code_version(
        [example_gen.__name__])
    assert json_format.Parse(component.exec_properties["output_config"],
                             example_gen_pb2.Output()) == example_gen_pb2.Output(
        split_config=example_gen_pb2.SplitConfig(splits=[
            example_gen_pb2.SplitConfig.Split(name="train", hash_buckets=2),
            example_gen_pb2.SplitConfig.Split(name="eval", hash_buckets=1)]))


def test_missing_markers_are_gaps_in_number_columns_and_words_in_text():
    """NA, N/A, NaN, null, None and spaces, in any case: a number column with such gaps stays a
    number column (TFX reads it as text), each marker written as an empty cell is; a text
    column keeps them as its words."""
    header = ["total", "count", "plan"]
    rows = [[b"29.85", b"1", b"None"], [b" ", b"NA", b"basic"], [b"NA", b"n/a", b"NA"],
            [b"nan", b"null", b"pro"], [b"None", b"NULL", b""], [b"108.15", b"3", b"plus"]]
    infos = _column_infos(example_gen._ColumnTypeInferrer(header, frozenset()), rows)
    assert [info.type for info in infos] == [csv_decoder.ColumnType.FLOAT,
                                             csv_decoder.ColumnType.INT,
                                             csv_decoder.ColumnType.STRING]
    tfx_rows, ours = tfx_csv._ParsedCsvToTfExample(), example_gen._EncodeRows(frozenset())
    examples = []
    for row in rows:
        [serialized] = ours.process(row, infos)
        [expected] = tfx_rows.process(_markers_blank(row, infos), infos)
        assert serialized == expected.SerializeToString(deterministic=True)
        examples.append(tf.train.Example.FromString(serialized))
    totals = [list(e.features.feature["total"].float_list.value) for e in examples]
    assert totals == [[pytest.approx(29.85)], [], [], [], [], [pytest.approx(108.15)]]
    plans = [list(e.features.feature["plan"].bytes_list.value) for e in examples]
    assert plans == [[b"None"], [b"basic"], [b"NA"], [b"pro"], [], [b"plus"]]


def _row_ids(records: list[bytes]) -> list[int]:
    return [tf.train.Example.FromString(r).features.feature["i"].int64_list.value[0]
            for r in records]


def test_each_split_is_written_in_random_order_across_files(tmp_path, monkeypatch):
    """A CSV sorted by its id, cut into three output files per split by a small shard size:
    each split holds its rows once each, spread over the three files, in an order unrelated to
    the file's (the Trainer's shuffle buffer is local, so a sorted export would otherwise
    train in its own order), and the shuffle's scratch files are gone."""
    rows = 3000
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    text = "i,x\n" + "".join(f"{i},{i % 7}\n" for i in range(rows))
    (data_dir / "sorted.csv").write_text(text, encoding="utf-8")
    monkeypatch.setattr(example_gen, "SHARD_INPUT_BYTES", len(text) // 3 + 1)
    output_config = _train_and_eval()
    expected = _run(tfx_csv.Executor, data_dir, tmp_path / "tfx", output_config)
    out_dir = tmp_path / "ours"
    ours = _run(example_gen.Executor, data_dir, out_dir, output_config)
    assert sorted(p.name for p in out_dir.iterdir()) == ["Split-eval", "Split-train"]
    for split, records in ours.items():
        files = sorted(p.name for p in (out_dir / f"Split-{split}").iterdir())
        assert files == [f"data_tfrecord-0000{k}-of-00003.gz" for k in range(3)]
        assert collections.Counter(records) == _by_content(expected[split]), split
        ids = _row_ids(records)
        assert len(set(ids)) == len(ids) > rows // 4
        # Rank correlation of position and id: 1 in the file's order, near 0 when shuffled
        # (its spread over random orders of ~1,000 rows is about 0.03).
        order = sorted(range(len(ids)), key=ids.__getitem__)
        ranks = [0] * len(ids)
        for rank, position in enumerate(order):
            ranks[position] = rank
        n = len(ids)
        correlation = 1 - 6 * sum((rank - k) ** 2 for k, rank in enumerate(ranks)) / (
            n * (n * n - 1))
        assert abs(correlation) < 0.2, (split, correlation)


def test_the_same_rows_give_the_same_files_and_spread_a_rows_copies(tmp_path, monkeypatch):
    """The same rows, once as one file and once as two files in another order: each split's
    files are the same, byte for byte, so a fixed SEED trains on the same validation slice
    (drawn by file and position). A row repeated 300 times is spread over its file, not written
    as one run that the slice would take or leave whole."""
    rows = [f"{i},{i % 7}\n" for i in range(2000)] + ["-1,0\n"] * 300
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    (one / "rows.csv").write_text("i,x\n" + "".join(rows), encoding="utf-8")
    (two / "a.csv").write_text("i,x\n" + "".join(rows[1500:][::-1]), encoding="utf-8")
    (two / "b.csv").write_text("i,x\n" + "".join(rows[:1500]), encoding="utf-8")
    monkeypatch.setattr(example_gen, "SHARD_INPUT_BYTES",
                        (one / "rows.csv").stat().st_size // 3 + 10)
    output_config = _train_and_eval()
    for data_dir in (one, two):
        _run(example_gen.Executor, data_dir, tmp_path / f"out-{data_dir.name}", output_config)
    for split in ("train", "eval"):
        files = [sorted((tmp_path / f"out-{name}" / f"Split-{split}").iterdir())
                 for name in ("one", "two")]
        assert [p.name for p in files[0]] == [p.name for p in files[1]] and len(files[0]) == 3
        for ours, theirs in zip(*files, strict=True):
            assert ours.read_bytes() == theirs.read_bytes(), (split, ours.name)
    # Every copy has the same bytes, so all are in one split and one file of it.
    [ids] = [ids for path in sorted((tmp_path / "out-one" / "Split-train").iterdir())
             if -1 in (ids := _row_ids([r.numpy() for r in tf.data.TFRecordDataset(
                 str(path), "GZIP")]))]
    assert ids.count(-1) == 300
    # Adjacent copies: about 300 x 299 / rows when spread; one run of them would make 299.
    adjacent = sum(a == b == -1 for a, b in zip(ids[:-1], ids[1:], strict=True))
    assert adjacent < 1.5 * 300 * 299 / len(ids) < 299, (adjacent, len(ids))


def test_shard_count_follows_the_input_size(tmp_path, monkeypatch):
    monkeypatch.setattr(example_gen, "SHARD_INPUT_BYTES", 100)
    (tmp_path / "a.csv").write_bytes(b"x" * 150)
    (tmp_path / "b.csv").write_bytes(b"x" * 100)
    assert example_gen.shard_count([str(tmp_path / "a.csv")], 1) == 2
    assert example_gen.shard_count([str(tmp_path / "*.csv")], 1) == 3
    # Every Beam worker reads as many files as the others.
    assert example_gen.shard_count([str(tmp_path / "*.csv")], 2) == 4
    assert example_gen.shard_count([str(tmp_path / "a.csv")], 4) == 4
    monkeypatch.setattr(example_gen, "MAX_SHARDS", 2)
    assert example_gen.shard_count([str(tmp_path / "*.csv")], 1) == 2


def test_only_beams_local_runners_shuffle_through_files():
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions

    for args in ([], ["--direct_running_mode=multi_processing", "--direct_num_workers=2"]):
        assert example_gen.is_local(beam.Pipeline(options=PipelineOptions(args)))
    # A runner with its own shuffle service keeps TFX's write (Prism stands in for Dataflow,
    # whose pipelines cannot be built without a Google Cloud project).
    assert not example_gen.is_local(beam.Pipeline(runner="PrismRunner"))
