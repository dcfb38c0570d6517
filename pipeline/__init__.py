"""The pipeline: its config, the DAG defined once, and thin runners per orchestrator."""
