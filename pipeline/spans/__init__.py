"""The time axis: span folders, the span store, reading older spans, drift between spans and
skew at prediction time, and the nodes that do it (DriftValidator, SpanWindow, the span
resolver). Imports trainer_module/, components/ and the top-level pipeline modules; never cloud/."""
