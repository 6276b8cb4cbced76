"""nginx access log -> ``gateway_attempts``, one row per upstream attempt.

Sample (lab ``log_format lab``, /work/shared/fixtures/lab/spike/nginx-access.log)::

    2026-11-29T08:25:07+00:00 msec=1795940707.424 rid=4747c1cf15091f73268614980228ca23 port=8081 client_rid="spike-w01-00002" "POST /v1/completions HTTP/1.1" status=200 rt=1.770 ua="127.0.0.1:8002, 127.0.0.1:8001" us="502, 200" urt="0.000, 1.770" uct="-, 0.000" uht="-, 0.027" req_len=1165 sent=66626 retry_hdr="0" ua_client="OpenAI/Python 3.57.0"

Formats: the predefined ``combined``, ingress-nginx's default ``upstreaminfo``, any custom ``log_format`` (taken from --nginx-log-format, else
from a ``*.conf`` beside the log, else inferred from self-describing ``key=value`` / JSON lines),
``escape=json`` JSON logs. Upstream: ``src/http/modules/ngx_http_log_module.c`` and
``ngx_http_upstream.c`` (nginx/nginx); list-valued ``$upstream_*`` variables are documented in
``ngx_http_upstream_module.xml``: ``, `` between attempts, `` : `` between upstream groups, ``-``
when there is none, the group name in ``$upstream_addr`` when no server could be selected.
"""

from __future__ import annotations

import polars as pl

from logscope.numbers import to_int
from logscope.scalars import int_value
from logscope.schemas import TS

from . import _nginx_format as nf
from . import _nginx_plan as nplan
from ._common import epoch_to_utc
from .base import ChunkResult, ParseContext, nonblank, one_head, per_head

NAME = "nginx_access"
KIND = "gateway"
DESCRIPTION = (
    "nginx access log: combined, ingress-nginx's upstreaminfo, Apache APISIX's default (and ai-proxy's ms) "
    "format, custom log_format (from nginx.conf or inferred), escape=json"
)
MODE = "lines"
SPEED = 126  # MB/s on one core (bench/, 1 GB folder): orders the streams
INDEPENDENT_CHUNKS = (
    True  # one line, one record; the state (the access-log layouts) is set by the first chunk
)
SAMPLES = [
    '127.0.0.1 - - [30/Nov/2026:07:57:41 +0000] "POST /v1/completions HTTP/1.1" 200 265 "-" "gwlab-drive/1" 256 0.052 [default-vllm-8000] [] 127.0.0.1:18399, 127.0.0.1:18301 0, 265 0.000, 0.052 502, 200 client-ok-002',  # ingress-nginx's default 'upstreaminfo'
    '2026-11-29T08:31:09+00:00 msec=1795941069.073 rid=c873f7209d99012968505a0956b3113e port=8080 client_rid="storm-r-00479" "POST /v1/completions HTTP/1.1" status=502 rt=8.001 ua="127.0.0.1:8001, vllm_edge" us="504, 502" urt="8.000, 0.000" uct="0.000, -" uht="-, -" req_len=1105 sent=314 retry_hdr="0" ua_client="OpenAI/Python 3.57.0"',
    '127.0.0.1 - - [29/Nov/2026:09:49:35 +0000] "GET /pool/index.html HTTP/1.1" 200 6 "-" "curl/7.88.1"',
    '{"time":"2026-11-29T09:49:40+00:00","msec":"1795945780.334","request_id":"ccd151a4254c1d389b90194abdcb58c4","remote_addr":"127.0.0.1","request":"GET /fallback/ HTTP/1.1","status":200,"request_time":0.002,"upstream_addr":"127.0.0.1:18999 : 127.0.0.1:18090","upstream_status":"502 : 200","upstream_response_time":"0.000 : 0.002","upstream_connect_time":"- : 0.000","upstream_header_time":"- : 0.002","bytes_sent":195,"x_request_id":"","http_user_agent":"curl/7.88.1"}',
]

