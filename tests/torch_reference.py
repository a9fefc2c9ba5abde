"""transformers 5 + PyTorch CPU as the reference our encoders are checked against: run by the reference environment's
Python (bin/reference-env), never imported by the project, which has neither.

  python tests/torch_reference.py checkpoint ROOT FAMILY...       tiny random ...ForSequenceClassification, saved
                                                                  in ROOT/FAMILY
  python tests/torch_reference.py logits < jobs.json              [{"directory", "batch": {"input_ids", ...}}, ...]
                                                                  -> each one's logits and what loading it left
                                                                  missing or unused (one process: torch loads once)
  python tests/torch_reference.py sentence-logits < jobs.json     the same through sentence-transformers (a folder in
                                                                  its layout), with its encode() of "texts"
  python tests/torch_reference.py texts DIR < job.json           the folder's tokenizer + model on raw texts, as a
                                                                  transformers user runs them (see texts())
  python tests/torch_reference.py modernbert-folder DIR < texts   a tiny ModernBERT laid out as the hub lays it out
"""

from __future__ import annotations

import json
import sys

import torch
import transformers

SMALL = {"num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 96, "hidden_size": 64}
VOCAB = 2000


_ROBERTA_LIKE = {"vocab_size": VOCAB, "max_position_embeddings": 130, "pad_token_id": 1, "type_vocab_size": 1, **SMALL}
_MODERNBERT_IDS = {"pad_token_id": 1, "bos_token_id": 2, "eos_token_id": 3, "cls_token_id": 2, "sep_token_id": 3}
# Tiny configs that still exercise what differs: ModernBERT's window (8 tokens) is shorter than the test texts, its
# global layer every third; ELECTRA's embeddings narrower than its blocks; RoBERTa's positions from padding.
CONFIGS = {
    "modernbert": ("ModernBertConfig", {
        "vocab_size": VOCAB, "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 4,
        "num_attention_heads": 2, "local_attention": 8, "global_attn_every_n_layers": 3,
        "max_position_embeddings": 512, "classifier_pooling": "mean", **_MODERNBERT_IDS,
    }),
    "modernbert-cls": ("ModernBertConfig", {
        "vocab_size": VOCAB, "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 3,
        "num_attention_heads": 4, "local_attention": 16, "global_attn_every_n_layers": 2,
        "max_position_embeddings": 512, "classifier_pooling": "cls", "classifier_bias": True, "norm_bias": True,
        "attention_bias": True, "mlp_bias": True, **_MODERNBERT_IDS,
    }),
    # relative positions only, log buckets inside the test width, shared projections
    "deberta-v3": ("DebertaV2Config", {
        "vocab_size": VOCAB, "max_position_embeddings": 128, "relative_attention": True,
        "position_biased_input": False, "pos_att_type": ["p2c", "c2p"], "max_relative_positions": -1,
        "position_buckets": 8, "share_att_key": True, "norm_rel_ebd": "layer_norm", "type_vocab_size": 0,
        "pad_token_id": 0, **SMALL,
    }),
    # absolute positions too, own position projections, narrower embeddings, types
    "deberta-v2": ("DebertaV2Config", {
        "vocab_size": VOCAB, "max_position_embeddings": 128, "relative_attention": True,
        "position_biased_input": True, "pos_att_type": "c2p|p2c", "max_relative_positions": 24,
        "share_att_key": False, "type_vocab_size": 2, "embedding_size": 32, "pad_token_id": 0,
        "pooler_hidden_act": "tanh", **SMALL,
    }),
    # narrower embeddings; 4 layers in 2 groups of one shared block each
    "albert": ("AlbertConfig", {
        "vocab_size": VOCAB, "embedding_size": 32, "max_position_embeddings": 128, "num_hidden_groups": 2,
        "inner_group_num": 1, "hidden_act": "gelu_new", **{**SMALL, "num_hidden_layers": 4},
    }),
    # token types, rotary positions, gated MLP; a wide theta as gte-multilingual's
    "gte": ("GteConfig", {
        "vocab_size": VOCAB, "max_position_embeddings": 512, "type_vocab_size": 2, "pad_token_id": 1,
        "layer_norm_eps": 1e-12, **SMALL,
    }),
    # grouped-query attention (4 heads over 2), late pooling (every token's logits averaged)
    "eurobert": ("EuroBertConfig", {
        "vocab_size": VOCAB, "max_position_embeddings": 512, "pad_token_id": 1, "bos_token_id": 2,
        "eos_token_id": 3, "mask_token_id": 4, "num_key_value_heads": 2,
        **{**SMALL, "num_attention_heads": 4},
    }),
    # first-token pooling, biases on, its own theta
    "eurobert-bos": ("EuroBertConfig", {
        "vocab_size": VOCAB, "max_position_embeddings": 512, "pad_token_id": 1, "bos_token_id": 2,
        "eos_token_id": 3, "mask_token_id": 4, "classifier_pooling": "bos", "attention_bias": True,
        "mlp_bias": True, "rope_parameters": {"rope_type": "default", "rope_theta": 250000.0}, **SMALL,
    }),
    "eurobert-mean": ("EuroBertConfig", {
        "vocab_size": VOCAB, "max_position_embeddings": 512, "pad_token_id": 1, "bos_token_id": 2,
        "eos_token_id": 3, "mask_token_id": 4, "classifier_pooling": "mean", **SMALL,
    }),
    # NomicBERT: no biases, a gated feed-forward, token types, BERT's pooler; its own theta
    "nomic-bert": ("NomicBertConfig", {
        "vocab_size": VOCAB, "max_position_embeddings": 512, "type_vocab_size": 2, "pad_token_id": 0,
        "rope_parameters": {"rope_type": "default", "rope_theta": 500.0}, **SMALL,
    }),
    # Jina v3: XLM-R with rotary positions, biased projections, a plain feed-forward, XLM-R's head
    "jina-v3": ("JinaEmbeddingsV3Config", {
        "vocab_size": VOCAB, "max_position_embeddings": 514, "type_vocab_size": 1, "pad_token_id": 1,
        "hidden_act": "gelu", **SMALL,
    }),
    # UltraBERT: EuroBERT's blocks, a window of 8 in two of every three layers (the test width is 40), a RoPE base
    # per layer type
    "ultrabert": ("UltrabertConfig", {
        "vocab_size": VOCAB, "max_position_embeddings": 512, "pad_token_id": 1, "bos_token_id": 2,
        "eos_token_id": 3, "sliding_window": 8, "num_key_value_heads": 2,
        **{**SMALL, "num_attention_heads": 4, "num_hidden_layers": 3},
    }),
    "ultrabert-mean": ("UltrabertConfig", {
        "vocab_size": VOCAB, "max_position_embeddings": 512, "pad_token_id": 1, "bos_token_id": 2,
        "eos_token_id": 3, "sliding_window": 6, "classifier_pooling": "mean", "classifier_dropout": 0.1,
        "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 500.0},
                            "full_attention": {"rope_type": "default", "rope_theta": 80000.0}},
        **{**SMALL, "num_hidden_layers": 4},
    }),
    "mpnet": ("MPNetConfig", {"vocab_size": VOCAB, "max_position_embeddings": 130, "pad_token_id": 1, **SMALL}),
    "bert": ("BertConfig", {"vocab_size": VOCAB, "max_position_embeddings": 128, **SMALL}),
    "roberta": ("RobertaConfig", _ROBERTA_LIKE),
    "xlm-roberta": ("XLMRobertaConfig", _ROBERTA_LIKE),
    "camembert": ("CamembertConfig", _ROBERTA_LIKE),
    "electra": ("ElectraConfig", {"vocab_size": VOCAB, "embedding_size": 32, "max_position_embeddings": 128, **SMALL}),
    "distilbert": ("DistilBertConfig", {
        "vocab_size": VOCAB, "dim": 64, "n_layers": 2, "n_heads": 2, "hidden_dim": 96, "max_position_embeddings": 128,
    }),
}  # fmt: skip


