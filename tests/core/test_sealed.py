"""Sealed payloads and results (core.sealed, core.payload): round trips, and the clear errors
for a missing, wrong or malformed CLUSTER_MANAGER_PAYLOAD_KEY."""

from __future__ import annotations

import base64
import json
import secrets
from pathlib import Path

import pytest

from cluster_manager.core.errors import ClusterManagerError
from cluster_manager.core.models import Mode, RunRequest
from cluster_manager.core.payload import (
    PayloadError,
    decode_payload,
    encode_payload,
    open_payload,
    open_result,
    seal_result,
)
from cluster_manager.core.sealed import (
    KEY_ENV,
    PREFIX,
    SealError,
    generate_key,
    is_sealed,
    open_sealed,
    parse_key,
    seal,
    take_payload_key,
)
from cluster_manager.core.task import load_task
from cluster_manager.settings import load_settings
from tests.conftest import CORRECT, make_request, write_task

KEY = generate_key()


@pytest.fixture
def request_(tmp_path: Path) -> RunRequest:
    task = load_task(write_task(tmp_path / "identity"))
    return make_request(task, CORRECT, Mode.LEADERBOARD, seed=1_739_184_265)


@pytest.mark.parametrize("size", [0, 1, 1000, 100_000])
def test_sealed_bytes_open_to_what_was_sealed(size: int):
    data = secrets.token_bytes(size)
    text = seal(data, KEY, context="result")
    assert text.startswith(f"{PREFIX}result:") and is_sealed(text)
    assert open_sealed(text, KEY, context="result") == data
    assert open_sealed(text, parse_key(KEY), context="result") == data  # bytes or text


def test_the_same_data_seals_differently_each_time():
    assert seal(b"seed 42", KEY) != seal(b"seed 42", KEY)


def test_a_sealed_payload_round_trips(request_: RunRequest):
    text = encode_payload(request_, KEY)
    assert is_sealed(text)
    assert decode_payload(text, KEY) == request_


def test_a_plain_payload_still_round_trips_with_or_without_a_key(request_: RunRequest):
    text = encode_payload(request_)
    assert not is_sealed(text)
    assert decode_payload(text) == request_ == decode_payload(text, KEY)


def test_sealing_adds_a_few_dozen_characters(request_: RunRequest):
    # What the launcher's size check measures; GitHub takes at most 65,535 characters.
    added = len(encode_payload(request_, KEY)) - len(encode_payload(request_))
    assert 0 < added <= 64


def test_a_result_round_trips():
    text = json.dumps({"passed": True, "message": "fine"})
    sealed = seal_result(text, KEY)
    assert is_sealed(sealed) and "fine" not in sealed
    assert open_result(sealed, KEY) == text
    assert seal_result(text, None) == text == open_result(text, None)  # no key: as it is


@pytest.mark.reliability(
    "Access",
    "opening a sealed payload with another CLUSTER_MANAGER_PAYLOAD_KEY",
    "a SealError saying it was sealed with another CLUSTER_MANAGER_PAYLOAD_KEY",
)
def test_a_wrong_key_is_a_clear_error(request_: RunRequest, record_property):
    with pytest.raises(SealError, match="sealed with another CLUSTER_MANAGER_PAYLOAD_KEY") as err:
        decode_payload(encode_payload(request_, KEY), generate_key())
    record_property("observed", str(err.value))


@pytest.mark.reliability(
    "Access",
    "opening a sealed payload where CLUSTER_MANAGER_PAYLOAD_KEY is not set",
    "a SealError naming CLUSTER_MANAGER_PAYLOAD_KEY",
)
def test_a_missing_key_is_a_clear_error(request_: RunRequest, record_property):
    with pytest.raises(SealError, match="CLUSTER_MANAGER_PAYLOAD_KEY is not set") as err:
        decode_payload(encode_payload(request_, KEY))
    record_property("observed", str(err.value))


