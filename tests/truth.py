"""The facts a reader must get off an excerpt (a folder's ``truth.json``), checked against logscope's tables.

``truth.json`` (tests/data/fixtures/public-2) gives, per file, the counts and values a careful human reads
off it. ``check`` reads each fact from the tables an ingest of the folder wrote and names every fact that does
not hold; a file is *fully read* when every line was parsed (files.parquet) and every fact holds. ``measure``
says how many files are. Run as a script to print both for a folder::

    python tests/truth.py tests/data/fixtures/public-2

Facts are matched as the truth file says ("kinds matched loosely"): an ``event_kinds`` entry ``a|b|c`` holds
when one of its words names an event of the file (a server event's kind, a request event, an access line's
status, a gateway row's flag), by the synonyms below. ``verdict`` strings are a human's conclusion, not a table's
fact: the diagnosis tests check conclusions (tests/test_diagnose_public.py).
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path

import polars as pl

# words of the truth file -> the event names of the tables that say them
SYNONYMS = {
    "oom": {"oom"},
    "out_of_memory": {"oom"},
    "dead": {"engine_dead"},
    "fatal": {"engine_dead"},
    "crash": {"engine_dead"},
    "backend_crash": {"engine_dead"},
    "background": {"engine_dead"},
    "timeout": {"engine_timeout"},
    "hang": {"engine_timeout"},
    "abort": {"aborted"},
    "shutdown": {"server_stop", "shutdown_error"},
    "stop": {"server_stop"},
    "client_error": {"http_4xx"},
    "404": {"http_404"},
    "model_not_found": {"model_not_found"},
}
DEATHS = {"engine_dead", "oom", "engine_timeout"}
GATEWAYS = {"ingress-nginx": "nginx", "higress/envoy": "envoy"}
TOL = 0.0005  # shares and seconds are printed with 1-4 decimals
SKIP = {"verdict", "gateway", "engine", "client"}  # checked through their rows' columns below, or not a fact


class Tables:
    """An ingest's tables, read once, each filtered to one file on demand."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self._all: dict[str, pl.DataFrame] = {}

    def __call__(self, name: str, source: str) -> pl.DataFrame:
        if name not in self._all:
            p = self.out / f"{name}.parquet"
            self._all[name] = pl.read_parquet(p) if p.exists() else pl.DataFrame({"source": []})
        df = self._all[name]
        if "source" not in df.columns:
            df = df.rename({"path": "source"}) if "path" in df.columns else df
        return df.filter(pl.col("source") == source)


def _close(a, b) -> bool:
    return a is not None and b is not None and abs(float(a) - float(b)) <= TOL


def _events(t: Tables, src: str) -> set[str]:
    """Every name an event of the file goes by (server events, request events, statuses, flags)."""
    names: set[str] = set()
    ev = t("server_events", src)
    if ev.height:
        names |= set(ev["kind"].drop_nulls())
        if "fatal" in ev.columns and bool(ev["fatal"].fill_null(False).any()):
            names.add("engine_dead")  # an OOM whose record says the engine died (fatal)
        st = ev["http_status"].drop_nulls()
        names |= {f"http_{s}" for s in st} | {"http_4xx" for s in st if 400 <= s < 500}
        text = ev.select(pl.concat_str("message", "detail", ignore_nulls=True)).to_series()
        if bool(text.str.contains("NotFoundError|does not exist|model_not_found").any()):
            names.add("model_not_found")
    rq = t("server_request_events", src)
    if rq.height:
        names |= set(rq["event"].drop_nulls())
    return names


def _gateway(t: Tables, src: str) -> pl.DataFrame:
    """The file's gateway requests (a proxy's lines on attempts, retries, fallbacks apart)."""
    from logscope.schemas import gateway_apart

    g = t("gateway_attempts", src)
    return g.filter(~gateway_apart()) if g.height else g


def _requests(gw: pl.DataFrame) -> pl.DataFrame:
    """One row per gateway request: its last attempt (nginx writes a row per upstream attempt of a line)."""
    return gw.sort("line_no", "attempt", nulls_last=False).unique("line_no", keep="last") if gw.height else gw