def config(family: str):
    """`family`'s tiny config (CONFIGS), labelled neg / pos."""
    if family not in CONFIGS:
        raise SystemExit(f"unknown family {family}")
    kind, values = CONFIGS[family]
    labels = {"id2label": {0: "neg", 1: "pos"}, "label2id": {"neg": 0, "pos": 1}}
    return getattr(transformers, kind)(**values, **labels)


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
        model, info = transformers.AutoModelForSequenceClassification.from_pretrained(
            job["directory"], attn_implementation="eager", output_loading_info=True
        )
        model.eval()
        with torch.no_grad():
            out = model(**{name: torch.tensor(value) for name, value in job["batch"].items()}).logits.tolist()
        keys = ("missing_keys", "unexpected_keys", "mismatched_keys")
        answers.append({"logits": out, "loading": {k: sorted(map(str, info.get(k, []))) for k in keys}})
    print(json.dumps(answers))


def sentence_logits() -> None:
    """Each job's folder loaded by sentence-transformers: its output on the batch (input ids as given), what
    `encode` answers for the job's texts, and what loading its encoder (AutoModel) left missing or unused."""
    from sentence_transformers import SentenceTransformer

    answers = []
    for job in json.load(sys.stdin):
        model = SentenceTransformer(job["directory"], device="cpu")
        _, info = transformers.AutoModel.from_pretrained(job["directory"], output_loading_info=True)
        batch = {name: torch.tensor(value) for name, value in (job.get("batch") or {}).items()}
        with torch.no_grad():
            out = model(batch)["sentence_embedding"].tolist() if batch else []
        encoded = model.encode(job.get("texts") or [], convert_to_numpy=True).tolist()
        keys = ("missing_keys", "unexpected_keys", "mismatched_keys")
        loading = {k: sorted(map(str, info.get(k, []))) for k in keys}
        answers.append({"logits": out, "encoded": encoded, "loading": loading})
    print(json.dumps(answers))


