"""The server's batching and parsing on their own: a model call that fails on one request's text is bisected so
the others of its batch are answered; bodies that would crash or stall the loop are refused with their reason.
The running server (uvicorn, a real export) is tested in tests/pipeline_e2e_test.py."""

from __future__ import annotations

import asyncio
import json

import pytest
import tensorflow as tf

from models.serving.prediction_server import Batcher, RequestError, ServerLimits, parse_request


class ChokesOnPoison:
    """A serving signature that fails the whole call when any row is b"poison" (as a graph op would on a text
    it cannot take), and records the rows of each call."""

    def __init__(self):
        self.calls: list[int] = []
        self.signatures = {"serving_default": self.serving_default}

    def serving_default(self, text: tf.Tensor) -> dict[str, tf.Tensor]:
        self.calls.append(int(tf.size(text)))
        if bool(tf.reduce_any(tf.equal(text, b"poison"))):
            raise tf.errors.InvalidArgumentError(None, None, "cannot take a poison text")
        return {"length": tf.strings.length(text)}


def test_a_failed_call_is_bisected_so_only_the_poison_request_fails():
    model = ChokesOnPoison()
    texts = [b"poison" if i in (3, 11) else b"x" * i for i in range(16)]

    async def scenario():
        batcher = Batcher(model, ServerLimits(batch_wait_s=0.2))
        asks = [batcher.submit("serving_default", {"text": [t]}, 1) for t in texts]
        return await asyncio.gather(*asks, return_exceptions=True)

    answers = asyncio.run(scenario())
    for i, answer in enumerate(answers):
        if i in (3, 11):
            assert isinstance(answer, tf.errors.InvalidArgumentError)
        else:
            predictions, rows = answer
            assert predictions == [{"length": i}]
            assert rows < 16  # answered by a smaller call than the one that failed
    assert model.calls[0] == 16  # one call for all first, then halves down to the poison ones
    assert len(model.calls) < 2 * 16  # bisection, not a second call per request


def test_a_request_that_gave_up_is_not_computed_and_frees_its_queue_share():
    model = ChokesOnPoison()

    async def scenario():
        batcher = Batcher(model, ServerLimits(batch_wait_s=0.3))
        first = asyncio.create_task(batcher.submit("serving_default", {"text": [b"a"]}, 1))
        gone = asyncio.create_task(batcher.submit("serving_default", {"text": [b"b" * 1000]}, 1))
        await asyncio.sleep(0.05)
        gone.cancel()  # what asyncio.wait_for does at the request timeout
        await asyncio.sleep(0)
        queued = batcher.queued_rows, batcher.queued_bytes
        return await first, queued

    (predictions, rows), queued = asyncio.run(scenario())
    assert predictions == [{"length": 1}] and rows == 1
    assert queued == (1, 1)  # the cancelled request's row and 1,000 bytes left the counts at once
    assert model.calls == [1]


def test_the_queue_is_bounded_in_bytes_as_well_as_rows():
    from models.serving.prediction_server import Saturated

    async def scenario():
        batcher = Batcher(ChokesOnPoison(), ServerLimits(max_queued_bytes=100, batch_wait_s=0.2))
        first = asyncio.create_task(batcher.submit("serving_default", {"text": [b"a" * 80]}, 1))
        await asyncio.sleep(0)
        with pytest.raises(Saturated):
            await batcher.submit("serving_default", {"text": [b"b" * 80]}, 1)
        return await first

    assert asyncio.run(scenario())[0] == [{"length": 80}]


@pytest.mark.parametrize(
    ("body", "status", "reason"),
    [
        (b'{"instances": ["\\ud83d"]}', 400, "instance 0 is not valid Unicode"),
        (b'{"instances": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", 400, "nests arrays or objects too deeply"),
        (json.dumps({"instances": ["a"] * 300}).encode(), 413, "300 instances in one request; at most 256"),
        (json.dumps({"inputs": {"text": ["a"] * 300}}).encode(), 413, "at most 256"),
        (b"{not json", 400, "is not JSON"),
    ],
)
def test_bodies_the_model_must_never_see_are_refused_with_their_reason(body, status, reason):
    with pytest.raises(RequestError) as refused:
        parse_request(body, ("text",), 256)
    assert refused.value.status == status and reason in str(refused.value)


def test_pair_rows_are_checked_for_unicode_too():
    with pytest.raises(RequestError, match="instance 1 is not valid Unicode"):
        parse_request(
            json.dumps({"instances": [{"text": "a", "text_pair": "b"}, {"text": "a", "text_pair": "\udc00"}]}).encode(),
            ("text", "text_pair"),
            256,
        )


def test_texts_reach_the_model_as_utf8_bytes():
    signature, columns = parse_request(json.dumps({"instances": ["café", {"b64": "/w=="}]}).encode(), ("text",), 256)
    assert signature == "serving_default"
    assert columns == {"text": ["café".encode(), b"\xff"]}
