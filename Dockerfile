# The pipeline image: every component of the DAG runs in it on Kubeflow Pipelines 2 / Vertex AI,
# and Dataflow workers use it as their SDK container (--sdk_container_image).
FROM gcr.io/tfx-oss-public/tfx:1.16.0

# The TFX image pins Beam 2.59, kfp 2.5 and aiplatform 1.70; the project is tested with the
# lock's versions, so those are installed over them (docker/requirements-pipeline.txt).
COPY docker/requirements-pipeline.txt /tmp/requirements-pipeline.txt
RUN pip install --no-cache-dir -r /tmp/requirements-pipeline.txt
# Dataflow starts each worker through Beam's boot (the image's entrypoint); it must be the boot
# of the Beam version installed above.
COPY --from=apache/beam_python3.10_sdk:2.61.0 /opt/apache/beam /opt/apache/beam
# Without this, the boot creates a fresh venv on every worker, without the packages above.
ENV RUN_PYTHON_SDK_IN_DEFAULT_ENVIRONMENT=1

WORKDIR /pipeline
COPY pyproject.toml README.md ./
COPY pipeline/ pipeline/
COPY trainer_module/ trainer_module/
COPY schemas/ schemas/
RUN pip install --no-cache-dir --no-deps /pipeline
# Components import the project by module path (trainer_module.run.run_fn, ...) and read
# files such as /pipeline/schemas/<dataset>/schema.pbtxt.
ENV PYTHONPATH=/pipeline
ENTRYPOINT ["/opt/apache/beam/boot"]
