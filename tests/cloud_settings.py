"""The cloud settings the Kubeflow / Vertex tests compile with: placeholders of the right form
(no project, bucket or image here exists)."""

CLOUD = {
    "GCP_PROJECT": "my-ml-project",
    "GCP_REGION": "us-central1",
    "GCS_BUCKET": "gs://my-ml-bucket",
    "DATA_URI": "gs://my-ml-bucket/data",
    "PIPELINE_IMAGE": "us-docker.pkg.dev/my-ml-project/tfx/taxi-tpu:1.0",
}
TPU_IMAGE = "us-docker.pkg.dev/my-ml-project/tfx/taxi-tpu-trainer:1.0"
