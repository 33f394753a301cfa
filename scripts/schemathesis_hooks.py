"""Schemathesis hooks for the plant store's contract run, loaded by
tests/contract/test_schemathesis.py through SCHEMATHESIS_HOOKS (a file path in
schemathesis 4.x). No check is turned off and no failure dropped: one hook
corrects the generator where JSON Schema cannot say what the contract says,
one keeps out the single kind of request that the local HTTP emulator, not
the function, cannot carry. Tests in tests/contract/ prove each.
"""

import schemathesis
from schemathesis import GenerationMode


@schemathesis.hook
def map_case(context, case):
    """Send a whole-number `id` of a POSITIVE case as an integer literal.

    Why this silences no check: JSON Schema's (so OpenAPI 3.1's) `type: integer`
    is "any number whose fractional part is zero", so `1.0` and `1e3` are VALID
    data to the generator. Our contract refuses them on purpose (openapi.yaml,
    `id`: a JSON integer literal; 400/40003), and no keyword can say "integer
    literal only": JSON Schema compares numbers by value, never by spelling. The
    mapped body stays valid by the schema and is now valid by the contract, so
    `positive_data_acceptance` still demands a 2xx (or an allowed 409) for it.
    Negative cases are left alone; the contract and Rust tests assert the refusal.
    """
    positive = case.meta is not None and case.meta.generation.mode == GenerationMode.POSITIVE
    value = case.body.get("id") if positive and isinstance(case.body, dict) else None
    # Only finite whole floats map (bool is an int subclass, never a float).
    if isinstance(value, float) and value.is_integer():
        case.body = {**case.body, "id": int(value)}
    return case


@schemathesis.hook
def filter_case(context, case):
    """Keep out raw bodies that are not UTF-8, and nothing else.

    Why: schemathesis's negative "syntax fuzzing" sometimes sends random bytes,
    and `cargo lambda watch`, the local emulator of the Lambda front door, puts
    the body into an event as a string: bytes that are not UTF-8 get its own
    `500` (text/plain, none of our headers, the function never invoked).
    tests/contract/test_bodies.py proves both halves on every run: the same bytes
    as a base64 event through the Lambda invoke API get the contract's 400
    (40001), and the HTTP front door still answers its own 500 (the day the
    emulator changes, that test fails and this filter must go). Random bytes that
    ARE valid UTF-8 pass and must get 400 (40001) like any other non-JSON.
    """
    data = getattr(case.body, "data", case.body)  # schemathesis's `Binary` wrapper, or the bytes
    if isinstance(data, (bytes, bytearray)):
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            return False
    return True
