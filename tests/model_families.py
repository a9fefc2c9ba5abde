# ruff: noqa: RUF001  (look-alike characters are the point of the multilingual sample)
"""Tiny models of each tokenizer family, built offline and laid out as the hub lays them out.

No hub here: each family's tokenizer is trained at test time with `tokenizers` or `sentencepiece` on the
packaged corpus plus a multilingual sample, wrapped in that family's transformers tokenizer class and saved
with `save_pretrained` (tokenizer.json beside the files the hub ships: vocab.json + merges.txt, the
SentencePiece .model, vocab.txt), next to config.json and a random-weight model.safetensors (2 layers, hidden 64:
tests/tiny_model.py).
"""

from __future__ import annotations

import io
import json
from pathlib import Path

# Texts that break tokenizers: empty, whitespace-only, control characters, emoji, long words and runs.
EDGE_CASES = [
    "",
    "   ",
    "\t\n ",
    "Café crème brûlée, naïve résumé",
    "日本語のテキストと中文",
    "I ❤️ 🍕 pizza 😀🏽",
    "wait… ½ ﬁne ™",
    "ΣΑΣ ὈΔΥΣΣΕΎΣ",
    "İstanbul ǅ ß ﬀ Ⅻ",
    "a\u00a0b\u2003c\u2028d",
    "tab\there\x00nul\u200bzero-width\ufffdreplacement\x1b[31m",
    'don\'t-stop... "quote" (paren) #tag @user',
    "supercalifragilisticexpialidocious antidisestablishmentarianism",
    "word " * 400,
    "x" * 3000,
    "превосходно" * 6,  # 66 characters, 132 bytes: HF's word limit counts characters, not bytes
    "ж" * 100,
    "ж" * 101,
    "ж" * 99 + "!",
]

# Text in the scripts and forms the families must handle: accents, CJK, RTL, emoji, full-width, combining marks.
MULTILINGUAL = [
    "Le film est très réussi, une œuvre émouvante et drôle.",
    "Una película, se diría, más allá de toda lógica. ¡Qué pena!",
    "Der Film ist großartig – überraschend und bewegend.",
    "Фильм превосходный, но слишком длинный.",
    "Η ταινία ήταν ΥΠΈΡΟΧΗ, ΣΑΣ λέω.",
    "この映画はとても面白かったです。",
    "这部电影非常精彩，值得一看。",
    "영화가 정말 재미있었어요!",
    "الفيلم كان رائعا جدا",
    "הסרט היה מצוין",
    "फ़िल्म बहुत अच्छी थी १२३",
    "ภาพยนตร์เรื่องนี้ดีมาก",
    "I ❤️ this 🍕 movie 😀🏽👍🏿",
    "ＦＵＬＬ ｗｉｄｔｈ　ｔｅｘｔ １２３",
    "e\u0301 a\u0308 n\u0303 combining marks",
    "ﬁne ﬀ ½ ™ Ⅻ … “quotes” ‘single’ ``latex''",
]

# the model_type of each family built here (transformers names: deberta-v2 is DeBERTa-v3's too)
FAMILIES = ("roberta", "xlm-roberta", "albert", "deberta-v2", "mpnet")
# Funnel's tokenizer (WordPiece, `<cls>` with token type 2) runs in-graph; its encoder has no port, so its folder
# holds config.json and the tokenizer only: what the refusal is tested on. "gemma" (mmBERT's tokenizer: BPE with
# byte fallback), "llama-3" (EuroBERT's: byte-level BPE behind the GPT-4 split) and "digits" (the same split with
# each digit a word, as Qwen2's and UltraBERT's BPE split digits) are tokenizers without weights.
TOKENIZER_FAMILIES = (*FAMILIES, "funnel", "gemma", "llama-3", "digits")


def training_texts() -> list[str]:
    from components.example_gen.sources import rotten_tomatoes_reviews

    return list(rotten_tomatoes_reviews()["text"]) + MULTILINGUAL * 20


def _sentencepiece(texts: list[str], **options) -> bytes:
    import sentencepiece

    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(texts),
        model_writer=model,
        vocab_size=1200,
        character_coverage=0.9995,
        minloglevel=2,
        **options,
    )
    return model.getvalue()


def _wordpiece_vocab(texts: list[str], directory: Path, special_tokens: list[str]) -> None:
    from tokenizers import BertWordPieceTokenizer

    trainer = BertWordPieceTokenizer(lowercase=True)
    trainer.train_from_iterator(texts, vocab_size=2000, special_tokens=special_tokens)
    trainer.save_model(str(directory))


