"""Access records of a proxy no other format reads -> ``gateway_attempts``: JSON (one record a line, or pretty-printed
over many lines, strict or not) and key=value lines, each field found by its name.

Samples: Higress (Envoy) pretty-printed by a reporter, with a single-quoted value and a trailing comma
(gpustack/gpustack#4720, public-2 g07); Istio's JSON as engarde prints it (nitishm/engarde#8); Envoy with a key=value
format, and that format beside it (envoyproxy/envoy#9242, tests/data/gateway-generic)::

    [05/12/2019T16:14:53+0000 1575562493] method=POST ... response_flag=UT ... status=200 ... total_time_ms=15001 upstream=127.0.0.1:7000

How a record is read. Lines are grouped into records by their braces: a line that opens more braces than it closes at
depth 0 starts a JSON record, which goes on until they are closed; any other line is a record of its own. A record's
fields are found by regex (``"key": value`` or ``key=value``), never by a JSON decoder, so a value a paste broke does
not lose the rest. A field is known by its name, in the order of ``FIELDS`` (the first name present wins; case does not
matter): status, method, path, duration (its unit from its name: ``_ms``/``duration`` in milliseconds, Traefik's
``Duration`` in nanoseconds, nginx's ``request_time`` in seconds), upstream, upstream service time, request id, trace
id, response flags, response code details, start time, user agent, bytes sent, attempts. When a file beside the log
holds an Envoy format string (``key=%OPERATOR%`` pairs: a config, or the format a reporter quoted), its operators name
the fields instead. Which name gave which field is said in the file's assumptions (files.parquet); names read by no
field are listed there too.

The gateway is named by its fields: Envoy's (``response_flags``, ``upstream_cluster``, ...) give 'envoy', Traefik's
(``DownstreamStatus``) 'traefik', else 'generic'. One record is one request, its last upstream attempt (as Envoy and
Traefik log). A status 0 (no response: the client left) is no status.
"""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from logscope.numbers import to_int
from logscope.schemas import TS

from ._common import epoch_to_utc
from .base import ChunkResult, ParseContext, nonblank, one_head, per_head

NAME = "access_generic"
KIND = "gateway"
MODE = "lines"
SPEED = 10  # MB/s on one core: a regex per name of each field (a reader of last resort, for small files)
DESCRIPTION = (
    "access records of any proxy: JSON (one line, or pretty-printed over many) or key=value, fields mapped by "
    "their names (or by an Envoy format string beside the log)"
)
SAMPLES = [  # envoyproxy/envoy#9242 (key=value), envoyproxy/envoy#24063 (a JSON line a custom format broke)
    "[05/12/2019T16:14:53+0000 1575562493] method=POST authority=localhost:443 txId=- request=/StudentService/get alpn=HTTP/2 response_flag=UT ssl_protocol=TLSv1.3 ssl_cipher=TLS_AES_128_GCM_SHA256 status=200 status_details=upstream_response_timeout request_size=84 response_size=0 envoy_request_id=52220e61-e045-4dc7-bdc3-c8b5e77dd2ee user-agent=grpc-go/1.24.0 xFor=49.207.48.241 x-envoy-upstream-service-time=- total_time_ms=15001 upstream=127.0.0.1:7000",
    '{"url":"user/login","method":"POST","upstream-service-time":"4","my_custom_header":"Bearer *************************","duration":5,","status":200,"x-forwarded-for":null,"respflags":"UPE","bytes-sent":0,""protocol":"HTTP/1.1"}',
]

