"""What the component images execute: one module per node it implements (with its spec and
executor) and the helpers those executors call. Imports trainer_module/, spans/ (the time axis)
and the top-level pipeline modules that need no Python 3.11 (names, cache_keys, csv_check);
never cloud/ or runs/."""
