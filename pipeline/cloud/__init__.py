"""Running the DAG on Vertex AI Pipelines or Kubeflow Pipelines 2: cloud settings, TPU types,
compile, preflight, submit, and reading compiled specs back. Imports the DAG and components/;
nothing in components/ or runs/ imports it."""