# field -> the names it goes by, first wins (compared without case)
FIELDS: dict[str, tuple[str, ...]] = {
    "status": (
        "status",
        "status_code",
        "response_code",
        "responsecode",
        "downstreamstatus",
        "code",
        "http_status",
    ),
    "upstream_status": ("upstream_status", "originstatus"),
    "method": ("method", "request_method", "requestmethod", ":method", "http_method"),
    "path": ("path", "uri_path", "request_path", "requestpath", "uri", "request_uri", "request", "url"),
    "duration": (
        "duration",
        "total_time_ms",
        "duration_ms",
        "request_time",
        "request_duration",
        "durationms",
    ),
    "upstream": (
        "upstream_host",
        "upstream",
        "upstream_addr",
        "upstream_service",
        "serviceaddr",
        "upstream_cluster",
    ),
    "upstream_time": (
        "upstream_service_time",
        "x-envoy-upstream-service-time",
        "upstream-service-time",
        "upstream_response_time",
        "originduration",
    ),
    "request_id": ("x_request_id", "request_id", "x-request-id", "envoy_request_id", "requestid", "req_id"),
    "trace_id": ("trace_id", "traceid", "x-b3-traceid", "x_b3_traceid", "traceparent"),
    "flags": ("response_flags", "response_flag", "respflags", "responseflags", "flags"),
    "details": ("response_code_details", "status_details", "responsecodedetails"),
    "start": ("start_time", "starttime", "startutc", "timestamp", "@timestamp", "time", "ts"),
    "user_agent": ("user_agent", "user-agent", "useragent", "request_user-agent", "http_user_agent"),
    "bytes_sent": ("bytes_sent", "bytes-sent", "response_size", "downstreamcontentsize", "body_bytes_sent"),
    "attempts": ("upstream_request_attempt_count", "attempts", "attempt_count", "retryattempts"),
}
_ENVOY_NAMES = {"response_flags", "response_flag", "respflags", "upstream_cluster", "response_code_details"}
_ENVOY_NAMES |= {
    "x-envoy-upstream-service-time",
    "upstream_service_time",
    "upstream_host",
    "envoy_request_id",
}
# seconds per unit of a duration, by the name it was read from (Traefik writes nanoseconds, nginx seconds)
_UNIT_S = {"request_time": 1.0, "upstream_response_time": 1.0, "duration_s": 1.0}
_NS = {"Duration", "OriginDuration"}  # Traefik's (case matters: Envoy's 'duration' is in milliseconds)
# an Envoy operator -> the field it fills (a format string beside the log names the fields by them)
_OPERATORS = {
    "RESPONSE_CODE": "status",
    "REQ(:METHOD)": "method",
    "REQ(X-ENVOY-ORIGINAL-PATH?:PATH)": "path",
    "REQ(:PATH)": "path",
    "DURATION": "duration",
    "UPSTREAM_HOST": "upstream",
    "RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)": "upstream_time",
    "REQ(X-REQUEST-ID)": "request_id",
    "REQ(TRACEPARENT)": "trace_id",
    "RESPONSE_FLAGS": "flags",
    "RESPONSE_CODE_DETAILS": "details",
    "REQ(USER-AGENT)": "user_agent",
    "BYTES_SENT": "bytes_sent",
    "UPSTREAM_REQUEST_ATTEMPT_COUNT": "attempts",
}
_FORMAT_PAIR = re.compile(r"([\w.:-]+)=%([A-Z_]+(?:\([^)%]*\))?)(?::\d+)?%")
_VALUE = r"""("(?:[^"\\]|\\.)*"|'[^']*'|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|null|true|false)"""
_KV_VALUE = r"""("[^"]*"|[^\s"]*)"""
_STATUS_NAMES = "|".join(re.escape(n) for n in FIELDS["status"])
_PATH_NAMES = "|".join(re.escape(n) for n in (*FIELDS["method"], *FIELDS["path"]))
_DETECT_JSON = rf"""(?i)"(?:{_STATUS_NAMES})"\s*:\s*"?\d{{1,3}}\b"""
_DETECT_PATH = rf"""(?i)"(?:{_PATH_NAMES})"\s*:"""
_DETECT_KV = rf"(?i)(?:^|[\s\]])(?:{_STATUS_NAMES})=\d{{1,3}}(?:\s|$)"
_KV_PAIRS = r"(?:^|[\s\]])[\w.:@-]+=\S"
_MEMBER = r'^\s*"[^"]+"\s*:'  # a line of a pretty-printed JSON object
_BRACKET_EPOCH = r"^\[[^\]]*?\b(\d{10})(?:\.\d+)?\]"  # '[05/12/2019T16:14:53+0000 1575562493]'
_ISO = r"^(\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:\.\d{1,6})?)\d*(Z|[+-]\d\d:?\d\d)?$"