def texts(directory: str) -> None:
    """{"texts", "pairs"?, "windows"?: {"overlap", "count"}} -> the folder's tokenizer and model as a transformers
    user runs them: probabilities per text (with windows: the mean over each text's first `count` windows of the
    tokenizer's own overflow, and each first window's), the ids, the labels."""
    job = json.load(sys.stdin)
    tokenizer = transformers.AutoTokenizer.from_pretrained(directory)
    model, info = transformers.AutoModelForSequenceClassification.from_pretrained(directory, output_loading_info=True)
    model.eval()
    multi = model.config.problem_type == "multi_label_classification"
    windows = job.get("windows")
    options = {"stride": windows["overlap"], "return_overflowing_tokens": True} if windows else {}
    if job.get("max_length"):
        options["max_length"] = job["max_length"]
    batch = tokenizer(job["texts"], job.get("pairs"), padding=True, truncation=True, return_tensors="pt", **options)
    document = batch.pop("overflow_to_sample_mapping", None)
    with torch.no_grad():
        out = model(**batch).logits
    probabilities = torch.sigmoid(out) if multi else torch.softmax(out, dim=-1)
    keys = ("missing_keys", "unexpected_keys", "mismatched_keys")
    answer = {"labels": model.config.id2label, "loading": {k: sorted(map(str, info.get(k, []))) for k in keys}}
    if windows:
        per_text = [[p for p, d in zip(probabilities, document.tolist(), strict=True) if d == i][: windows["count"]]
                    for i in range(len(job["texts"]))]  # fmt: skip
        answer["probabilities"] = [torch.stack(w).mean(0).tolist() for w in per_text]
        answer["first"] = [w[0].tolist() for w in per_text]
    else:
        answer["probabilities"] = probabilities.tolist()
        rows = zip(batch["input_ids"], batch["attention_mask"], strict=True)
        answer["ids"] = [row[mask.bool()].tolist() for row, mask in rows]
    print(json.dumps(answer))