# --- detection (head lines only) ---
_COMBINED_SHAPE = r'^\S+ \S+ \S+ \[\d{2}/[A-Za-z]{3}/\d{4}:\d{2}:\d{2}:\d{2} [+-]\d{4}\] "[^"]*" \d{3} (?:\d+|-)(?: "[^"]*")*\r?$'
# ingress-nginx's default 'upstreaminfo': combined, then request length and time, [upstream name] [alternative]
_UPSTREAMINFO_SHAPE = (
    r'^\S+ - \S+ \[\d{2}/[A-Za-z]{3}/\d{4}:\d{2}:\d{2}:\d{2} [+-]\d{4}\] "[^"]*" \d{3} \d+ "[^"]*" '
    r'"[^"]*" \d+ [\d.]+ \[[^\]\s]*\] \[[^\]\s]*\] '
)
# Apache APISIX's default access format: combined's start, $http_host, the request, status, bytes, $request_time,
# referer, agent, then upstream address, status and time and the quoted upstream URL (more fields may follow)
_APISIX_SHAPE = (
    r'^\S+ - \S+ \[\d{2}/[A-Za-z]{3}/\d{4}:\d{2}:\d{2}:\d{2} [+-]\d{4}\] \S+ "[^"]*" \d{3} \d+ [\d.]+ "[^"]*" '
    r'"[^"]*" \S+ \S+ [\d.-]+ "[^"]*"'
)
_KV_UPSTREAM = r'(?:^|\s)(?:us|upstream_status)="?(?:\d{3}|-)'
_KV_OTHER = r"(?:^|\s)(?:rt|request_time|urt|upstream_response_time|msec|rid|request_id|ua|upstream_addr)="
_JSON_START = r"^\s*\{"
_JSON_KEYS = [
    f'"{k}"\\s*:'
    for k in (
        "upstream_addr",
        "upstream_status",
        "upstream_response_time",
        "upstream_connect_time",
        "upstream_header_time",
        "request_time",
        "body_bytes_sent",
        "time_local",
        "time_iso8601",
        "remote_addr",
        "http_user_agent",
        "request_id",
        "msec",
    )
]

# --- parsing ---
_REQUEST = r"^(?P<method>[A-Z]+) (?P<path>\S+)"
# the nginx variables _attempts reads; $msec (epoch, always a number) makes the time fields unused
_TIME_FALLBACK = frozenset({"time_iso8601", "time_local"})
_READ = (
    frozenset(
        {
            "msec",
            "request_time",
            "request_id",
            "http_x_request_id",
            "status",
            "request",
            "request_method",
            "request_uri",
            "bytes_sent",
            "body_bytes_sent",
            "http_x_stainless_retry_count",
            "http_user_agent",
            "server_port",
            "http_traceparent",
            "apisix_upstream_response_time",
            *nf.LIST_VARS,
        }
    )
    | _TIME_FALLBACK
)
_NULLS = ["-", ""]


def detect_heads(frame: pl.DataFrame, n: int) -> pl.Series:
    line = pl.col("line")
    kv = line.str.contains(_KV_UPSTREAM) & line.str.contains(_KV_OTHER)
    js = line.str.contains(_JSON_START) & (pl.sum_horizontal([line.str.contains(k) for k in _JSON_KEYS]) >= 2)
    comb = line.str.contains(_COMBINED_SHAPE)
    ingress = line.str.contains(_UPSTREAMINFO_SHAPE)
    apisix = line.str.contains(_APISIX_SHAPE)
    # each line scores by its best shape (a bare combined line is shared with Apache: lower weight)
    per_line = pl.max_horizontal(
        pl.when(kv).then(0.95).otherwise(0.0),
        pl.when(js).then(0.9).otherwise(0.0),
        pl.when(ingress).then(0.9).otherwise(0.0),
        pl.when(apisix).then(0.9).otherwise(0.0),
        pl.when(comb).then(0.7).otherwise(0.0),
    )
    return per_head(nonblank(frame), n, s=per_line.mean()).get_column("s")


