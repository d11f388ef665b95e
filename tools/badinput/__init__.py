"""The bad-input sweep of issue 29 (run it with tools/badinput_sweep.py)."""
