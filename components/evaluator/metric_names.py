"""Our names of the metrics the Evaluator computes, which the run summary, the report and --check read: declared
here, without TFMA, so reading a result or refusing a model before the run costs no TFMA import."""

ACCURACY, AUC = "accuracy", "auc"
SUBSET_ACCURACY, HAMMING_LOSS = "subset_accuracy", "hamming_loss"  # multi-label: the exact label set; wrong decisions
