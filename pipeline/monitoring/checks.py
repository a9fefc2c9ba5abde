"""Has served traffic moved away from the data the model learned from? Each check is one distance between a reference
and a window, and its threshold is the same distance between two samples of the training data's own splits (the
train split's texts against the eval split's, or two halves of the eval split for the model's answers), so a window
from the same source as the training data does not alarm whatever its size.

Distances: TFDV's drift comparators (L-infinity for categories, Jensen-Shannon for numbers), as the span drift check
uses; and for the texts themselves a domain classifier (Evidently's method): how well character n-grams tell the
window from the reference, as a cross-validated AUC above 0.5; and the same classifier on the model's own
representation of each text (its encoder's mean hidden state), which moves when the texts mean other things even
in familiar words.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from pipeline.monitoring import domain_classifier
from pipeline.monitoring.descriptors import Described

# Thresholds are the in-domain distance times MARGIN, and never below the floor: a distance this small is noise
# whatever the samples said. At 2, a two-class label mix alarms about 3 standard deviations out.
MARGIN = 2.0
IN_DOMAIN_DRAWS = 3  # bootstrap samples of the held-out split the in-domain distance is the largest of
FOLDS = 3  # of its cross-validation
CHANCE_SPREADS = 3  # the domain classifier's distance alarms only past this many of its spreads under the null


@dataclasses.dataclass(frozen=True)
class CheckSpec:
    name: str  # what a person reads
    feature: str  # the column it measures
    measure: str  # "L-infinity", "Jensen-Shannon" or AUC
    floor: float
    reads_texts: bool = False  # needs the texts (or their tokens), not only what was served
    of_answers: bool = False  # measures the model's answers: its reference is the held-out split


AUC = "AUC - 0.5"  # the domain classifiers' measure

CHECKS = (
    CheckSpec("text length (characters)", "chars", "Jensen-Shannon", 0.03),
    CheckSpec("tokens per text", "tokens", "Jensen-Shannon", 0.03, reads_texts=True),
    CheckSpec("share of unknown tokens", "unknown_share", "Jensen-Shannon", 0.03, reads_texts=True),
    CheckSpec("script", "script", "L-infinity", 0.05, reads_texts=True),
    CheckSpec("predicted label mix", "predicted_label", "L-infinity", 0.05, of_answers=True),
    CheckSpec("confidence", "confidence", "Jensen-Shannon", 0.03, of_answers=True),
    CheckSpec("texts (domain classifier)", "texts", AUC, 0.05, reads_texts=True),
    CheckSpec("representation (domain classifier)", "representation", AUC, 0.05, reads_texts=True),
)


@dataclasses.dataclass(frozen=True)
class CheckResult:
    name: str
    measure: str
    value: float | None  # None: not measurable on this window (only hashes of the texts were logged)
    threshold: float
    in_domain: float

    @property
    def moved(self) -> bool:
        return self.value is not None and self.value > self.threshold

    def line(self) -> str:
        if self.value is None:
            return f"  {self.name:<34} not measured: the log holds hashes of the texts, not the texts"
        verdict = "MOVED" if self.moved else "ok"
        return f"  {self.name:<34} {self.measure} {self.value:.3f} (threshold {self.threshold:.3f})  {verdict}"


def frame(described: Described, label_names):
    """The descriptors TFDV profiles, one row per text."""
    import pandas as pd

    columns = {"chars": described.chars}
    if described.tokens is not None:
        columns |= {"tokens": described.tokens, "unknown_share": described.unknown_share, "script": described.scripts}
    if len(described.probabilities):
        columns["predicted_label"] = [label_names[i] for i in described.probabilities.argmax(axis=1)]
        columns["confidence"] = described.probabilities.max(axis=1)
    return pd.DataFrame(columns)


def tfdv_distances(reference, window, specs) -> dict[str, float]:
    """Each spec's TFDV drift comparator distance between two frames."""
    import tensorflow_data_validation as tfdv

    features = [s for s in specs if s.feature in reference.columns and s.feature in window.columns]
    if not features:
        return {}
    previous = tfdv.generate_statistics_from_dataframe(reference[[s.feature for s in features]])
    current = tfdv.generate_statistics_from_dataframe(window[[s.feature for s in features]])
    schema = tfdv.infer_schema(previous)
    for spec in features:
        comparator = tfdv.get_feature(schema, spec.feature).drift_comparator
        if spec.measure == "L-infinity":
            comparator.infinity_norm.threshold = 1.0
        else:
            comparator.jensen_shannon_divergence.threshold = 1.0
    anomalies = tfdv.validate_statistics(current, schema, previous_statistics=previous)
    measured = {info.path.step[0]: m.value for info in anomalies.drift_skew_info for m in info.drift_measurements}
    return {spec.feature: float(measured.get(spec.feature, 0.0)) for spec in features}


def domain_distance(
    reference: tuple[str, ...], window: tuple[str, ...], seed: int = 0, most: int = domain_classifier.ROWS
) -> float:
    """How well the domain classifier tells the window's texts from the reference's: cross-validated AUC - 0.5, on at
    most `most` texts a side, drawn without replacement (a text in two folds would be recognized, not told apart)."""
    from sklearn.model_selection import cross_val_score

    if min(len(reference), len(window), most) < 20:
        return 0.0
    features, sides = domain_classifier.sides(reference, window, seed, most)
    with domain_classifier.quiet_solver():
        scores = cross_val_score(domain_classifier.classifier(), features, sides, cv=FOLDS, scoring="roc_auc")
    return max(0.0, float(np.mean(scores)) - 0.5)


