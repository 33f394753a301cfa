"""Creating plants: the 200 answer without the id, the stored item, retries, conflicts."""

import json

import pytest
from helpers import I64_MAX, I64_MIN, MAX_BODY_BYTES, assert_error, assert_json, fresh_id, header, padded


def test_a_retry_with_the_same_body_answers_the_same_200_and_writes_nothing(api):
    for plant in ({"name": "Aloe vera", "tag": "succulent"}, {"name": "Fern"}):  # with a tag and without
        plant_id = fresh_id()
        first = api.accepted(plant_id=plant_id, **plant)
        item = api.stored_item(plant_id)
        for _ in range(2):
            again = api.call(body={"id": plant_id, **plant})
            assert_json(again, 200, plant)
            assert again.content == first.content
            assert header(again, "x-request-id") != header(first, "x-request-id")
            assert api.stored_item(plant_id) == item, "a retry must not write (created_at changed)"


CONFLICTS = [  # (label, stored, sent)
    ("another name", {"name": "Monstera", "tag": "aroid"}, {"name": "Philodendron", "tag": "aroid"}),
    ("another tag", {"name": "Monstera", "tag": "aroid"}, {"name": "Monstera", "tag": "climber"}),
    ("the tag left out", {"name": "Monstera", "tag": "aroid"}, {"name": "Monstera"}),
    ("a tag added", {"name": "Monstera"}, {"name": "Monstera", "tag": "aroid"}),
    ("a name differing only in case", {"name": "Monstera"}, {"name": "monstera"}),
    ("a name with a trailing space", {"name": "Monstera"}, {"name": "Monstera "}),
]


@pytest.mark.parametrize("stored, sent", [case[1:] for case in CONFLICTS], ids=[case[0] for case in CONFLICTS])
def test_the_same_id_with_different_content_is_a_409_conflict_and_the_stored_plant_is_unchanged(api, stored, sent):
    plant_id = fresh_id()
    api.accepted(plant_id=plant_id, **stored)
    item = api.stored_item(plant_id)
    response = api.call(body={"id": plant_id, **sent})
    assert_error(response, 409, 40901, f"a different plant with id {plant_id} already exists")
    assert api.stored_item(plant_id) == item, "the stored plant must not change"


EXACT = [  # (label, name, tag)
    ("a tag", "Monstera deliciosa", "aroid"),
    ("no tag, none in the answer or the item", "Boston fern", None),
    ("Unicode and emoji", "🌱 Sämling", "多肉植物"),
    ("spaces around the name are kept", "  Fern  ", " x "),
    ("256 characters of 4 bytes each", "🌿" * 256, "🌵" * 64),
    ("a single character", "a", "b"),
    ("C1 controls and NBSP inside text are allowed", "a\u0085b\u00a0c", "d\u0080e"),
    ("quotes and backslashes", 'say "hi" \\ bye', "a/b"),
]


@pytest.mark.parametrize("name, tag", [case[1:] for case in EXACT], ids=[case[0] for case in EXACT])
def test_a_new_plant_is_stored_exactly_as_sent_and_answered_without_its_id(api, name, tag):
    answer = {"name": name} | ({} if tag is None else {"tag": tag})
    assert api.accepted(name, tag).content == json.dumps(answer, ensure_ascii=False, separators=(",", ":")).encode()


# The largest id as in openapi.yaml's example `largestId`, so that
# schemathesis's example later is an idempotent retry.
@pytest.mark.parametrize("plant_id, name", [(I64_MAX, "🌱 Sämling"), (I64_MIN, "Most negative")])
def test_the_extreme_int64_ids_are_accepted(api, plant_id, name):
    api.accepted(name, plant_id=plant_id, body=f'{{"id": {plant_id}, "name": {json.dumps(name)}}}')


@pytest.mark.parametrize("content_type", ["application/json; charset=utf-8", "Application/JSON;charset=UTF-8"])
def test_a_json_content_type_with_parameters_is_accepted(api, content_type):
    api.accepted("Ivy", content_type=content_type)


def test_a_body_of_exactly_16384_bytes_is_accepted(api):
    plant_id = fresh_id()
    body = padded({"id": plant_id, "name": "Cactus"}, MAX_BODY_BYTES)
    assert len(body) == MAX_BODY_BYTES
    api.accepted("Cactus", plant_id=plant_id, body=body)