def detect_heads(frame: pl.DataFrame, n: int) -> pl.Series:
    s = pl.col("line").str.slice(0, 4000)
    js = s.str.contains(_DETECT_JSON) & s.str.contains(_DETECT_PATH)
    kv = s.str.contains(_DETECT_KV) & (s.str.count_matches(_KV_PAIRS) >= 4)
    member = s.str.contains(_MEMBER) | s.str.contains(r"^\s*[{}],?\s*$")
    g = per_head(
        nonblank(frame, 200),
        n,
        rec=(js | kv).mean(),
        pretty=member.mean(),
        status=s.str.contains(rf'(?i)^\s*"(?:{_STATUS_NAMES})"\s*:\s*"?\d{{1,3}}').any(),
        path=s.str.contains(rf'(?i)^\s*"(?:{_PATH_NAMES})"\s*:').any(),
    )
    # below the formats that know their proxy (Envoy's and Traefik's own score 1 on their lines)
    pretty = pl.when(pl.col("status") & pl.col("path")).then(0.75 * pl.col("pretty")).otherwise(0.0)
    return g.select(pl.max_horizontal(0.7 * pl.col("rec"), pretty)).to_series()


def detect(head: list[str]) -> float:
    return one_head(detect_heads, head)


def parse_chunk(lines: pl.DataFrame, ctx: ParseContext, state: dict) -> ChunkResult:
    if "names" not in state:
        state["names"] = _config_names(ctx)
    recs, ok = _records(lines, state)
    tables = {}
    if recs.height:
        rows = _rows(recs, ctx, state)
        if rows.height:
            tables["gateway_attempts"] = rows
    return ChunkResult(tables=tables, recognized=ok)


def finish(ctx: ParseContext, state: dict) -> ChunkResult | None:
    tables = {}
    pend = state.pop("pending", None)
    if pend is not None and pend.height:  # a record its file ends inside: read as it is
        recs = pend.group_by(pl.lit(1).alias("_rec")).agg(
            pl.col("line_no").first(), pl.col("line").str.join("\n").alias("text")
        )
        recs = recs.filter(
            pl.col("text").str.contains(_DETECT_JSON) | pl.col("text").str.contains(_DETECT_KV)
        )
        if recs.height:
            tables["gateway_attempts"] = _rows(recs, ctx, state)
    used: dict[str, set[str]] = state.get("used", {})
    if not used:
        return ChunkResult(tables=tables) if tables else None
    how = state["names"][1]
    mapped = "; ".join(f"{f} <- {', '.join(sorted(k))}" for f, k in used.items())
    note = f"access records read by their field names ({how}): {mapped}"
    unread = sorted(state.get("unread", set()))
    if unread:
        note += f"; not read: {', '.join(unread[:30])}" + (" ..." if len(unread) > 30 else "")
    return ChunkResult(tables=tables, assumptions=[note])


# ---- records -----------------------------------------------------------------------------------


def _records(lines: pl.DataFrame, state: dict) -> tuple[pl.DataFrame, pl.Series]:
    """One row per record (``line_no`` of its first line, ``text`` its lines joined); a JSON record still open at
    the chunk's end waits in ``state`` for its closing lines. Every line of a record is recognised."""
    pend = state.pop("pending", None)
    f = lines.select("line_no", pl.col("line").str.strip_chars_end("\r"))
    if pend is not None:
        f = pl.concat([pend, f])
    line = pl.col("line")
    delta = (line.str.count_matches("{", literal=True) - line.str.count_matches("}", literal=True)).cast(
        pl.Int64
    )
    f = f.with_columns(delta.cum_sum().alias("_after"))
    f = f.with_columns((pl.col("_after") - delta).alias("_before"))
    start = (pl.col("_before") <= 0) & (line.str.strip_chars() != "")
    f = f.with_columns(start.cum_sum().alias("_rec"))
    last = f["_rec"].max() if f.height else None
    if f.height and f["_after"][-1] > 0 and last:  # the last record goes on in the next chunk
        state["pending"] = f.filter(pl.col("_rec") == last).select("line_no", "line")
        f = f.filter(pl.col("_rec") != last)
    recs = (
        f.filter(pl.col("_rec") > 0)
        .group_by("_rec", maintain_order=True)
        .agg(pl.col("line_no").first(), line.str.join("\n").alias("text"), pl.len().alias("_n"))
    )
    fields = _JSON_OR_KV
    is_rec = pl.col("text").str.contains(fields[0]) | pl.col("text").str.contains(fields[1])
    recs = recs.filter(is_rec)
    held = state["pending"]["line_no"] if "pending" in state else pl.Series([], dtype=pl.Int64)
    rec_lines = f.join(recs.select("_rec"), on="_rec", how="semi")["line_no"]
    blank = lines.filter(pl.col("line").str.strip_chars() == "")["line_no"]
    ok = lines["line_no"].is_in(pl.concat([rec_lines, held, blank]).implode())
    return recs, ok