def representation_distance(reference: np.ndarray, window: np.ndarray, seed: int = 0) -> float:
    """How well a classifier tells the window's representations from the reference's: cross-validated AUC - 0.5
    (rows drawn without replacement, as domain_distance's)."""
    from sklearn.model_selection import cross_val_score

    rows = min(len(reference), len(window), domain_classifier.ROWS)
    if rows < 20:
        return 0.0
    draw = np.random.default_rng(seed)
    sample = [side[draw.choice(len(side), rows, replace=False)] for side in (reference, window)]
    features = np.concatenate(sample)
    sides = np.array([0] * rows + [1] * rows)
    with domain_classifier.quiet_solver():
        scores = cross_val_score(domain_classifier.dense_classifier(), features, sides, cv=FOLDS, scoring="roc_auc")
    return max(0.0, float(np.mean(scores)) - 0.5)


def representation_distances(reference: Reference, window: Described, embed, seed: int = 0) -> tuple[float, float]:
    """(the window's representation distance from the train split's, the largest of IN_DOMAIN_DRAWS held-out
    samples' of the window's size): `embed(texts)` is the served model's representation signature, asked for at
    most domain_classifier.ROWS texts a side."""
    rows = min(len(window), domain_classifier.ROWS)
    draw = np.random.default_rng(seed)

    def embedded(texts: tuple[str, ...]) -> np.ndarray:
        picked = draw.choice(len(texts), min(rows, len(texts)), replace=False)
        return embed([texts[i] for i in picked])

    train, served, pool = (embedded(d.texts) for d in (reference.train, window, reference.held_out_other))
    in_domain = max(representation_distance(train, pool, seed + turn) for turn in range(IN_DOMAIN_DRAWS))
    return representation_distance(train, served, seed), in_domain


def chance_auc_spread(rows: int) -> float:
    """The standard deviation of the domain classifier's distance when both sides come from one source: the AUC
    of a fold under the null (Mann-Whitney's, with `rows` / FOLDS texts a side), averaged over FOLDS folds."""
    side = max(min(rows, domain_classifier.ROWS) // FOLDS, 1)
    return float(np.sqrt((2 * side + 1) / (12 * side**2)) / np.sqrt(FOLDS))


def distances(reference: Described, window: Described, label_names, specs=CHECKS) -> dict[str, float]:
    """Every spec's distance between two described samples (those the window can be measured on)."""
    measured = tfdv_distances(frame(reference, label_names), frame(window, label_names), specs)
    if any(s.feature == "texts" for s in specs) and reference.texts is not None and window.texts is not None:
        measured["texts"] = domain_distance(reference.texts, window.texts)
    return measured


def _tfdv_specs(of_answers: bool) -> list[CheckSpec]:
    return [s for s in CHECKS if s.of_answers == of_answers and s.feature != "texts"]


@dataclasses.dataclass(frozen=True)
class Reference:
    """The training data as the served model sees it: a train-split sample (what the texts are compared with) and
    the eval split halved (what the answers are compared with, and how far two in-domain samples lie apart)."""

    train: Described
    held_out: Described  # eval split, first half: the answers' reference
    held_out_other: Described  # eval split, second half: in-domain windows are drawn from it
    label_names: tuple[str, ...]

    def references(self, spec: CheckSpec) -> Described:
        return self.held_out if spec.of_answers else self.train


def in_domain_distances(reference: Reference, window_rows: int, seed: int = 0) -> dict[str, float]:
    """For each check, the largest distance of IN_DOMAIN_DRAWS held-out samples the window's size from its
    reference: the training data's own split-to-split variation. Drawn with replacement, so a window larger than
    the held-out split is matched in size, and a sample of nearly all of it still varies as a new one would."""
    draw = np.random.default_rng(seed)
    pool = reference.held_out_other
    largest: dict[str, float] = {}
    for turn in range(IN_DOMAIN_DRAWS):
        sample = pool.take(draw.choice(len(pool), window_rows, replace=True))
        for of_answers in (False, True):
            base = reference.held_out if of_answers else reference.train
            for feature, value in distances(base, sample, reference.label_names, _tfdv_specs(of_answers)).items():
                largest[feature] = max(largest.get(feature, 0.0), value)
        if reference.train.texts is not None and pool.texts is not None:
            texts = domain_distance(reference.train.texts, pool.texts, seed + turn, most=window_rows)
            largest["texts"] = max(largest.get("texts", 0.0), texts)
    return largest


def run_checks(reference: Reference, window: Described, seed: int = 0, embed=None) -> list[CheckResult]:
    """Every check of the window against the reference, with its threshold from the in-domain variation; the
    representation check needs `embed` (the served model's representation signature; None: an export without it,
    and no such check)."""
    in_domain = in_domain_distances(reference, len(window), seed)
    measured: dict[str, float] = {}
    for of_answers in (False, True):
        specs = [s for s in CHECKS if s.of_answers == of_answers]
        base = reference.held_out if of_answers else reference.train
        measured |= distances(base, window, reference.label_names, specs)
    if embed is not None and window.texts is not None:
        measured["representation"], in_domain["representation"] = representation_distances(
            reference, window, embed, seed
        )
    results = []
    for spec in CHECKS:
        if spec.feature == "representation" and embed is None:
            continue
        noise = in_domain.get(spec.feature, 0.0)
        floor = spec.floor
        if spec.measure == AUC:  # a small window's AUC is noisy whatever the held-out split said
            floor = max(floor, CHANCE_SPREADS * chance_auc_spread(len(window)))
        value = measured.get(spec.feature)
        results.append(CheckResult(spec.name, spec.measure, value, max(floor, MARGIN * noise), noise))
    return results
