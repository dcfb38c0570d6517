"""Trainer and Transform code of the pipeline: features, preprocessing, strategy, data, model, export."""