_JSON_OR_KV = (_DETECT_JSON, _DETECT_KV)


def _field(name: str, names: dict[str, tuple[str, ...]]) -> pl.Expr:
    """``{name}`` as a struct of ``k`` (the name it was read from, the first of its names the record holds) and ``v``
    (its value, unquoted; '-', '' and null as null)."""
    found = []
    for n in names[name]:
        e = re.escape(n)
        g = pl.col("text").str.extract_groups(
            rf'(?i)(?:"({e})"\s*:\s*{_VALUE}|(?:^|[\s\]])({e})={_KV_VALUE})'
        )
        found.append(
            pl.struct(
                pl.coalesce(g.struct.field("1"), g.struct.field("3")).alias("k"),
                pl.coalesce(g.struct.field("2"), g.struct.field("4")).alias("v"),
            )
        )
    hit = pl.coalesce(pl.when(f.struct.field("k").is_not_null()).then(f) for f in found)
    val = hit.struct.field("v").str.strip_chars('"').str.strip_chars("'")
    val = pl.when(val.is_in(["-", "", "null"])).then(None).otherwise(val)
    return pl.struct(hit.struct.field("k").alias("k"), val.alias("v")).alias(name)


def _rows(recs: pl.DataFrame, ctx: ParseContext, state: dict) -> pl.DataFrame:
    names = state["names"][0]
    f = recs.with_columns(_field(n, names) for n in names)
    used = state.setdefault("used", {})
    for n in names:
        keys = f[n].struct.field("k").drop_nulls().unique().to_list()
        if keys:
            used.setdefault(n, set()).update(keys)
    found = f["text"].str.extract_all(r'"([^"\s]+)"\s*:|(?:^|[\s\]])([\w.:@-]+)=').explode().drop_nulls()
    every = set(
        found.str.replace(r"^[\s\]]", "").str.strip_chars('"').str.strip_suffix(":").str.strip_suffix("=")
    )
    known = {k.lower() for ks in used.values() for k in ks}
    unread = state.setdefault("unread", set())
    if len(unread) < 100:
        unread.update(k for k in every if k.lower() not in known)

    def v(n: str) -> pl.Expr:
        return pl.col(n).struct.field("v")

    def k(n: str) -> pl.Expr:
        return pl.col(n).struct.field("k")

    status = v("status").cast(pl.Int64, strict=False)
    dur = v("duration").cast(pl.Float64, strict=False)
    unit = (
        pl.when(k("duration").is_in(list(_NS)))
        .then(1e-9)
        .when(k("duration").str.to_lowercase().is_in(list(_UNIT_S)))
        .then(1.0)
        .otherwise(1e-3)  # milliseconds: Envoy's %DURATION%, Istio's and most proxies' 'duration'
    )
    up_unit = (
        pl.when(k("upstream_time").is_in(list(_NS)))
        .then(1e-9)
        .when(k("upstream_time").str.to_lowercase() == "upstream_response_time")
        .then(1.0)
        .otherwise(1e-3)
    )
    start = _start(v("start"), pl.col("text"))
    details, flags = v("details"), v("flags")
    keys_all = pl.col("text").str.to_lowercase()
    envoy = pl.any_horizontal(
        keys_all.str.contains(f'"{n}"', literal=True) | keys_all.str.contains(f"{n}=", literal=True)
        for n in _ENVOY_NAMES
    )
    traefik = pl.col("text").str.contains('"DownstreamStatus"', literal=True)
    attempts = v("attempts").cast(pl.Int64, strict=False)
    attempts = (
        pl.when(k("attempts").str.to_lowercase() == "retryattempts").then(attempts + 1).otherwise(attempts)
    )
    up_status = v("upstream_status").cast(pl.Int64, strict=False)
    from_upstream = pl.when(details.is_not_null()).then(details == "via_upstream")
    return f.select(
        start.cast(TS).alias("ts_start"),
        (start + pl.duration(microseconds=(dur * unit * 1e6).round(0).pipe(to_int))).cast(TS).alias("ts_end"),
        pl.lit(ctx.source).alias("source"),
        pl.when(traefik)
        .then(pl.lit("traefik"))
        .when(envoy)
        .then(pl.lit("envoy"))
        .otherwise(pl.lit("generic"))
        .alias("gateway"),
        v("request_id").alias("request_id"),
        pl.when(attempts > 0).then(attempts).alias("attempt"),
        attempts.alias("attempts_total"),
        v("upstream").alias("upstream"),
        pl.when(status > 0).then(status).alias("status"),
        pl.coalesce(
            pl.when(up_status > 0).then(up_status), pl.when(from_upstream & (status > 0)).then(status)
        ).alias("upstream_status"),
        (v("upstream_time").cast(pl.Float64, strict=False) * up_unit).alias("duration_s"),
        (dur * unit).alias("request_time_s"),
        flags.alias("flags"),
        pl.when(details != "via_upstream").then(details).alias("error"),
        v("method").alias("method"),
        v("path").alias("path"),
        v("bytes_sent").cast(pl.Int64, strict=False).alias("bytes_sent"),
        v("user_agent").alias("user_agent"),
        v("trace_id").alias("trace_id"),
        "line_no",
    )


