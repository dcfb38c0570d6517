"""A local run's output dir, before and after the DAG: the run lock and the store check taken
before it starts; the summary, the Evaluator's results, the report and the output dir's contents
read back when it ends. Imports components/ (the records they write); never cloud/."""
