"""compare's control line reads reach's steps: where the one change cannot act, a move beyond the sampling noise is
the recordings' difference (the host's load), never "either the change matters even at light load".

tests/data/pairs/spike-kv (the spike scenario with 112 and 224 KV blocks): at the calm c=2 phase before the burst
neither run preempted or queued (reach: the KV cache cannot act there), yet B's e2e p50 moved 0.891 s -> 1.41 s. The
verdict read "At the lightest step (c=2) B is slower too (...): either the change matters even at light load, or
something else differed", which reach's own fact rules out."""

from __future__ import annotations

import pytest
from compare_helpers import reader_text

from conftest import ROOT, need
from logscope.api import compare

KV_PAIR = ROOT / "tests" / "data" / "pairs" / "spike-kv"


@pytest.mark.parametrize("order", [("kv112", "kv224"), ("kv224", "kv112")])
def test_a_move_where_the_kv_cache_cannot_act_is_the_recordings(analyzed, tmp_path, order):
    runs = [need(KV_PAIR / x) for x in order]
    res = compare(analyzed(runs[0])[0], analyzed(runs[1])[0], tmp_path / "c")
    doc = res["doc"]
    idle = [s["label"] for s in doc["steps"] if s["reach"]["acts"] is False]
    assert idle == ["c=2"]
    line = next(v for v in doc["verdict"] if "cannot act" in v or "lightest step" in v)
    assert line.startswith("Where num_gpu_blocks_override cannot act (c=2: neither run preempted or queued")
    assert "something other than the setting differed between the recordings" in line
    said = reader_text(res)
    assert "either the change matters even at light load" not in said
    assert line.split(" (")[0] in said  # every output says it
