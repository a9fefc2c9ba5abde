import numpy as np

from pipeline.monitoring.checks import Reference, chance_auc_spread, run_checks
from pipeline.monitoring.descriptors import Described, script

WORDS = ["film", "plot", "actor", "scene", "story", "funny", "boring", "great", "moving", "slow", "cast", "score"]
OTHER = ["battery", "screen", "charger", "phone", "cable", "refund", "seller", "shipping", "price", "box"]


def _described(draw, rows: int, words=WORDS, length=12, scripts="LATIN", confident=0.8) -> Described:
    counts = draw.poisson(length, rows) + 1
    texts = tuple(" ".join(draw.choice(words, n)) for n in counts)
    confidence = np.clip(draw.normal(confident, 0.1, rows), 0.5, 1.0)
    first = draw.random(rows) < 0.5
    answered = np.stack([confidence, 1 - confidence], 1)
    probabilities = np.where(first[:, None], answered, answered[:, ::-1])
    return Described(
        chars=np.array([len(t) for t in texts]),
        probabilities=probabilities,
        tokens=counts + 2,
        unknown_share=np.zeros(rows),
        scripts=(scripts,) * rows,
        texts=texts,
    )


def _reference(draw) -> Reference:
    held = _described(draw, 1_000)
    return Reference(
        _described(draw, 2_000), held.take(np.arange(500)), held.take(np.arange(500, 1_000)), ("neg", "pos")
    )


def test_an_in_domain_window_moves_nothing_and_another_source_moves_what_changed():
    draw = np.random.default_rng(0)
    reference = _reference(draw)
    same = run_checks(reference, _described(draw, 400))
    assert not [c.name for c in same if c.moved], [c.line() for c in same]
    other = run_checks(reference, _described(draw, 400, OTHER, length=30, scripts="CYRILLIC", confident=0.6))
    moved = {c.name for c in other if c.moved}
    assert moved == {
        "text length (characters)", "tokens per text", "script", "confidence", "texts (domain classifier)"
    }, [c.line() for c in other]


def test_a_window_of_hashes_measures_what_was_served_and_says_what_it_could_not():
    draw = np.random.default_rng(1)
    window = _described(draw, 300)
    hashed = Described(chars=window.chars, probabilities=window.probabilities)
    results = {c.name: c for c in run_checks(_reference(draw), hashed)}
    assert results["script"].value is None and "hashes of the texts" in results["script"].line()
    assert results["confidence"].value is not None and not results["confidence"].moved


def test_thresholds_follow_the_in_domain_variation_and_the_classifiers_noise():
    draw = np.random.default_rng(2)
    results = run_checks(_reference(draw), _described(draw, 60))
    lengths = next(c for c in results if c.name == "text length (characters)")
    assert lengths.threshold >= 1.5 * lengths.in_domain > 0
    texts = next(c for c in results if c.name == "texts (domain classifier)")
    assert texts.threshold >= 3 * chance_auc_spread(60) > 0.1  # 20 texts a side a fold: an AUC of 0.6 is noise
    assert chance_auc_spread(2_000) < 0.01


def test_a_texts_script_is_the_one_most_of_its_letters_are_in():
    assert script("Привет, how are you? мир") == "CYRILLIC"
    assert script("a good film") == "LATIN"
    assert script("12 + 3 = 15 !") == "none"
    assert script("映画") == "CJK" and script("映画はとても良かった") == "HIRAGANA"


def test_the_models_representation_moves_where_the_words_do_not():
    """Texts of the same words whose representations moved (the model reads them as meaning something else): the
    representation check alone moves; an in-domain window's representations do not, and without the signature
    (an older export) there is no such check."""
    import zlib

    draw = np.random.default_rng(3)
    reference = _reference(draw)
    window = _described(draw, 400)
    shifted = set(window.texts)

    def embed(texts):
        rows = [np.random.default_rng(zlib.crc32(t.encode())).normal(size=16) for t in texts]
        return np.stack(rows) + 0.6 * np.array([[t in shifted] for t in texts])

    moved = {c.name for c in run_checks(reference, window, embed=embed) if c.moved}
    assert moved == {"representation (domain classifier)"}
    same = run_checks(reference, _described(draw, 400), embed=embed)
    representation = next(c for c in same if c.name == "representation (domain classifier)")
    assert not representation.moved and representation.value is not None, representation.line()
    assert "representation (domain classifier)" not in {c.name for c in run_checks(reference, window)}
