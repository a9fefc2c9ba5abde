"""What a run did, read back from ML Metadata: summaries and the HTML report."""