def detect(head: list[str]) -> float:
    return one_head(detect_heads, head)


def parse_chunk(lines: pl.DataFrame, ctx: ParseContext, state: dict) -> ChunkResult:
    path = (ctx.options or {}).get("path")
    if "layouts" not in state or state.get("path") != path:
        # chosen from the head lines of each file's first chunk: the files of a rotated set may be in different
        # layouts (a log_format changed between rotations); the layouts a file brings go first, the stream's after
        line = pl.col("line")
        # a line of records glued together (a tool that dropped the newlines) would be inferred as one huge layout
        head = lines.filter(line.str.strip_chars() != "").get_column("line").head(200)
        short = head.filter(head.str.len_bytes() <= GLUED).to_list()
        found = nf.candidates(short or _first_records(head, ctx.options or {}), ctx.options or {})
        mine = {lay.regex for lay, _ in found}
        state["layouts"] = found + [(lay, n) for lay, n in state.get("layouts", []) if lay.regex not in mine]
        state["path"] = path
    long = lines.get_column("line").str.len_bytes() > GLUED
    if not state["layouts"] or not long.any():
        return _parse(lines, ctx, state)
    return _unglued(lines, long, ctx, state)


# a line longer than this may be records glued without their newlines: it is cut where each record ends (its layout
# matched from where the one before it ended) and never used to infer a layout; nginx's request line stops at 8 KiB
# by default (large_client_header_buffers)
GLUED = 8 * 1024


def _unglued(lines: pl.DataFrame, long: pl.Series, ctx: ParseContext, state: dict) -> ChunkResult:
    """Parse a chunk whose long lines are cut into the records their layouts match one after the other (one 360 KB
    line of 1,200 records took 28 CPU s to infer a layout of 21,600 fields from, then failed; now as fast as the
    records on their own lines). The rows keep the line's number; the line is recognised when its records cover it."""
    layouts: list[tuple[nf.Layout, int]] = state["layouts"]
    records = nplan.plan([lay for lay, _ in layouts], anchored=False)
    rows = lines.with_row_index("_row")
    cut = rows.filter(long)
    found = pl.Series("_rec", [records.find_all(x) for x in cut.get_column("line")], dtype=pl.List(pl.String))
    pieces = (
        pl.concat(
            [rows.filter(~long).with_columns(pl.concat_list("line").alias("_rec")), cut.with_columns(found)]
        )
        .sort("_row")
        .with_columns(pl.col("_rec").list.eval(pl.element().str.len_bytes()).list.sum().alias("_covered"))
    )
    whole = pl.col("line").str.strip_suffix("\r").str.len_bytes() == pl.col("_covered")
    covered = pieces.select(whole | ~pl.lit(long)).to_series()
    flat = pieces.select("_row", "line_no", pl.col("_rec").alias("line")).explode("line").drop_nulls("line")
    flat = flat.with_row_index("_key")  # each record its own key while the attempts are built
    res = _parse(flat.select(pl.col("_key").cast(pl.Int64).alias("line_no"), "line"), ctx, state)
    line_nos = flat.get_column("line_no")  # each record's line's
    for name, df in res.tables.items():
        res.tables[name] = df.with_columns(line_nos.gather(df.get_column("line_no")).alias("line_no"))
    ok = (
        pl.DataFrame({"_row": flat.get_column("_row"), "ok": res.recognized})
        .group_by("_row")
        .agg(pl.col("ok").all())
    )
    per_line = (
        pl.DataFrame({"_row": pl.int_range(lines.height, eager=True).cast(pl.UInt32)})
        .join(ok, on="_row", how="left")
        .sort("_row")
        .get_column("ok")
        .fill_null(False)
    )
    res.recognized = (per_line & covered).alias("recognized")
    n = int(long.sum())
    res.messages.append(
        f"{n:,} line(s) longer than {GLUED:,} bytes read as records glued without newlines "
        f"({flat.height - (lines.height - n):,} records)"
    )
    return res