class File:
    """One file's rows of each table, read by the checks."""

    def __init__(self, name: str, t: Tables) -> None:
        self.name, self.t = name, t
        self.stats, self.spec = t("server_stats", name), t("server_spec_decode", name)
        self.ev, self.rq = t("server_events", name), t("server_request_events", name)
        self.reqs = t("server_requests", name)
        self.gw, self.gerr = _gateway(t, name), t("gateway_errors", name)
        self.one, self.gw_all = _requests(self.gw), gw_all(t, name)
        self.ca, self.cr, self.lt = (
            t("client_attempts", name),
            t("client_requests", name),
            t("load_tests", name),
        )


def col(df: pl.DataFrame, c: str) -> pl.Series:
    return df[c].drop_nulls() if c in df.columns else pl.Series(c, [], dtype=pl.Float64)


def agg(df: pl.DataFrame, c: str, how: str):
    s = col(df, c)
    return None if s.len() == 0 else (s.max() if how == "max" else s.min())


def _any_close(values: list, v) -> bool:
    return any(_close(x, v) for x in values)


def _stat(c: str, how: str):
    return lambda f, v: (lambda got: (got == v, got))(agg(f.stats, c, how))


def _share(c: str, how: str):
    return lambda f, v: (lambda got: (_close(got, v), got))(agg(f.stats, c, how))


def _values(frame: str, c: str):
    return lambda f, v: (lambda got: (_any_close(got, v), got))(col(getattr(f, frame), c).to_list())


def _event_count(event: str):
    return lambda f, v: (lambda got: (got == v, got))(
        f.rq.filter(pl.col("event") == event).height if f.rq.height else 0
    )


def _http(code: int):
    return lambda f, v: (lambda got: (got == v, got))(
        f.ev.filter(pl.col("http_status") == code).height if f.ev.height else 0
    )


def _client_status(code: int):
    return lambda f, v: (lambda got: (got == v, got))(
        f.ca.filter(pl.col("status") == code).height if f.ca.height else 0
    )


def _one_value(frame: str, c: str):
    return lambda f, v: (lambda got: (len(got) == 1 and _close(got[0], v), got))(
        col(getattr(f, frame), c).to_list()
    )


def _failures(f: File) -> pl.DataFrame:
    return f.gw_all.filter(pl.col("flags") == "attempt,exception")


def _backoff(f: File, v) -> tuple[bool, object]:
    got = sorted(col(f.ca, "retry_delay_s").to_list())
    return len(got) == len(v) and all(_close(a, b) for a, b in zip(got, sorted(v), strict=True)), got


def _status_kinds(f: File, v) -> tuple[bool, object]:
    rows = _failures(f).select(
        pl.concat_str("error", pl.col("upstream_status").cast(pl.String), ignore_nulls=True)
    )
    text = " ".join(rows.to_series().to_list()).lower()
    missing = [alt for alt in v if not any(w in text for w in alt.split("|"))]
    return not missing, f"none of {missing} in the rows' errors and statuses"


def _event_kinds(f: File, v) -> tuple[bool, object]:
    names = _events(f.t, f.name)
    missing = [alt for alt in v if not any(SYNONYMS.get(w, {w}) & names for w in alt.split("|"))]
    return not missing, f"none of {missing} among {sorted(names)}"


