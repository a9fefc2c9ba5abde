"""Watching what a served model answers: drift of served traffic from the training data, accuracy without labels."""