def _first_records(head: pl.Series, options: dict) -> list[str]:
    """The first record of each glued line, by the layouts the user or an nginx.conf beside the log gives (a layout
    is not inferred from glued records: where they begin and end is what it would have to know)."""
    given = nf._conf_layouts(options.get("path"))
    if options.get("nginx_log_format"):
        given.insert(
            0, nf.layout_from_format(options["nginx_log_format"], "cli", "the --nginx-log-format option")
        )
    if not given:
        return []
    firsts = nplan.plan(given, anchored=False).first_records(head.to_list())
    return [r for r in firsts if r is not None]


def _parse(lines: pl.DataFrame, ctx: ParseContext, state: dict) -> ChunkResult:
    assumptions: list[str] = []
    layouts: list[tuple[nf.Layout, int]] = state["layouts"]
    messages: list[str] = []
    # repeated every chunk (ingest keeps one copy per file), so each file of a rotated set says it
    if layouts:
        assumptions += _layout_assumptions(layouts)
    else:
        messages.append("no nginx access-log layout matches the first lines: pass it with --nginx-log-format")
    frames = []
    lays = [lay for lay, _ in layouts]
    wanted = [_wanted(lay) for lay in lays]
    # every line's layout (the first that matches it), and its rows: one per upstream attempt, by the compiled scanner
    kinds, rows = nplan.plan(lays, wanted, _reading).rows(lines.get_column("line"))
    kind = pl.DataFrame(kinds).get_column("kind")
    recognized = kind.is_not_null().alias("recognized")
    if lays and bool(recognized.any()):
        rows = pl.DataFrame(rows)
        at = rows.get_column("row")
        rows = rows.with_columns(lines.get_column("line_no").gather(at), kind.gather(at).alias("_layout"))
        for i, lay in enumerate(lays):
            mine = rows.filter(pl.col("_layout") == i)
            if mine.height:
                keep = ["line_no", "item", "items", "marked", *nplan.kept(lay, wanted[i])]
                frames.append(_attempts(mine.select(keep), lay, ctx))
    tables = {}
    if frames:  # lines read by different layouts go back to file order
        out = (
            frames[0]
            if len(frames) == 1
            else pl.concat(frames, how="diagonal_relaxed").sort("line_no", "attempt")
        )
        tables["gateway_attempts"] = out
    if frames:
        assumptions += _time_assumptions(layouts)
    return ChunkResult(tables=tables, recognized=recognized, assumptions=assumptions, messages=messages)


# how each variable read is typed (the rest are text); the times are read as written, the other texts with nginx's
# '-' (and an empty value) as null and, in an escape=json layout, \" \\ \/ unescaped
_INT = frozenset(
    {
        "status",
        "bytes_sent",
        "body_bytes_sent",
        "http_x_stainless_retry_count",
        "server_port",
        "upstream_status",
    }
)
_FLOAT = frozenset(
    {
        "request_time",
        "msec",
        "upstream_response_time",
        "upstream_connect_time",
        "upstream_header_time",
        "apisix_upstream_response_time",
    }
)
_AS_WRITTEN = frozenset({"msec", "time_iso8601", "time_local"})


def _reading(var: str, escape: str) -> dict:
    """How the scan reads a variable's value (``_nginx_plan``): its type, null spellings, escapes."""
    ty = "int" if var in _INT else "float" if var in _FLOAT else "str"
    out: dict = {"type": ty}
    if var not in _AS_WRITTEN:
        out["null"] = _NULLS
        if escape == "json" and ty == "str" and var not in nf.LIST_VARS:
            out["unescape"] = "json"
    return out


