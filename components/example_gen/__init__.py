"""A TFX ExampleGen that reads Hugging Face datasets (hub, local files, save_to_disk folders)."""
