"""The fine-tuning recipe chosen from the model and the data: lengths, learning rate, epochs; the config."""