def modernbert_folder(directory: str) -> None:
    """A tiny ModernBERT laid out as the hub lays out answerdotai/ModernBERT-base: a masked-LM checkpoint (its
    prediction head is the classifier's head.dense / head.norm) and a byte-level BPE tokenizer.json with NFC and the
    [CLS] $A [SEP] templates, trained on the texts given (stdin), saved by transformers 5 itself."""
    from tokenizers import ByteLevelBPETokenizer, normalizers, processors

    specials = ["[UNK]", "[PAD]", "[CLS]", "[SEP]", "[MASK]"]  # ids 0-4, as config() numbers them
    bpe = ByteLevelBPETokenizer(add_prefix_space=False)
    bpe.train_from_iterator(json.load(sys.stdin), vocab_size=VOCAB, special_tokens=specials)
    backend = bpe._tokenizer
    backend.normalizer = normalizers.NFC()
    backend.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)]
    )
    tokenizer = transformers.PreTrainedTokenizerFast(
        tokenizer_object=backend, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]", sep_token="[SEP]",
        mask_token="[MASK]", model_input_names=["input_ids", "attention_mask"], model_max_length=512,
    )  # fmt: skip
    tokenizer.save_pretrained(directory)
    settings = config("modernbert").to_dict()
    settings.update(vocab_size=len(tokenizer), classifier_pooling="cls", architectures=["ModernBertForMaskedLM"])
    for key in ("id2label", "label2id"):
        settings.pop(key)
    torch.manual_seed(0)
    model = transformers.ModernBertForMaskedLM(transformers.ModernBertConfig(**settings))
    model.save_pretrained(directory)


# the bare encoder class each tokenizer-first folder gets (encoder_beside): the hub's kind of checkpoint for it
BARE_MODELS = {
    "gte": "GteModel", "eurobert": "EuroBertModel", "modernbert": "ModernBertModel", "jina-v3": "JinaEmbeddingsV3Model",
    "nomic-bert": "NomicBertModel", "ultrabert": "UltrabertModel",
}  # fmt: skip


def encoder_beside(family: str, directory: str) -> None:
    """A tiny random bare encoder of `family` (CONFIGS' sizes) saved by transformers 5 beside the tokenizer already in
    `directory`, its vocabulary and special ids taken from that tokenizer: gte-multilingual, EuroBERT or mmBERT as
    the hub lays them out."""
    tokenizer = transformers.AutoTokenizer.from_pretrained(directory)
    kind, values = CONFIGS[family]
    ids = {f"{name}_token_id": getattr(tokenizer, f"{name}_token_id") for name in ("pad", "bos", "eos", "cls", "sep")}
    settings = {**values, **{k: v for k, v in ids.items() if v is not None}, "vocab_size": len(tokenizer)}
    if family == "eurobert":
        settings["mask_token_id"] = tokenizer.mask_token_id
    settings["architectures"] = [BARE_MODELS[family]]
    torch.manual_seed(0)
    model = getattr(transformers, BARE_MODELS[family])(getattr(transformers, kind)(**settings))
    model.save_pretrained(directory)


if __name__ == "__main__":
    command, *args = sys.argv[1:]
    {"checkpoint": lambda: checkpoints(args[0], args[1:]),
     "logits": logits,
     "sentence-logits": sentence_logits,
     "texts": lambda: texts(args[0]),
     "modernbert-folder": lambda: modernbert_folder(args[0]),
     "encoder-beside": lambda: encoder_beside(args[0], args[1])}[command]()  # fmt: skip
