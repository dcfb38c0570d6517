"""Trainer and Transform code (run_fn, preprocessing_fn and what they use), one concern per
module; what the TPU image and Dataflow workers import. Imports nothing from pipeline/ or
bench/."""