# fact -> check(file, expected) -> (holds, what the tables say)
CHECKS = {
    "stats_rows": lambda f, v: (f.stats.height == v, f.stats.height),
    "batch_rows": lambda f, v: (f.stats.height == v, f.stats.height),
    "engines": lambda f, v: (
        sorted(set(col(f.stats, "engine"))) == sorted(v),
        sorted(set(col(f.stats, "engine"))),
    ),
    "running_max": _stat("running", "max"),
    "running_min": _stat("running", "min"),
    "waiting_max": _stat("waiting", "max"),
    "waiting_min": _stat("waiting", "min"),
    "queue_max": _stat("waiting", "max"),
    "kv_max": _share("kv_usage", "max"),
    "kv_min": _share("kv_usage", "min"),
    "token_usage_max": _share("kv_usage", "max"),
    "gen_tps_max": _share("gen_tps", "max"),
    "prefix_cache_hit_rate": _values("stats", "prefix_hit"),
    "prefix_cache_hit_rate_gpu": _values("stats", "prefix_hit"),
    "spec_acceptance_rate": _values("spec", "draft_acceptance_rate"),
    "spec_mean_acceptance_length": _values("spec", "mean_acceptance_length"),
    "aborted_count": _event_count("aborted"),
    "added_count": _event_count("added"),
    "aborted_id_prefix": lambda f, v: (lambda ids: (bool(ids) and all(i.startswith(v) for i in ids), ids))(
        f.rq.filter(pl.col("event") == "aborted")["request_id"].to_list() if f.rq.height else []
    ),
    "requests_min": lambda f, v: (f.reqs.height >= v, f.reqs.height),
    "event_kinds": _event_kinds,
    "no_crash": lambda f, v: (not (_events(f.t, f.name) & DEATHS), sorted(_events(f.t, f.name) & DEATHS)),
    "rescheduled_requests": lambda f, v: (
        v in col(f.ev, "requests_affected").to_list(),
        col(f.ev, "requests_affected").to_list(),
    ),
    "http_200_count": _http(200),
    "http_404_count": _http(404),
    "router_failures": lambda f, v: (_failures(f).height == v, _failures(f).height),
    "retries_reported_per_failure": lambda f, v: (lambda got: (bool(got) and all(x == v for x in got), got))(
        (_failures(f)["attempts_total"] - 1).to_list()
    ),
    "status_kinds": _status_kinds,
    "access_lines": lambda f, v: (f.one.height == v, f.one.height),
    "error_lines": lambda f, v: (f.gerr.height == v, f.gerr.height),
    "upstream_attempts_max": lambda f, v: (
        agg(f.gw, "attempts_total", "max") == v,
        agg(f.gw, "attempts_total", "max"),
    ),
    "upstream_status_list": lambda f, v: (lambda got: (got == v, got))(
        col(f.gw.sort("attempt"), "upstream_status").to_list() if f.gw.height else []
    ),
    "request_time_s": _one_value("one", "request_time_s"),
    "req_id": lambda f, v: (col(f.one, "request_id").to_list() == [v], col(f.one, "request_id").to_list()),
    "status": lambda f, v: (col(f.one, "status").to_list() == [v], col(f.one, "status").to_list()),
    "status_counts": lambda f, v: (lambda got: (got == v, got))(
        {str(k): n for k, n in f.one.group_by("status").len().iter_rows()} if f.one.height else {}
    ),
    "response_flags": lambda f, v: (lambda got: (got == sorted(v), got))(
        sorted(set(f.one["flags"].fill_null("-"))) if f.one.height else []
    ),
    "distinct_request_ids": lambda f, v: (
        col(f.one, "request_id").n_unique() == v,
        col(f.one, "request_id").n_unique(),
    ),
    "no_errors": lambda f, v: (lambda got: (got == 0 and f.one.height > 0, got))(
        f.one.filter(pl.col("status") >= 400).height if f.one.height else 0
    ),
    "upstream_errors": lambda f, v: (lambda got: (got == v, got))(
        f.gw_all.filter(pl.col("upstream_status") >= 500).height if f.gw_all.height else 0
    ),
    "upstream_error_code": lambda f, v: (
        v in col(f.gw_all, "upstream_status").to_list(),
        col(f.gw_all, "upstream_status").to_list(),
    ),
    "http_429": _client_status(429),
    "http_200": _client_status(200),
    "http_502": _client_status(502),
    "retries": lambda f, v: (lambda got: (got == v, got))(
        f.ca.filter(pl.col("attempt") > 1).height if f.ca.height else 0
    ),
    "backoff_s": _backoff,
    "timeouts": lambda f, v: (int(col(f.ca, "timed_out").sum()) == v, int(col(f.ca, "timed_out").sum())),
    "final": lambda f, v: (lambda got: (bool(got) and "connection" in got[-1].lower(), got))(
        col(f.cr.sort("ts_end", nulls_last=True), "error").to_list() if f.cr.height else []
    ),
    "requests": lambda f, v: (f.cr.height == v, f.cr.height),
    "success": lambda f, v: (lambda got: (got == v, got))(
        f.cr.filter(pl.col("status").is_between(200, 299)).height if f.cr.height else 0
    ),
    "ttft_max_s": lambda f, v: (_close(agg(f.cr, "ttft_s", "max"), v), agg(f.cr, "ttft_s", "max")),
    "num_requests_progress": _one_value("lt", "requests"),
    "successful": _one_value("lt", "successful"),
    "max_concurrency": _one_value("lt", "concurrency"),
    "duration_s": _one_value("lt", "duration_s"),
}


