"""The typed records diagnosis hands on: ``Finding`` and ``Episode``, whose fields are the columns of
``schemas.TABLES["findings"]`` / ``["episodes"]`` (``to_dict`` gives a table row and its JSON), each pointing
to the claim (``claims.Claim``) its title or class states.

Both also read and write like the dicts the diagnosis steps were written with (``f["title"]``,
``e.get("ttft_source")``): a field by its name, and for an episode the figures the steps add beside the table's
columns (buckets, sources, notes: ``extra``), so each step keeps its shape while what crosses modules is typed.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any

from .. import schemas


class _Mapping:
    """Item access by field name (and ``extra`` for names that are no field, when the record has one)."""

    _names: frozenset[str] = frozenset()

    def __getitem__(self, key: str) -> Any:
        if key in self._names:
            return getattr(self, key)
        extra = getattr(self, "extra", None)
        if extra is not None and key in extra:
            return extra[key]
        raise KeyError(key)

    def __setitem__(self, key: str, value: Any) -> None:
        if key in self._names:
            setattr(self, key, value)
        elif getattr(self, "extra", None) is not None:
            self.extra[key] = value  # type: ignore[attr-defined]
        else:
            raise KeyError(f"{type(self).__name__} has no field {key!r}")

    def __contains__(self, key: object) -> bool:
        extra = getattr(self, "extra", None)
        return key in self._names or (extra is not None and key in extra)

    def get(self, key: str, default: Any = None) -> Any:
        try:
            return self[key]
        except KeyError:
            return default

    def update(self, other: dict) -> None:
        for k, v in other.items():
            self[k] = v


@dataclass(eq=False)
class Finding(_Mapping):
    severity: str
    title: str
    symptom: str
    evidence: str
    cause: str
    next_test: str
    kind: str = "other"
    episode_id: str | None = None
    start: datetime | None = None
    end: datetime | None = None
    finding_id: str | None = None
    rank: int | None = None
    failed_requests: int | None = None
    slowed_requests: int | None = None
    claim_id: str | None = None  # the claim its title states (claims.Claim.id)
    requests_in_range: int | None = None  # logical requests in flight during it (impact.measure)
    facts: list = field(
        default_factory=list
    )  # what a finding with no claim of its own observed (claims.Fact)
    # a recurring pattern's finding: (start, end) of each beat it stands for, its impact counted over all of them
    beats: list = field(default_factory=list)
    severity_by: Any = None  # severity.Severity: the rule and the facts that set its severity

    def to_dict(self) -> dict:
        return {c: getattr(self, c) for c in schemas.TABLES["findings"]}


@dataclass(eq=False)
class Episode(_Mapping):
    signal: str
    replica: str | None
    start: datetime
    end: datetime
    duration_s: float
    share_of_span: float | None
    recovered: bool
    peak: float
    baseline: float | None
    count: int
    # still on when the observation stops (load_ends.open_end): its end is the logs', its length a lower bound
    open_end: bool = False
    running_max: float | None = None
    running_mean: float | None = None
    waiting_max: float | None = None
    waiting_mean: float | None = None
    kv_max: float | None = None
    kv_mean: float | None = None
    arrival_rate_before: float | None = None
    arrival_rate_during: float | None = None
    arrival_rate_after: float | None = None
    prompt_tokens_mean: float | None = None
    output_tokens_mean: float | None = None
    ttft_p95: float | None = None
    e2e_p95: float | None = None
    ttft_source: str | None = None
    ttft_p95_bucket: str | None = None
    e2e_source: str | None = None
    e2e_p95_bucket: str | None = None
    success_share: float | None = None
    ttft_clock: str | None = None
    e2e_clock: str | None = None
    episode_id: str | None = None
    reason: str = ""
    why: str = ""
    details: dict = field(default_factory=dict)
    claim_id: str | None = None  # the claim of its class
    extra: dict = field(default_factory=dict)  # figures beside the table's columns (histogram buckets, notes)

    # ``class`` is a keyword: the field is ``cls``, read and written as ``e["class"]``
    cls: str = ""

    def __getitem__(self, key: str) -> Any:
        return self.cls if key == "class" else super().__getitem__(key)

    def __setitem__(self, key: str, value: Any) -> None:
        if key == "class":
            self.cls = value
        else:
            super().__setitem__(key, value)

    def __contains__(self, key: object) -> bool:
        return key == "class" or super().__contains__(key)

    def to_dict(self) -> dict:
        """The episodes table's row (``class`` by its name), plus the claim it states."""
        return {c: self[c] for c in schemas.TABLES["episodes"]}


Finding._names = frozenset(f.name for f in fields(Finding))
Episode._names = frozenset(f.name for f in fields(Episode) if f.name not in ("extra", "cls"))
