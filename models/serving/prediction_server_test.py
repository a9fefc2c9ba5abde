"""The server's batching and parsing on their own: a model call that fails on one request's text is bisected so
the others of its batch are answered; calls are bounded in bytes; clients take turns; bodies that would crash or
stall the loop, or could never fit, are refused with their reason. The running server (uvicorn, a real export) is
tested in tests/pipeline_e2e_test.py and tests/modernbert_e2e_test.py."""

from __future__ import annotations

import asyncio
import json

import pytest
import tensorflow as tf

from models.serving.batcher import Batcher, BatchLimits, NeverFits, Saturated
from models.serving.prediction_server import RequestError, limits_from, parse_request


class ChokesOnPoison:
    """A serving signature that fails the whole call when any row is b"poison" (as a graph op would on a text
    it cannot take), and records the rows of each call."""

    def __init__(self):
        self.calls: list[int] = []
        self.call_bytes: list[int] = []
        self.texts: list[list[bytes]] = []
        self.signatures = {"serving_default": self.serving_default}

    def serving_default(self, text: tf.Tensor) -> dict[str, tf.Tensor]:
        self.calls.append(int(tf.size(text)))
        self.call_bytes.append(int(tf.reduce_sum(tf.strings.length(text))))
        self.texts.append(text.numpy().tolist())
        if bool(tf.reduce_any(tf.equal(text, b"poison"))):
            raise tf.errors.InvalidArgumentError(None, None, "cannot take a poison text")
        return {"length": tf.strings.length(text)}


def test_a_failed_call_is_bisected_so_only_the_poison_request_fails():
    model = ChokesOnPoison()
    texts = [b"poison" if i in (3, 11) else b"x" * i for i in range(16)]

    async def scenario():
        batcher = Batcher(model, BatchLimits(batch_wait_s=0.2))
        asks = [batcher.submit("serving_default", {"text": [t]}, 1) for t in texts]
        return await asyncio.gather(*asks, return_exceptions=True)

    answers = asyncio.run(scenario())
    for i, answer in enumerate(answers):
        if i in (3, 11):
            assert isinstance(answer, tf.errors.InvalidArgumentError)
        else:
            assert answer == [{"length": i}]
    assert model.calls[0] == 16  # one call for all first, then halves down to the poison ones
    assert len(model.calls) < 2 * 16  # bisection, not a second call per request


def test_a_request_that_gave_up_is_not_computed_and_frees_its_queue_share():
    model = ChokesOnPoison()

    async def scenario():
        batcher = Batcher(model, BatchLimits(batch_wait_s=0.3))
        first = asyncio.create_task(batcher.submit("serving_default", {"text": [b"a"]}, 1))
        gone = asyncio.create_task(batcher.submit("serving_default", {"text": [b"b" * 1000]}, 1))
        await asyncio.sleep(0.05)
        gone.cancel()  # what asyncio.wait_for does at the request timeout
        await asyncio.sleep(0)
        queued = batcher.queued_rows, batcher.queued_bytes
        return await first, queued

    predictions, queued = asyncio.run(scenario())
    assert predictions == [{"length": 1}]
    assert queued == (1, 1)  # the cancelled request's row and 1,000 bytes left the counts at once
    assert model.calls == [1]


def test_the_queue_is_bounded_in_bytes_as_well_as_rows():
    async def scenario():
        batcher = Batcher(ChokesOnPoison(), BatchLimits(max_queued_bytes=100, batch_wait_s=0.2))
        first = asyncio.create_task(batcher.submit("serving_default", {"text": [b"a" * 80]}, 1))
        await asyncio.sleep(0)
        with pytest.raises(Saturated):
            await batcher.submit("serving_default", {"text": [b"b" * 80]}, 1)
        return await first

    assert asyncio.run(scenario()) == [{"length": 80}]


def test_a_request_larger_than_the_whole_queue_is_refused_as_never_fitting():
    async def scenario():
        batcher = Batcher(ChokesOnPoison(), BatchLimits(max_queued_rows=2, max_queued_bytes=100))
        with pytest.raises(NeverFits, match=r"3 rows .* more than the server ever queues \(2 rows"):
            await batcher.submit("serving_default", {"text": [b"a", b"b", b"c"]}, 3)
        with pytest.raises(NeverFits, match=r"101 bytes"):
            await batcher.submit("serving_default", {"text": [b"a" * 101]}, 1)

    asyncio.run(scenario())


