"""`hftfx serve-check`: a pushed model checked as TF Serving would take it, line by line as it goes.

Its ops against what TF Serving provides, its signatures, its warm-up file replayed, then requests in the
REST shapes (raw texts to serving_default, a tf.Example to serving_tf_example) answered through
`tf_serving.predict`, the code path `hftfx serve` uses.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

from models.names import EXAMPLES_INPUT, SERVING_TF_EXAMPLE
from models.serving import tf_serving
from models.serving.pushed_model import load_serving_model, resolve_version_dir

CHECK_TEXTS = ("a warm, funny and moving film", "a tedious, joyless mess")


def default_check_requests(text_inputs: Sequence[str]) -> list[dict]:
    """A raw-text request and a tf.Example request, shaped for the model's text inputs (one, or a pair)."""
    if len(text_inputs) == 1:
        instances = list(CHECK_TEXTS)
    else:
        instances = [dict(zip(text_inputs, (text, CHECK_TEXTS[0]), strict=True)) for text in CHECK_TEXTS]
    example = {name: CHECK_TEXTS[0] for name in text_inputs}
    return [{"instances": instances}, {"signature_name": SERVING_TF_EXAMPLE, EXAMPLES_INPUT: [example]}]


def read_request(request: str) -> dict:
    """A REST body given as JSON text or as the path of a JSON file. JSON text is never asked to be a path: one
    longer than a file name can be (a long document) made the file check fail with OSError."""
    return json.loads(request if request.lstrip().startswith("{") else Path(request).read_text())


def serve_check(
    model_path: str | Path, requests: list[dict] | None = None, echo: Callable[[str], None] = print
) -> bool:
    """Whether the model loads and answers; each step is echoed as it completes (loading takes seconds)."""
    version_dir = resolve_version_dir(model_path)
    ops = tf_serving.graph_ops(str(version_dir))
    text_ops = sorted(op for op in ops if not tf_serving.is_core_op(op))
    unsupported = tf_serving.unsupported_ops(ops)
    echo(f"model:      {version_dir}")
    echo(f"ops:        {len(ops)} op types; tensorflow_text ops {text_ops}")
    if unsupported:
        echo(f"FAIL: ops TF Serving does not provide: {unsupported}")
        return False
    _, model = load_serving_model(version_dir)
    echo(f"signatures: {sorted(model.signatures)}")
    warmup = Path(version_dir) / tf_serving.WARMUP_FILE
    if warmup.exists():
        echo(f"warm-up:    replayed {tf_serving.replay_warmup_requests(model, str(version_dir))} requests")
    else:
        echo(f"warm-up:    none ({tf_serving.WARMUP_FILE} missing)")
    # The built-in requests' answers are shortened for the eye; a request the user gave is answered whole.
    shown = None if requests else 600
    for request in requests or default_check_requests(tf_serving.text_inputs(model)):
        echo(f"request:    {json.dumps(request)[:200]}")
        try:
            echo(f"response:   {json.dumps(tf_serving.predict(model, request))[:shown]}")
        except tf_serving.BadRequestError as error:
            echo(f"400:        {error}")
            return False
    return True
