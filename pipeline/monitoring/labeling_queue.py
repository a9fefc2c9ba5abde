"""`hftfx monitor --queue N`: the served texts most worth a person's label, as Label Studio tasks.

Worth labeling is uncertain (the model's two likeliest labels close) and novel (texts the domain classifier tells
from the training data), each in [0, 1], summed; one text is queued once, however often it was served. The file is
Label Studio's task import format (a JSON list of {"data": ..., "predictions": [...]}), the model's answer as a
pre-annotation, with the labeling config it is written for beside it (labeling-config.xml), so a project set up
with that config shows each text with the model's guess and the person corrects it. `hftfx label import` reads
Label Studio's export of it back.
"""

from __future__ import annotations

import json
from pathlib import Path
from xml.sax.saxutils import quoteattr

import numpy as np

from models.names import TEXT_FEATURE, TEXT_PAIR_FEATURE
from pipeline.monitoring import domain_classifier
from pipeline.monitoring.descriptors import Described

FROM_NAME, TO_NAME = "label", TEXT_FEATURE  # the labeling config's control and the text it labels
CONFIG_FILE = "labeling-config.xml"


def uncertainty(probabilities: np.ndarray) -> np.ndarray:
    """1 - (first - second probability): 1 where the two likeliest labels tie, 0 where one is certain."""
    ordered = np.sort(probabilities, axis=1)
    return 1.0 - (ordered[:, -1] - ordered[:, -2])


def novelty(reference_texts, texts, seed: int = 0) -> np.ndarray:
    """Each text's chance of being served rather than training data, by the domain classifier fit on a sample of
    each side."""
    features, sides = domain_classifier.sides(reference_texts, texts, seed)
    with domain_classifier.quiet_solver():
        model = domain_classifier.classifier().fit(features, sides)
    return model.predict_proba(domain_classifier.vectorizer().transform(list(texts)))[:, 1]


def _key(text: str) -> str:
    return " ".join(text.casefold().split())


def pick(served: Described, reference_texts, count: int) -> list[int]:
    """The rows of the `count` texts most worth labeling, best first, each text once."""
    score = uncertainty(served.probabilities) + novelty(reference_texts, served.texts)
    picked, seen = [], set()
    for row in np.argsort(-score, kind="stable"):
        key = _key(served.texts[row])
        if key in seen:
            continue
        seen.add(key)
        picked.append(int(row))
        if len(picked) == count:
            break
    return picked


def tasks(rows: list[dict], picked: list[int], served: Described, label_names, version: str) -> list[dict]:
    """Label Studio tasks of the picked rows, the model's label as a prediction scored by its confidence."""
    worth = uncertainty(served.probabilities)
    out = []
    for row in picked:
        logged = rows[row]
        data = {TEXT_FEATURE: logged[TEXT_FEATURE], "served_at": logged["time"], "model_version": version}
        if TEXT_PAIR_FEATURE in logged:
            data[TEXT_PAIR_FEATURE] = logged[TEXT_PAIR_FEATURE]
        answer = label_names[int(np.argmax(served.probabilities[row]))]
        region = {"from_name": FROM_NAME, "to_name": TO_NAME, "type": "choices", "value": {"choices": [answer]}}
        confidence = float(np.max(served.probabilities[row]))
        prediction = {"model_version": version, "score": round(confidence, 4), "result": [region]}
        out.append({"data": {**data, "uncertainty": round(float(worth[row]), 4)}, "predictions": [prediction]})
    return out


def labeling_config(label_names) -> str:
    """The Label Studio labeling config the tasks are written for: the text, one choice a label."""
    choices = "".join(f"\n    <Choice value={quoteattr(name)}/>" for name in label_names)
    return (
        f'<View>\n  <Text name="{TO_NAME}" value="${TEXT_FEATURE}"/>\n'
        f'  <Choices name="{FROM_NAME}" toName="{TO_NAME}" choice="single" showInline="true">{choices}\n'
        "  </Choices>\n</View>\n"
    )


def write_queue(path: str | Path, queued: list[dict], label_names) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(queued, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    (path.parent / CONFIG_FILE).write_text(labeling_config(label_names), encoding="utf-8")
    return path
