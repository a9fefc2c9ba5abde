"""Telling served texts from training texts: logistic regression on hashed character 2-4-grams (Evidently's domain
classifier for text), or on the model's representations of them. Hashing needs no vocabulary fit, so a text never
seen costs nothing more than one seen."""

from __future__ import annotations

import contextlib
import warnings

import numpy as np

ROWS = 2_000  # each side a classifier is fit on, at most


def vectorizer():
    from sklearn.feature_extraction.text import HashingVectorizer

    return HashingVectorizer(analyzer="char_wb", ngram_range=(2, 4), n_features=2**18, alternate_sign=False)


def sides(reference, window, seed: int = 0, most: int = ROWS):
    """(features, 0/1 side of each) of at most `most` texts a side, drawn without replacement: a text twice would be
    recognized, not told apart."""
    rows = min(len(reference), len(window), most)
    draw = np.random.default_rng(seed)
    ref = [reference[i] for i in draw.choice(len(reference), rows, replace=False)]
    new = [window[i] for i in draw.choice(len(window), rows, replace=False)]
    return vectorizer().transform(ref + new), np.array([0] * rows + [1] * rows)


def classifier():
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression(max_iter=300)


def dense_classifier():
    """The same classifier on dense vectors (the model's representations): standardized first, as their
    dimensions' scales differ."""
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    return make_pipeline(StandardScaler(), classifier())


@contextlib.contextmanager
def quiet_solver():
    """scikit-learn 1.5's lbfgs passes SciPy an option SciPy 1.18 no longer knows: a warning per fit, no effect."""
    import scipy.optimize

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=scipy.optimize.OptimizeWarning)
        yield
