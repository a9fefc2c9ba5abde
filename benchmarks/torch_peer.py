"""transformers 5's PyTorch `Trainer` and text-classification `pipeline` on the jobs `make bench-peers` gives ours:
run by the reference environment's Python (bin/reference-env), never imported by the project, which has no torch.

  python benchmarks/torch_peer.py < job.json   -> one JSON line: training examples/s, test accuracy and AUC, and
                                                 scoring rows/s of our published folder

The job names the pretrained folder, the pipeline's own train and test splits (JSON lines of text and label id),
the recipe our run used (epochs, batch size, learning rate, warm-up share, weight decay, max length), the
precision, the threads, and our Hugging Face folder to score with. The recipe is a transformers user's: dynamic
padding, texts grouped by length (transformers 5's `train_sampling_strategy`), AdamW with linear decay after
warm-up (5's `warmup_steps` takes the warm-up as a share of the steps).
"""

from __future__ import annotations

import json
import sys
import tempfile
import time

import numpy as np
import torch
import transformers


def _rows(path: str) -> list[dict]:
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def _auc(labels: np.ndarray, scores: np.ndarray) -> float:
    """Mann-Whitney's AUC of the positive class' scores (ties count half)."""
    order = np.argsort(scores, kind="stable")
    ranks = np.empty(len(scores))
    ranks[order] = np.arange(1, len(scores) + 1)
    for value in np.unique(scores):  # average ranks of ties
        tied = scores == value
        ranks[tied] = ranks[tied].mean()
    positive = labels == 1
    n_pos, n_neg = positive.sum(), (~positive).sum()
    return float((ranks[positive].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def train_and_test(job: dict) -> dict:
    tokenizer = transformers.AutoTokenizer.from_pretrained(job["model_dir"])
    model = transformers.AutoModelForSequenceClassification.from_pretrained(job["model_dir"], num_labels=2)
    encode = lambda rows: [  # noqa: E731
        {**tokenizer(row["text"], truncation=True, max_length=job["max_length"]), "labels": row["label"]}
        for row in rows
    ]
    train, test = encode(_rows(job["train"])), encode(_rows(job["test"]))
    bf16 = job["precision"] == "bf16"
    with tempfile.TemporaryDirectory() as scratch:
        arguments = transformers.TrainingArguments(
            output_dir=scratch, num_train_epochs=job["epochs"], per_device_train_batch_size=job["batch_size"],
            per_device_eval_batch_size=64, learning_rate=job["learning_rate"], warmup_steps=job["warmup_ratio"],
            weight_decay=job["weight_decay"], lr_scheduler_type="linear", train_sampling_strategy="group_by_length",
            bf16=bf16,
            use_cpu=True, seed=job["seed"], report_to=[], save_strategy="no", logging_strategy="no",
            dataloader_num_workers=0, disable_tqdm=True,
        )  # fmt: skip
        trainer = transformers.Trainer(
            model=model, args=arguments, train_dataset=train,
            data_collator=transformers.DataCollatorWithPadding(tokenizer),
        )  # fmt: skip
        started = time.perf_counter()
        trainer.train()
        seconds = time.perf_counter() - started
        answered = trainer.predict(test)  # label_ids in the order the predictions come (not always the split's)
    logits, labels = answered.predictions, np.asarray(answered.label_ids)
    probabilities = torch.softmax(torch.tensor(logits, dtype=torch.float32), dim=-1).numpy()
    return {
        "train_examples_per_second": len(train) * job["epochs"] / seconds,
        "train_seconds": seconds,
        "accuracy": float((probabilities.argmax(axis=1) == labels).mean()),
        "auc": _auc(labels, probabilities[:, 1]),
    }


def score(job: dict) -> dict:
    """Our published folder through transformers' own text-classification pipeline, as its users score a file."""
    texts = [row["text"] for row in _rows(job["score_texts"])]
    dtype = torch.bfloat16 if job["precision"] == "bf16" else torch.float32
    classify = transformers.pipeline("text-classification", model=job["hf_dir"], device="cpu", dtype=dtype)
    classify(texts[:64], batch_size=32, truncation=True)  # warm-up: the first batches load and trace
    started = time.perf_counter()
    classify(texts, batch_size=32, truncation=True)
    return {"score_rows_per_second": len(texts) / (time.perf_counter() - started)}


def main() -> None:
    job = json.load(sys.stdin)
    torch.set_num_threads(job["threads"])
    torch.manual_seed(job["seed"])
    print(json.dumps({**train_and_test(job), **score(job)}))


if __name__ == "__main__":
    main()
