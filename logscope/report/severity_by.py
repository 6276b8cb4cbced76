"""The severity decisions of diagnosis.json's claims (diagnose/severity.py), by finding: what summary.json's
findings carry so that every output renders the same rule and sentence."""

from __future__ import annotations

from .load import Loaded


def severity_by(ld: Loaded) -> dict[str, dict]:
    """The severity decisions of diagnosis.json's claims (diagnose/severity.py), by finding id: the claim, the rule
    that set the severity, its sentence (the claim's facts are in summary.json's claims)."""
    got = ld.doc("diagnosis").get("claims")
    out = {}
    for c in got if isinstance(got, list) else []:
        if (
            isinstance(c, dict)
            and c.get("kind") == "severity"
            and str(c.get("id", "")).startswith("severity.")
        ):
            rule = next((f.get("value") for f in c.get("facts") or [] if f.get("name") == "rule"), None)
            out[c["id"].removeprefix("severity.")] = {
                "claim": c["id"],
                "level": c.get("state"),
                "rule": rule,
                "sentence": c.get("sentence"),
            }
    return out