@pytest.mark.parametrize(
    ("alter", "message"),
    [
        (lambda t: t[:-8] + ("A" if t[-8] != "A" else "B") + t[-7:], "sealed with another"),
        (lambda t: t[: len(PREFIX) + 20], "truncated"),
        (lambda t: t + "!", "not sealed text"),
        (lambda t: t.replace("v1:", "v9:"), "in a version other than"),
        (lambda t: t.replace(":payload:", ":result:"), "sealed result was given where a pay"),
    ],
    ids=["flipped", "truncated", "garbage", "version", "relabelled"],
)
@pytest.mark.reliability(
    "Access",
    "a sealed payload altered on its way: a flipped character, cut short, other bytes, "
    "another version, relabelled as a result",
    "a SealError, never a request built from altered bytes",
)
def test_altered_sealed_text_is_refused(request_: RunRequest, alter, message, record_property):
    with pytest.raises(SealError, match=message) as err:
        decode_payload(alter(encode_payload(request_, KEY)), KEY)
    record_property("observed", str(err.value))


def test_a_sealed_payload_is_no_result(request_: RunRequest):
    with pytest.raises(SealError, match="a sealed payload was given where a result belongs"):
        open_result(encode_payload(request_, KEY), KEY)


def test_the_label_is_bound_into_the_seal(request_: RunRequest):
    relabelled = encode_payload(request_, KEY).replace(":payload:", ":result:")
    with pytest.raises(SealError, match=r"sealed with another .* or altered since"):
        open_result(relabelled, KEY)


def test_with_a_key_a_plain_result_is_refused():
    with pytest.raises(SealError, match="not sealed with CLUSTER_MANAGER_PAYLOAD_KEY"):
        open_result('{"passed": true}', KEY)


def test_a_plain_payload_that_is_not_base64_stays_a_payload_error():
    with pytest.raises(PayloadError, match="unreadable payload"):
        decode_payload("not base64 at all!", KEY)


def test_keys_in_either_base64_alphabet_with_or_without_padding_are_read():
    raw = secrets.token_bytes(32)
    for text in (
        base64.urlsafe_b64encode(raw).decode().rstrip("="),
        base64.b64encode(raw).decode(),  # `openssl rand -base64 32`
        f"  {base64.urlsafe_b64encode(raw).decode()}\n",
    ):
        assert parse_key(text) == raw
    assert len(parse_key(generate_key())) == 32


@pytest.mark.parametrize(
    ("text", "message"),
    [("not*base64", "is not base64"), ("aGVsbG8", "holds 5 bytes, not 32")],
)
def test_a_malformed_key_is_a_clear_error(text: str, message: str):
    with pytest.raises(SealError, match=f"{KEY_ENV} {message}.*secrets.token_urlsafe"):
        parse_key(text)


def test_taking_the_key_removes_it_from_the_environment():
    env = {KEY_ENV: KEY, "PATH": "/bin"}
    assert take_payload_key(env) == parse_key(KEY)
    assert env == {"PATH": "/bin"}
    assert take_payload_key(env) is None  # unset: plain payloads only


def test_a_malformed_key_is_removed_from_the_environment_before_the_error():
    env = {KEY_ENV: "short"}
    with pytest.raises(SealError, match=KEY_ENV):
        take_payload_key(env)
    assert env == {}


def test_the_runner_side_opens_the_payload_and_seals_its_result(request_: RunRequest):
    """What `harness.runner.main` does with a payload file and the key in its environment."""
    env = {KEY_ENV: KEY}
    key = take_payload_key(env)
    assert KEY_ENV not in env
    request, result_key = open_payload(encode_payload(request_, KEY), key)
    assert request == request_
    result = json.dumps({"passed": True})
    assert open_result(seal_result(result, result_key), KEY) == result


def test_a_plain_request_gets_a_plain_result_even_where_a_key_is_set(request_: RunRequest):
    # The local launcher's runner inherits the bot's environment, key and all.
    request, result_key = open_payload(encode_payload(request_), parse_key(KEY))
    assert request == request_ and result_key is None
    assert seal_result('{"passed": true}', result_key) == '{"passed": true}'


def test_settings_read_the_key_and_keep_it_out_of_repr():
    settings = load_settings({KEY_ENV: KEY}, dotenv_path=None)
    assert settings.payload_key == KEY
    assert KEY not in repr(settings)
    assert load_settings({}, dotenv_path=None).payload_key is None


def test_settings_refuse_a_malformed_key_by_name():
    with pytest.raises(ClusterManagerError, match=f"{KEY_ENV} holds 5 bytes"):
        load_settings({KEY_ENV: "aGVsbG8"}, dotenv_path=None)
