"""Creating plants: the 200 answer without the id, the stored item, retries, conflicts."""

import json
from datetime import UTC, datetime

import pytest
from helpers import I64_MAX, I64_MIN, MAX_BODY_BYTES, assert_error, assert_json, fresh_id, header


def test_a_new_plant_with_a_tag_is_stored_and_answered_without_its_id(api):
    plant_id, started = fresh_id(), datetime.now(UTC)
    response = api.call(body={"id": plant_id, "name": "Monstera deliciosa", "tag": "aroid"})
    assert_json(response, 200, {"name": "Monstera deliciosa", "tag": "aroid"})
    assert response.content == b'{"name":"Monstera deliciosa","tag":"aroid"}'
    api.assert_stored(plant_id, "Monstera deliciosa", "aroid", after=started)


def test_a_new_plant_without_a_tag_has_no_tag_in_the_answer_or_the_item(api):
    plant_id = fresh_id()
    assert_json(api.call(body={"id": plant_id, "name": "Boston fern"}), 200, {"name": "Boston fern"})
    api.assert_stored(plant_id, "Boston fern")


def test_a_retry_with_the_same_body_answers_the_same_200_and_writes_nothing(api):
    plant_id = fresh_id()
    body = {"id": plant_id, "name": "Aloe vera", "tag": "succulent"}
    first = api.call(body=body)
    assert_json(first, 200, {"name": "Aloe vera", "tag": "succulent"})
    item = api.assert_stored(plant_id, "Aloe vera", "succulent")
    for _ in range(2):
        again = api.call(body=body)
        assert_json(again, 200, {"name": "Aloe vera", "tag": "succulent"})
        assert again.content == first.content
        assert header(again, "x-request-id") != header(first, "x-request-id")
        assert api.stored_item(plant_id) == item, "a retry must not write (created_at changed)"
    # The same plant without a tag, retried.
    plant_id = fresh_id()
    assert_json(api.call(body={"id": plant_id, "name": "Fern"}), 200, {"name": "Fern"})
    item = api.stored_item(plant_id)
    assert_json(api.call(body={"id": plant_id, "name": "Fern"}), 200, {"name": "Fern"})
    assert api.stored_item(plant_id) == item


CONFLICTS = [  # (label, stored, sent)
    ("another name", {"name": "Monstera", "tag": "aroid"}, {"name": "Philodendron", "tag": "aroid"}),
    ("another tag", {"name": "Monstera", "tag": "aroid"}, {"name": "Monstera", "tag": "climber"}),
    ("the tag left out", {"name": "Monstera", "tag": "aroid"}, {"name": "Monstera"}),
    ("a tag added", {"name": "Monstera"}, {"name": "Monstera", "tag": "aroid"}),
    ("a name differing only in case", {"name": "Monstera"}, {"name": "monstera"}),
    ("a name with a trailing space", {"name": "Monstera"}, {"name": "Monstera "}),
]


@pytest.mark.parametrize("stored, sent", [case[1:] for case in CONFLICTS], ids=[case[0] for case in CONFLICTS])
def test_the_same_id_with_different_content_is_a_409_and_the_stored_plant_is_unchanged(api, stored, sent):
    plant_id = fresh_id()
    assert api.call(body={"id": plant_id, **stored}).status_code == 200
    item = api.stored_item(plant_id)
    response = api.call(body={"id": plant_id, **sent})
    assert_error(response, 409, 40901, f"a different plant with id {plant_id} already exists")
    assert api.stored_item(plant_id) == item, "the stored plant must not change"


EXACT = [  # (label, name, tag)
    ("Unicode and emoji", "🌱 Sämling", "多肉植物"),
    ("spaces around the name are kept", "  Fern  ", " x "),
    ("256 characters of 4 bytes each", "🌿" * 256, "🌵" * 64),
    ("a single character", "a", "b"),
    ("C1 controls and NBSP inside text are allowed", "a\u0085b\u00a0c", "d\u0080e"),
    ("quotes and backslashes", 'say "hi" \\ bye', "a/b"),
]


@pytest.mark.parametrize("name, tag", [case[1:] for case in EXACT], ids=[case[0] for case in EXACT])
def test_names_and_tags_are_stored_exactly_as_sent(api, name, tag):
    plant_id = fresh_id()
    assert_json(api.call(body={"id": plant_id, "name": name, "tag": tag}), 200, {"name": name, "tag": tag})
    api.assert_stored(plant_id, name, tag)


# The largest id as in openapi.yaml's example `largestId`, so that
# schemathesis's example later is an idempotent retry.
@pytest.mark.parametrize("plant_id, name", [(I64_MAX, "🌱 Sämling"), (I64_MIN, "Most negative")])
def test_the_extreme_int64_ids_are_accepted(api, plant_id, name):
    response = api.call(body=f'{{"id": {plant_id}, "name": {json.dumps(name)}}}')
    assert_json(response, 200, {"name": name})
    api.assert_stored(plant_id, name)


@pytest.mark.parametrize("content_type", ["application/json; charset=utf-8", "Application/JSON;charset=UTF-8"])
def test_a_json_content_type_with_parameters_is_accepted(api, content_type):
    plant_id = fresh_id()
    assert_json(api.call(body={"id": plant_id, "name": "Ivy"}, content_type=content_type), 200, {"name": "Ivy"})
    api.assert_stored(plant_id, "Ivy")


def test_a_body_of_exactly_16384_bytes_is_accepted(api):
    plant_id = fresh_id()
    body = json.dumps({"id": plant_id, "name": "Cactus"}).encode()
    body = body[:-1] + b" " * (MAX_BODY_BYTES - len(body)) + b"}"  # JSON whitespace
    assert len(body) == MAX_BODY_BYTES
    assert_json(api.call(body=body), 200, {"name": "Cactus"})
    api.assert_stored(plant_id, "Cactus")
