"""The pipeline: the DAG defined once (dag.py), its config, the local runner and the command
-line tools. components/ holds what the images execute, cloud/ what compiles and submits a
cloud run, runs/ what reads a finished run back. Imports trainer_module/, never bench/."""

import os

# The project's checkout (or the pipeline image's copy of it): every project path derives from it.
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
