"""The reason-code table: each code's prefix is its outcome class, and the codes before that scheme stay aliases
(accepted wherever a code is read, written beside the code in the summary) until the next release."""

from __future__ import annotations

import pytest

from gpuconform import reasons
from gpuconform.reasons import ALIASES, REASONS, EnvironmentProblem, Violation, canonical, code_of, legacy, lookup


def test_every_codes_prefix_is_its_outcome_class():
    for code, r in REASONS.items():
        prefix = code.split("-", 1)[0]
        assert prefix in reasons.CLASSES, code
        assert (r.outcome, r.klass) == reasons.CLASSES[prefix]
    assert {r.klass for r in REASONS.values()} == {"fail", "error", "skip", "not checked"}
    assert REASONS[reasons.NOT_CHECKED].klass == "not checked"


def test_aliases_are_one_to_one_and_round_trip():
    assert len(ALIASES) == len({r.code for r in REASONS.values() if r.alias}) == len(set(ALIASES.values()))
    for old, new in ALIASES.items():
        assert old.startswith(("GPU-", "ENV-")) and old not in REASONS
        assert canonical(old) == new and canonical(new) == new and legacy(new) == old
    assert canonical("GPU-F99") is None and canonical(None) is None and legacy(None) is None
    assert ALIASES["GPU-F07-BUSY"] == "SKIP-F07-BUSY" and ALIASES["ENV-NOT-CHECKED"] == "NOTCHECKED-OPTIONAL"


def test_an_old_code_is_accepted_wherever_a_code_is_read():
    assert Violation("GPU-F03-UNHEALTHY-DEVICES", "x").code == "FAIL-F03-UNHEALTHY-DEVICES"
    assert EnvironmentProblem("ENV-API", "x").code == "ERROR-API"
    assert reasons.skip_reason("GPU-F07-BUSY", "busy").startswith("[SKIP-F07-BUSY] ")
    assert code_of("[ENV-NOT-CHECKED] off") == "NOTCHECKED-OPTIONAL"
    assert lookup("GPU-NUMA-NA") is REASONS["SKIP-NUMA-NA"]
    with pytest.raises(KeyError):
        lookup("GPU-F99")
    # a baseline written before the scheme: its not-checked skips still do not cost certification
    assert reasons.certified([("passed", None), ("skipped", "ENV-NOT-CHECKED")])
    assert not reasons.certified([("passed", None), ("skipped", "GPU-F07-BUSY")])
