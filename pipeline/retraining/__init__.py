"""Automated retraining: which span to train on and when (new data, drift), locally, on a schedule or on events."""
