"""The shared vectors of clients/test-vectors.json, which the server's Rust tests also check."""

import json
from pathlib import Path

import pytest

from idem import canonical_json, derived_key, fingerprint

VECTORS = json.loads(
    (Path(__file__).resolve().parents[2] / "test-vectors.json").read_text(encoding="utf-8")
)


@pytest.mark.parametrize("case", VECTORS["canonical_json"], ids=lambda c: c["name"])
def test_canonical_json_matches_the_server(case: dict) -> None:
    assert canonical_json(json.loads(case["input"])) == case["canonical"]


@pytest.mark.parametrize("case", VECTORS["fingerprints"], ids=lambda c: c["name"])
def test_fingerprints_match_the_server(case: dict) -> None:
    args = json.loads(case["args"])
    assert fingerprint(case["tool"], args, case["ignore_fields"]) == case["fingerprint"]


@pytest.mark.parametrize("case", VECTORS["derived_keys"], ids=lambda c: c["name"])
def test_derived_keys_match_the_server(case: dict) -> None:
    args = json.loads(case["args"])
    key = derived_key(case["run_id"], case["step"], case["tool"], args, case["ignore_fields"])
    assert key == case["key"]


def test_non_finite_numbers_are_refused() -> None:
    for value in (float("nan"), float("inf")):
        with pytest.raises(ValueError):
            canonical_json({"x": value})