def _start(value: pl.Expr, text: pl.Expr) -> pl.Expr:
    """A record's start: an ISO 8601 time (its zone, else UTC), epoch seconds or milliseconds, or the epoch seconds
    in a leading '[...]' (Envoy's %START_TIME(... %s)%)."""
    iso = value.str.extract_groups(_ISO)
    zone = (
        iso.struct.field("2")
        .fill_null("Z")
        .str.replace("Z", "+00:00")
        .str.replace(r"^([+-]\d\d)(\d\d)$", "$1:$2")
    )
    t = pl.concat_str(iso.struct.field("1").str.replace(" ", "T"), zone).str.to_datetime(
        "%Y-%m-%dT%H:%M:%S%.f%:z", strict=False, time_unit="us", time_zone="UTC"
    )
    num = value.cast(pl.Float64, strict=False)
    epoch = pl.when(num > 1e11).then(num / 1000).otherwise(num)
    bracket = text.str.extract(_BRACKET_EPOCH).cast(pl.Float64, strict=False)
    return pl.coalesce(t, epoch_to_utc(pl.when(epoch > 1e8).then(epoch)), epoch_to_utc(bracket))


# ---- a format string beside the log --------------------------------------------------------------------------------

_CONFIG_SUFFIXES = {".yaml", ".yml", ".json", ".txt", ".conf", ".cfg"}


def _config_names(ctx: ParseContext) -> tuple[dict[str, tuple[str, ...]], str]:
    """The names of each field: those an Envoy format string in a file beside the log gives its operators (the
    first such file, by name), before the usual ones; and how they were chosen, for the assumption."""
    path = ctx.options.get("path") if ctx.options else None
    if not path:
        return FIELDS, "the usual names"
    here = Path(path)
    for p in sorted(here.parent.iterdir()) if here.parent.is_dir() else []:
        if (
            p == here
            or p.suffix.lower() not in _CONFIG_SUFFIXES
            or not p.is_file()
            or p.stat().st_size > 1 << 20
        ):
            continue
        try:
            text = p.read_text(errors="replace")
        except OSError:
            continue
        pairs = [(key, field) for key, op in _FORMAT_PAIR.findall(text) if (field := _OPERATORS.get(op))]
        if len(pairs) >= 3:
            mine: dict[str, list[str]] = {}
            for key, field in pairs:
                mine.setdefault(field, []).append(key.lower())
            names = {f: tuple(dict.fromkeys([*mine.get(f, []), *ns])) for f, ns in FIELDS.items()}
            return names, f"the operators of the access log format in {p.name} beside it"
    return FIELDS, "the usual names"