def _wanted(lay: nf.Layout) -> frozenset[str]:
    """The variables ``_attempts`` reads of a layout: $msec (epoch, always a number) makes the time fields unused."""
    return _READ - _TIME_FALLBACK if "msec" in lay.variables else _READ


def _layout_assumptions(layouts: list[tuple[nf.Layout, int]]) -> list[str]:
    lay, n = layouts[0]
    out = [f"nginx access-log fields from {lay.origin} ({n} of the first lines match: {lay.format!r})"]
    for other, m in layouts[1:]:
        if other.regex != lay.regex:
            out.append(f"lines that do not match it are tried with {other.origin} ({m} head lines match)")
    if not set(nf.LIST_VARS) & set(lay.variables):
        out.append("this nginx format has no $upstream_* fields: one row per request, attempts unknown")
    return out


def _time_assumptions(layouts: list[tuple[nf.Layout, int]]) -> list[str]:
    v = set(layouts[0][0].variables)
    out = []
    if "msec" in v:
        out.append("nginx ts_end = $msec (epoch, ms); ts_start = ts_end - $request_time")
    elif "time_iso8601" in v or "time_local" in v:
        out.append("nginx ts_end from $time_iso8601/$time_local (whole seconds, zone as logged)")
    if "apisix_upstream_response_time" in v:
        out.append("APISIX $apisix_upstream_response_time read as whole milliseconds (ai-proxy sets it so)")
    if "upstream_response_time" in v:
        out.append(
            "nginx upstream attempts are sequential: attempt k is taken to start at ts_start + the previous "
            "attempts' $upstream_response_time (an approximation; connect/queue gaps are not logged)"
        )
    return out


def _attempts(f: pl.DataFrame, lay: nf.Layout, ctx: ParseContext) -> pl.DataFrame:
    """Attempt rows of one layout's lines from the scan's rows (``nplan.read``: one per item of the list-valued
    upstream fields, each value read as its variable is: typed, ``-`` null, JSON escapes undone)."""
    have = set(f.columns)

    def col(name: str, dtype=pl.String) -> pl.Expr:
        return pl.col(name) if name in have else pl.lit(None, dtype=dtype)

    if "apisix_upstream_response_time" in have and "upstream_response_time" not in have:
        # APISIX ai-proxy's time at the model, whole ms (math.floor(s * 1000)): read in seconds like nginx's own
        f = f.with_columns((pl.col("apisix_upstream_response_time") / 1000).alias("upstream_response_time"))
        have.add("upstream_response_time")
    lists = [c for c in nf.LIST_VARS if c in have]
    req = pl.col("_request").str.extract_groups(_REQUEST)
    rows = f.select(
        "line_no",
        pl.col("item").alias("_k"),
        _ts_end(have).alias("ts_end"),
        col("request_time", pl.Float64).alias("request_time_s"),
        col("request_id").alias("request_id"),
        col("http_x_request_id").alias("client_request_id"),
        col("status", pl.Int64).alias("status"),
        col("request").alias("_request"),
        col("request_method").alias("_method"),
        col("request_uri").alias("_uri"),
        pl.coalesce(col("bytes_sent", pl.Int64), col("body_bytes_sent", pl.Int64)).alias("bytes_sent"),
        col("http_x_stainless_retry_count", pl.Int64).alias("client_retry"),
        col("http_user_agent").alias("user_agent"),
        col("server_port", pl.Int64).alias("port"),
        col("http_traceparent").alias("traceparent"),
        pl.col("items").alias("attempts_total"),
        pl.col("marked").alias("_redirect"),
        *lists,
    ).with_columns(
        req.struct.field("method").fill_null(pl.col("_method")).alias("method"),
        req.struct.field("path").fill_null(pl.col("_uri")).alias("path"),
    )
    gateway = "apisix" if lay.name.startswith("apisix") else "nginx"
    return _attempt_columns(rows, lists, ctx, gateway)


