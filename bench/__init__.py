"""`make bench`, `make bench-quality`, `make figures`: this project's pipeline measured beside
reference points on one machine. Imports pipeline/ and trainer_module/; nothing imports it."""