# Each SentencePiece family's model file and its special pieces' ids, as the family's tokenizer class expects.
SENTENCEPIECE_FAMILIES = {
    # fairseq layout: <s> <pad> </s> <unk>, SentencePiece ids shifted by one
    "xlm-roberta": ("sentencepiece.bpe.model", {"unk_id": 0, "bos_id": 1, "eos_id": 2, "pad_id": -1}),
    # lower-cased, accents stripped outside SentencePiece
    "albert": (
        "spiece.model",
        {"pad_id": 0, "unk_id": 1, "bos_id": -1, "eos_id": -1, "user_defined_symbols": ["[CLS]", "[SEP]", "[MASK]"]},
    ),
    # DeBERTa-v3's layout: [PAD] [CLS] [SEP] [UNK]
    "deberta-v2": (
        "spm.model",
        {
            "pad_id": 0, "pad_piece": "[PAD]", "bos_id": 1, "bos_piece": "[CLS]", "eos_id": 2, "eos_piece": "[SEP]",
            "unk_id": 3, "unk_piece": "[UNK]", "user_defined_symbols": ["[MASK]"],
        },
    ),
}  # fmt: skip
WORDPIECE_FAMILIES = {
    "mpnet": ["<s>", "<pad>", "</s>", "<unk>", "<mask>", "[UNK]"],
    "funnel": ["<pad>", "<cls>", "<sep>", "<unk>", "<mask>", "<s>", "</s>"],
}
TOKENIZER_CLASSES = {
    "roberta": "RobertaTokenizerFast",
    "xlm-roberta": "XLMRobertaTokenizerFast",
    "albert": "AlbertTokenizerFast",
    "deberta-v2": "DebertaV2TokenizerFast",
    "mpnet": "MPNetTokenizerFast",
    "funnel": "FunnelTokenizerFast",
}


def _gemma_tokenizer(texts: list[str], directory: Path):
    """mmBERT's kind of tokenizer: a SentencePiece BPE model with byte fallback (Gemma's options), converted by
    transformers' GemmaTokenizer as the hub's tokenizer.json was, with ModernBERT's `<bos> a <eos> b <eos>`."""
    import transformers
    from tokenizers import processors

    spm = _sentencepiece(
        texts, model_type="bpe", byte_fallback=True, add_dummy_prefix=False, allow_whitespace_only_pieces=True,
        split_digits=True, remove_extra_whitespaces=False, normalization_rule_name="identity",
        pad_id=0, eos_id=1, bos_id=2, unk_id=3, user_defined_symbols=["<mask>"],
    )  # fmt: skip
    (directory / "tokenizer.model").write_bytes(spm)
    backend = transformers.GemmaTokenizer.from_pretrained(directory).backend_tokenizer
    (directory / "tokenizer.model").unlink()  # the hub's mmBERT ships tokenizer.json alone
    backend.post_processor = processors.TemplateProcessing(
        single="<bos> $A <eos>", pair="<bos> $A <eos> $B:1 <eos>:1", special_tokens=[("<bos>", 2), ("<eos>", 1)]
    )
    special = {"bos_token": "<bos>", "eos_token": "<eos>", "unk_token": "<unk>", "pad_token": "<pad>"}
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=backend, cls_token="<bos>", sep_token="<eos>", mask_token="<mask>", **special
    )


def _llama3_tokenizer(texts: list[str], digits_one_by_one: bool = False):
    """EuroBERT's kind of tokenizer: byte-level BPE behind Llama-3's split (tiktoken's cl100k pattern), merges
    ignored for words in the vocab, `<|begin_of_text|> a <|end_of_text|>`; `digits_one_by_one`: the split that makes
    each digit a word (Qwen2's pattern; a BPE that splits digits, as UltraBERT's)."""
    import transformers
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    from models.tokenizers.cl100k_split import DIGITS_PATTERN, PATTERN

    backend = Tokenizer(models.BPE(ignore_merges=True))
    backend.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(DIGITS_PATTERN if digits_one_by_one else PATTERN), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    backend.decoder = decoders.ByteLevel()
    special = ["<|begin_of_text|>", "<|end_of_text|>", "<|pad|>", "<|mask|>"]
    backend.train_from_iterator(
        texts,
        trainers.BpeTrainer(
            vocab_size=2000, special_tokens=special, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
        ),
    )
    backend.post_processor = processors.TemplateProcessing(
        single="<|begin_of_text|> $A <|end_of_text|>",
        pair="<|begin_of_text|> $A <|end_of_text|> $B <|end_of_text|>",
        special_tokens=[("<|begin_of_text|>", 0), ("<|end_of_text|>", 1)],
    )
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=backend, bos_token=special[0], eos_token=special[1], cls_token=special[0],
        sep_token=special[1], pad_token=special[2], mask_token=special[3],
    )  # fmt: skip


