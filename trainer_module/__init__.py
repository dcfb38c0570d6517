"""Trainer and Transform code: features, preprocessing, strategy, data, model, export."""
