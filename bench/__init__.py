"""`make bench`: this project's pipeline side by side with TFX's defaults, on one machine."""
