"""The DAG's node ids: the names ML Metadata, the compiled spec, the report and the summary know each step by."""

TRANSFORMED_STATISTICS_GEN = "TransformedStatisticsGen"
TRAINER = "Trainer"
EVALUATOR = "Evaluator"
BASELINE_RESOLVER = "latest_blessed_model_resolver"
PUSHER = "Pusher"
HF_PUBLISHER = "HFPublisher"
BATCH_SCORER = "BatchScorer"