def write_tokenizer(family: str, directory: Path) -> int:
    """Trains and saves `family`'s tokenizer into `directory`; returns its vocab size."""
    import transformers

    directory.mkdir(parents=True, exist_ok=True)
    if family in ("gemma", "llama-3", "digits"):
        texts = training_texts()
        if family == "gemma":
            tokenizer = _gemma_tokenizer(texts, directory)
        else:
            tokenizer = _llama3_tokenizer(texts, digits_one_by_one=family == "digits")
        tokenizer.save_pretrained(directory)
        return len(tokenizer)
    if family not in TOKENIZER_CLASSES:
        raise ValueError(f"unknown family {family}")
    texts = training_texts()
    if family == "roberta":
        from tokenizers import ByteLevelBPETokenizer

        bpe = ByteLevelBPETokenizer()
        bpe.train_from_iterator(texts, vocab_size=2000, special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
        bpe.save_model(str(directory))
    elif family in SENTENCEPIECE_FAMILIES:
        name, pieces = SENTENCEPIECE_FAMILIES[family]
        (directory / name).write_bytes(_sentencepiece(texts, model_type="unigram", **pieces))
    else:
        _wordpiece_vocab(texts, directory, WORDPIECE_FAMILIES[family])
    tokenizer = getattr(transformers, TOKENIZER_CLASSES[family]).from_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return len(tokenizer)


def _config(family: str, vocab_size: int) -> dict | None:
    """config.json of the family's bare encoder as transformers 5 writes it."""
    import transformers

    small = {"num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 128, "hidden_size": 64}
    if family == "roberta":
        config = transformers.RobertaConfig(vocab_size=vocab_size, max_position_embeddings=130, pad_token_id=1, **small)
    elif family == "xlm-roberta":
        config = transformers.XLMRobertaConfig(
            vocab_size=vocab_size, max_position_embeddings=130, pad_token_id=1, type_vocab_size=1, **small
        )
    elif family == "albert":
        config = transformers.AlbertConfig(
            vocab_size=vocab_size, embedding_size=32, max_position_embeddings=128, **small
        )
    elif family == "deberta-v2":
        config = transformers.DebertaV2Config(
            vocab_size=vocab_size, max_position_embeddings=128, relative_attention=True, position_biased_input=False,
            pos_att_type=["p2c", "c2p"], max_relative_positions=-1, position_buckets=32, type_vocab_size=0, **small,
        )  # fmt: skip
    elif family == "mpnet":
        config = transformers.MPNetConfig(vocab_size=vocab_size, max_position_embeddings=130, pad_token_id=1, **small)
    elif family == "funnel":
        config = transformers.FunnelConfig(vocab_size=vocab_size, block_sizes=[1, 1], d_model=64, n_head=2, d_head=32)
    elif family in ("gemma", "llama-3", "digits"):
        return None
    else:
        raise ValueError(f"unknown family {family}")
    config.architectures = [type(config).__name__.removesuffix("Config") + "Model"]
    return config.to_dict()


def write_tiny_model(family: str, directory: Path, seed: int = 0) -> Path:
    """A model folder of `family`: tokenizer files, config.json and (for an encoder we port) random weights."""
    from tests.tiny_model import write_random_checkpoint

    vocab_size = write_tokenizer(family, directory)
    config = _config(family, vocab_size)
    if family not in FAMILIES:  # no encoder of ours computes it: config.json beside the tokenizer, no weights
        if config is not None:
            (directory / "config.json").write_text(json.dumps(config, indent=2))
        return directory
    return write_random_checkpoint(config, directory, seed)


def with_special_tokens(hf, pieces: list[int]) -> list[int]:
    """`pieces` of one text between the special tokens `hf` adds to a single text (transformers 5 has no
    build_inputs_with_special_tokens on its tokenizers-backed classes): where they sit, read from `hf` itself."""
    bare = hf("a", add_special_tokens=False)["input_ids"]
    wrapped = hf("a")["input_ids"]
    start = next(i for i in range(len(wrapped)) if wrapped[i : i + len(bare)] == bare)
    return wrapped[:start] + list(pieces) + wrapped[start + len(bare) :]


def fuzz_text():
    """Hypothesis' strategy for any text without lone surrogates (which no UTF-8 input holds)."""
    from hypothesis import strategies as st

    return st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=300)


# Encoders released since transformers 5 with the tokenizer each ships, as the hub lays them out: the tokenizer
# trained here, the bare encoder written beside it by transformers 5 + PyTorch (tests/torch_reference.py).
RELEASED_SINCE = {
    "gte": ("gte", "xlm-roberta"),  # gte-multilingual: XLM-R's SentencePiece, as transformers 5 saves it (no .model)
    "eurobert": ("eurobert", "llama-3"),
    "mmbert": ("modernbert", "gemma"),
    "jina-v3": ("jina-v3", "xlm-roberta"),  # Jina v3 reads XLM-R's SentencePiece
    "nomic-bert": ("nomic-bert", "mpnet"),  # a WordPiece vocabulary, as nomic-embed's BERT one
    "ultrabert": ("ultrabert", "digits"),  # a byte-level BPE that splits digits (the hub's own is not reachable)
}


def write_released_since(name: str, directory: Path) -> Path:
    """`name`'s folder (RELEASED_SINCE): tokenizer.json + tokenizer_config.json, config.json, model.safetensors."""
    from transformers import AutoTokenizer

    from tests import torch_reference_env

    encoder, tokenizer_family = RELEASED_SINCE[name]
    trained = directory.parent / f"{directory.name}-tokenizer"
    write_tokenizer(tokenizer_family, trained)
    AutoTokenizer.from_pretrained(trained).save_pretrained(directory)  # what transformers 5 saves of it
    return torch_reference_env.write_encoder_beside(encoder, directory)
