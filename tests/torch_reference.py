"""transformers 5 + PyTorch CPU as the reference our encoders are checked against: run by the reference environment's
Python (bin/reference-env), never imported by the project, which has neither.

  python tests/torch_reference.py checkpoint ROOT FAMILY...       tiny random ...ForSequenceClassification, saved
                                                                  in ROOT/FAMILY
  python tests/torch_reference.py logits < jobs.json              [{"directory", "batch": {"input_ids", ...}}, ...]
                                                                  -> the logits of each (one process: torch loads once)
  python tests/torch_reference.py texts DIR [WIDTH] < texts.json  the folder's tokenizer + model on raw texts:
                                                                  {"ids", "probabilities"} as `pipeline()` gives them
"""

from __future__ import annotations

import json
import sys

import torch
import transformers

SMALL = {"num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 96, "hidden_size": 64}
VOCAB = 2000


def config(family: str):
    """Tiny configs that still exercise what differs: ModernBERT's window (8 tokens) is shorter than the test texts,
    its global layer every third; ELECTRA's embeddings narrower than its blocks; RoBERTa's positions from padding."""
    labels = {"id2label": {0: "neg", 1: "pos"}, "label2id": {"neg": 0, "pos": 1}}
    if family == "modernbert":
        return transformers.ModernBertConfig(
            vocab_size=VOCAB, hidden_size=64, intermediate_size=96, num_hidden_layers=4, num_attention_heads=2,
            local_attention=8, global_attn_every_n_layers=3, max_position_embeddings=512, pad_token_id=1,
            bos_token_id=2, eos_token_id=3, cls_token_id=2, sep_token_id=3, classifier_pooling="mean", **labels,
        )  # fmt: skip
    if family == "modernbert-cls":
        return transformers.ModernBertConfig(
            vocab_size=VOCAB, hidden_size=64, intermediate_size=96, num_hidden_layers=3, num_attention_heads=4,
            local_attention=16, global_attn_every_n_layers=2, max_position_embeddings=512, pad_token_id=1,
            bos_token_id=2, eos_token_id=3, cls_token_id=2, sep_token_id=3, classifier_pooling="cls",
            classifier_bias=True, norm_bias=True, attention_bias=True, mlp_bias=True, **labels,
        )  # fmt: skip
    if family == "bert":
        return transformers.BertConfig(vocab_size=VOCAB, max_position_embeddings=128, **SMALL, **labels)
    if family in ("roberta", "xlm-roberta", "camembert"):
        kind = {"roberta": transformers.RobertaConfig, "xlm-roberta": transformers.XLMRobertaConfig,
                "camembert": transformers.CamembertConfig}[family]  # fmt: skip
        return kind(vocab_size=VOCAB, max_position_embeddings=130, pad_token_id=1, type_vocab_size=1, **SMALL, **labels)
    if family == "electra":
        return transformers.ElectraConfig(
            vocab_size=VOCAB, embedding_size=32, max_position_embeddings=128, **SMALL, **labels
        )
    if family == "distilbert":
        return transformers.DistilBertConfig(
            vocab_size=VOCAB, dim=64, n_layers=2, n_heads=2, hidden_dim=96, max_position_embeddings=128, **labels
        )
    raise SystemExit(f"unknown family {family}")


def checkpoints(root: str, families: list[str]) -> None:
    for family in families:
        checkpoint(family, f"{root}/{family}")


def checkpoint(family: str, directory: str, seed: int = 0) -> None:
    torch.manual_seed(seed)
    model = transformers.AutoModelForSequenceClassification.from_config(config(family))
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "norm" in name.lower():  # LayerNorms start at 1 and 0: moved, a misplaced norm weight shows
                parameter.add_(0.2 * torch.randn_like(parameter))
            elif "classifier" in name or "pooler" in name:  # logits of order 1, not 0.01: differences show
                parameter.mul_(20.0)
    model.save_pretrained(directory)


def logits() -> None:
    answers = []
    for job in json.load(sys.stdin):
        model = transformers.AutoModelForSequenceClassification.from_pretrained(
            job["directory"], attn_implementation="eager"
        )
        model.eval()
        with torch.no_grad():
            answers.append(model(**{name: torch.tensor(value) for name, value in job["batch"].items()}).logits.tolist())
    print(json.dumps(answers))


def texts(directory: str, width: int | None = None) -> None:
    tokenizer = transformers.AutoTokenizer.from_pretrained(directory)
    model = transformers.AutoModelForSequenceClassification.from_pretrained(directory)
    model.eval()
    batch = tokenizer(json.load(sys.stdin), padding=True, truncation=True, max_length=width, return_tensors="pt")
    with torch.no_grad():
        out = model(**batch).logits
    multi = model.config.problem_type == "multi_label_classification"
    probabilities = torch.sigmoid(out) if multi else torch.softmax(out, dim=-1)
    ids = [row[mask.bool()].tolist() for row, mask in zip(batch["input_ids"], batch["attention_mask"], strict=True)]
    print(json.dumps({"ids": ids, "probabilities": probabilities.tolist(), "labels": model.config.id2label}))


if __name__ == "__main__":
    command, *args = sys.argv[1:]
    {"checkpoint": lambda: checkpoints(args[0], args[1:]),
     "logits": logits,
     "texts": lambda: texts(args[0], int(args[1]) if len(args) > 1 else None)}[command]()  # fmt: skip
