"""ExampleValidator: the stock component with an executor that stops the run on anomalies."""