def _attempt_columns(
    rows: pl.DataFrame, lists: list[str], ctx: ParseContext, gateway: str = "nginx"
) -> pl.DataFrame:
    def item(name: str, dtype) -> pl.Expr:
        return pl.col(name) if name in lists else pl.lit(None, dtype=dtype)

    # an item after ' : ' (a switch to another upstream group, nginx's internal redirect)
    redirect = pl.col("_redirect") if lists else pl.lit(False)
    upstream, ustatus = item("upstream_addr", pl.String), item("upstream_status", pl.Int64)
    # a group name (no port, not unix:) with 502: no server could be selected, nothing was tried
    no_live = upstream.is_not_null() & ~upstream.str.contains(":") & (ustatus == 502)
    urt = item("upstream_response_time", pl.Float64)
    ts_start = pl.col("ts_end") - pl.duration(
        microseconds=(pl.col("request_time_s").fill_null(0) * 1e6).round(0).pipe(to_int)
    )
    before = _earlier_sum(urt.fill_null(0), int_value(rows.get_column("_k").max() or 0))
    return rows.select(
        (ts_start + pl.duration(microseconds=(before * 1e6).round(0).pipe(to_int)))
        .cast(TS)
        .alias("ts_start"),
        pl.col("ts_end").cast(TS),
        pl.lit(ctx.source).alias("source"),
        pl.lit(gateway).alias("gateway"),
        "request_id",
        "client_request_id",
        (pl.col("_k") + 1).cast(pl.Int64).alias("attempt"),
        "attempts_total",
        upstream.alias("upstream"),
        "status",
        ustatus.alias("upstream_status"),
        urt.alias("duration_s"),
        "request_time_s",
        item("upstream_connect_time", pl.Float64).alias("connect_s"),
        item("upstream_header_time", pl.Float64).alias("header_s"),
        pl.concat_str(
            [
                pl.when(no_live).then(pl.lit("no_live_upstreams")),
                pl.when(redirect).then(pl.lit("internal_redirect")),
            ],
            separator=",",
            ignore_nulls=True,
        )
        .replace("", None)
        .alias("flags"),
        pl.when(no_live).then(pl.lit("no live upstreams")).alias("error"),
        "method",
        "path",
        "bytes_sent",
        "client_retry",
        "user_agent",
        "port",
        "line_no",
        "traceparent",
    )


def _earlier_sum(v: pl.Expr, k_max: int) -> pl.Expr:
    """Sum of ``v`` over the earlier attempts of the same request (rows of a request are consecutive,
    ``_k`` = 0, 1, ...): shifted columns rather than a window per request, which costs 4x more."""
    if k_max > 8:  # a long upstream list: the window is cheaper than that many shifts
        return (v.cum_sum().over("line_no", order_by="_k") - v).fill_null(0)
    k = pl.col("_k")
    out = pl.lit(0.0)
    for j in range(k_max, 0, -1):  # add the oldest attempt first, like a running sum
        out = out + pl.when(k >= j).then(v.shift(j)).otherwise(0.0)
    return out


def _ts_end(have: set[str]) -> pl.Expr:
    """$msec (epoch with ms) when logged, else $time_iso8601 / $time_local (they carry their zone)."""
    out = []
    if "msec" in have:
        out.append(epoch_to_utc(pl.col("msec").cast(pl.Float64, strict=False)))
    if "time_iso8601" in have:
        iso = pl.col("time_iso8601").str.replace(r"Z$", "+00:00")
        out.append(iso.str.to_datetime("%Y-%m-%dT%H:%M:%S%.f%:z", strict=False, time_unit="us"))
    if "time_local" in have:
        out.append(pl.col("time_local").str.to_datetime("%d/%b/%Y:%H:%M:%S %z", strict=False, time_unit="us"))
    if not out:
        return pl.lit(None, dtype=TS)
    return pl.coalesce([e.cast(TS) for e in out])
