# The pipeline image: every component of the DAG runs in it on Kubeflow Pipelines 2 / Vertex AI
# (and Dataflow workers use it as their SDK container). The TFX 1.16 image already carries the
# stack the lock pins (TensorFlow 2.16, tf.Transform, TFMA, Beam); only this project is added.
FROM gcr.io/tfx-oss-public/tfx:1.16.0

WORKDIR /pipeline
COPY pyproject.toml README.md ./
COPY pipeline/ pipeline/
COPY trainer_module/ trainer_module/
COPY schemas/ schemas/
RUN pip install --no-cache-dir --no-deps /pipeline
# Components import the project by module path (trainer_module.run.run_fn, ...) and read
# files such as /pipeline/schemas/<dataset>/schema.pbtxt.
ENV PYTHONPATH=/pipeline