def test_model_calls_are_bounded_in_bytes_and_a_large_request_takes_several():
    """Three requests of 1,500 bytes with calls of at most 4,000: two calls, not one of 4,500; a request of ten
    900-byte rows alone takes three calls of at most four rows; every row answered in order."""
    model = ChokesOnPoison()

    async def scenario():
        batcher = Batcher(model, BatchLimits(max_call_bytes=4000, batch_wait_s=0.2))
        asks = [batcher.submit("serving_default", {"text": [b"x" * 1500]}, 1) for _ in range(3)]
        together = await asyncio.gather(*asks)
        large = await batcher.submit("serving_default", {"text": [b"y" * 900] * 10}, 10)
        return together, large

    together, large = asyncio.run(scenario())
    assert together == [[{"length": 1500}]] * 3 and large == [{"length": 900}] * 10
    assert max(model.call_bytes) <= 4000 and model.calls == [2, 1, 4, 4, 2]


def test_clients_take_turns_so_one_clients_uploads_do_not_hold_another_back():
    """One client queues 45 requests, then another client one: the other's is answered by the second call, not
    after the first client's 45."""
    model = ChokesOnPoison()

    async def scenario():
        batcher = Batcher(model, BatchLimits(max_batch=1, batch_wait_s=0.1))
        uploads = [
            batcher.submit("serving_default", {"text": [f"upload {i}".encode()]}, 1, "10.0.0.1") for i in range(45)
        ]
        single = batcher.submit("serving_default", {"text": [b"single"]}, 1, "10.0.0.2")
        await asyncio.gather(*uploads, single)

    asyncio.run(scenario())
    assert len(model.texts) == 46
    assert model.texts.index([b"single"]) <= 1
    assert [t for t in model.texts if t != [b"single"]] == [[f"upload {i}".encode()] for i in range(45)]


def test_limits_are_set_by_their_names_and_an_unknown_one_is_refused():
    limits = limits_from({"max_batch": 8, "header_timeout_s": 3.0, "max_instances": 9, "read_timeout_s": None})
    assert (limits.batching.max_batch, limits.connections.header_timeout_s, limits.max_instances) == (8, 3.0, 9)
    assert limits.connections.read_timeout_s == 10.0
    with pytest.raises(TypeError, match="max_bach"):
        limits_from({"max_bach": 8})


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


@pytest.mark.parametrize(
    ("row", "reason"),
    [
        ({"b64": "bm90IGFuIGV4YW1wbGU="}, "example 0 is not a serialized tf.Example"),
        ({"b64": ""}, "example 0 must hold one string in its feature 'text'"),
    ],
)
def test_a_garbage_tf_example_is_its_own_requests_400(row, reason):
    """Refused before it joins a call: ParseExample would fail the whole call, costing its neighbours a bisection."""
    body = json.dumps({"signature_name": "serving_tf_example", "instances": [row]}).encode()
    with pytest.raises(RequestError, match=reason):
        parse_request(body, ("text",), 256)


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


def test_an_example_setting_its_text_twice_is_refused_before_it_joins_a_model_call():
    """Protobuf keeps the last of a oneof set twice (an int64_list, then a bytes_list), so the Example parses whole;
    TensorFlow's ParseExample fails the call on it, and every request sharing that call with it."""
    import base64

    ints = tf.train.Feature(int64_list=tf.train.Int64List(value=[7])).SerializeToString()
    texts = tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"a film"])).SerializeToString()
    entry = b"\x0a\x04text" + b"\x12" + bytes([len(ints + texts)]) + ints + texts
    example = b"\x0a" + bytes([len(entry) + 2]) + b"\x0a" + bytes([len(entry)]) + entry
    with pytest.raises(tf.errors.InvalidArgumentError):  # what the model call would meet
        tf.io.parse_example([example], {"text": tf.io.FixedLenFeature([], tf.string)})
    whole = tf.train.Example(features=tf.train.Features(feature={"text": tf.train.Feature(
        bytes_list=tf.train.BytesList(value=[b"a film"]))})).SerializeToString()  # fmt: skip
    for twice in (example, whole + whole):
        body = json.dumps({"signature_name": "serving_tf_example", "instances": [
            {"b64": base64.b64encode(whole).decode()}, {"b64": base64.b64encode(twice).decode()}]})  # fmt: skip
        with pytest.raises(RequestError, match=r"example 1 sets its feature 'text' more than once") as refused:
            parse_request(body.encode(), ("text",), 256)
        assert refused.value.status == 400
    one = {"signature_name": "serving_tf_example", "instances": [{"b64": base64.b64encode(whole).decode()}]}
    body = json.dumps(one)
    assert parse_request(body.encode(), ("text",), 256)[1] == {"examples": [whole]}