def check(name: str, facts: dict, t: Tables) -> list[str]:
    """The facts of ``name`` that the tables do not hold, each as 'key: expected ..., got ...'."""
    f = File(name, t)
    bad: list[str] = []
    for key, v in facts.items():
        if key in SKIP:
            continue
        if key not in CHECKS:
            bad.append(f"{key}: no check for this fact")
            continue
        ok, got = CHECKS[key](f, v)
        if not ok:
            bad.append(f"{key}: expected {v!r}, got {got!r}")
    return bad + _named(facts, name, t, f.stats, f.gw, f.cr, f.ca, f.lt)


def gw_all(t: Tables, src: str) -> pl.DataFrame:
    g = t("gateway_attempts", src)
    return g if g.height else pl.DataFrame(schema={"flags": pl.String, "attempts_total": pl.Int64})


def _named(facts, name, t, stats, gw, cr, ca, lt) -> list[str]:
    """The facts that name the software: engine, gateway, client."""
    bad = []
    if "engine" in facts:
        got = sorted(set(stats["engine_kind"].drop_nulls())) if stats.height else []
        if got != [facts["engine"]]:
            bad.append(f"engine: expected {facts['engine']!r}, got {got}")
    if "gateway" in facts:
        want = GATEWAYS.get(facts["gateway"], facts["gateway"])
        got = sorted(set(gw_all(t, name)["gateway"].drop_nulls())) if "gateway" in gw_all(t, name) else []
        if want not in got:
            bad.append(f"gateway: expected {want!r}, got {got}")
    if "client" in facts:
        v = facts["client"]
        if gw.height:  # a gateway's log names the client by its user agent
            ok = bool(gw["user_agent"].drop_nulls().str.contains(v, literal=True).any())
        else:
            names = set()
            for df in (cr, ca, lt):
                for c in ("client", "tool"):
                    if df.height and c in df.columns:
                        names |= set(df[c].drop_nulls())
            ok = any(n == v or n in v.split("/") for n in names)
            if not ok:
                bad.append(f"client: expected {v!r}, got {sorted(names)}")
            return bad
        if not ok:
            bad.append(f"client: expected user agent {v!r}")
    return bad


def fully_read(files: pl.DataFrame, truth: dict, t: Tables) -> dict[str, list[str]]:
    """Each file of the truth: what keeps it from being fully read (no entry: fully read)."""
    out: dict[str, list[str]] = {}
    for name, facts in truth.items():
        if name.startswith("_"):
            continue
        f = files.filter(pl.col("path") == name)
        bad = []
        if f.height == 0:
            bad.append("not in files.parquet")
        else:
            row = f.row(0, named=True)
            if row["lines_unrecognized"]:
                bad.append(
                    f"{row['lines_unrecognized']} of {row['lines_total']} lines not read ({row['format']})"
                )
        bad += check(name, facts, t)
        out[name] = bad
    return out


def measure(folder: Path) -> tuple[int, int, dict[str, list[str]]]:
    """Ingest the folder's logs in a temporary folder: (files fully read, files, what each misses)."""
    from logscope.api import AnalyzeOptions, ingest

    truth = json.loads((folder / "truth.json").read_text())
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "in"
        src.mkdir()
        for name in truth:
            if not name.startswith("_"):
                shutil.copy2(folder / name, src / name)
        res = ingest(src, Path(tmp) / "out", AnalyzeOptions())
        missing = fully_read(res.files, truth, Tables(Path(tmp) / "out"))
    ok = sum(1 for v in missing.values() if not v)
    return ok, len(missing), missing


if __name__ == "__main__":
    ok, n, missing = measure(Path(sys.argv[1]))
    for name, bad in missing.items():
        for b in bad:
            print(f"{name}: {b}")
    print(f"fully read: {ok} of {n}")
