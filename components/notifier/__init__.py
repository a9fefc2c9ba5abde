"""The exit step of a cloud run: its outcome published to Pub/Sub."""
