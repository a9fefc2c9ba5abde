"""The components a default local run records, by node id: pinned by the e2e run and the compiled spec's tests."""

COMPONENTS = {
    "HFDatasetExampleGen",
    "StatisticsGen",
    "SchemaGen",
    "ExampleValidator",
    "Transform",
    "TransformedStatisticsGen",
    "Trainer",
    "latest_blessed_model_resolver",
    "Evaluator",
    "Pusher",
    "HFPublisher",
    "BatchScorer",
}
