"""Reading a finished local run back from its output dir: the store check, the run lock, the
summary, the Evaluator's results, the report and the output dir's contents. Imports
components/ (the records they write); never cloud/."""
