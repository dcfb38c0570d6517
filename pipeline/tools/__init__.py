"""The command-line tools beside the DAG: `make dataset` (bootstrap), `make schema`
(infer_schema), `make predict` (predict) and `make tpu-check` (tpu_check). Each reads the shared
base of pipeline/ and trainer_module/; nothing in the DAG, components/, cloud/ or runs/ imports
them."""
