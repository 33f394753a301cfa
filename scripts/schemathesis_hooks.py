"""Schemathesis hooks for the plant store's contract run.

Loaded by tests/contract/test_schemathesis.py through the SCHEMATHESIS_HOOKS
environment variable (schemathesis 4.x takes a file path there). No check is
turned off and no failure is dropped here: one hook corrects the generator
where JSON Schema cannot say what the contract says, and one keeps out the
single kind of request that the local HTTP emulator, not the function,
cannot carry. Each is proven by a test in tests/contract/test_bodies.py.
"""

import schemathesis
from schemathesis import GenerationMode


@schemathesis.hook
def map_case(context, case):
    """Send a whole-number `id` of a POSITIVE case as an integer literal.

    Why this does not silence a check: in JSON Schema, and so in OpenAPI 3.1,
    `type: integer` means "any number whose fractional part is zero", so the
    generator may send `1.0` or `1e3` as VALID data. Our contract is
    stricter on purpose (openapi.yaml, `id`: a JSON integer literal; `1.0`
    and `1e3` are refused with 400/40003), and no OpenAPI 3.1 keyword can
    say "integer literal only", because JSON Schema compares numbers by
    value, never by spelling; the document cannot be fixed instead. The
    mapped body is exactly as valid as before by the schema and now valid by
    the contract too, so `positive_data_acceptance` still demands a 2xx (or
    an allowed 409) for it. Negative cases are left alone, and the refusal
    of `1.0` and `1e3` is asserted by the contract tests (and the Rust tests).
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

    Why: schemathesis's negative "syntax fuzzing" sometimes sends random
    bytes. `cargo lambda watch`, the local emulator of the Lambda front door,
    turns the HTTP request into a Lambda event with a string body and answers
    its own `500` (text/plain, none of our headers, the function never
    invoked) when the bytes are not UTF-8. That is the emulator, not the
    function: tests/contract/test_bodies.py proves both halves on every run
    (`test_a_non_utf8_body_*`): the same bytes sent to the function through the
    Lambda invoke API as a base64 event get the contract's 400 (40001), and
    the HTTP front door still answers its own 500 (so the day the emulator
    changes, that test fails and this filter must go). The function's own
    unit tests also prove non-UTF-8 -> 40001. Random bytes that ARE valid
    UTF-8 are not filtered and must get 400 (40001) like any other non-JSON.
    """
    data = getattr(case.body, "data", case.body)  # schemathesis's `Binary` wrapper, or the bytes
    if isinstance(data, (bytes, bytearray)):
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            return False
    return True
