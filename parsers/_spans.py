"""What every trace format gives: one row per span of the ``spans`` table (``logscope/schemas.py``).

The format modules (``otlp_json``, ``jaeger_json``, ``zipkin_json``, ``otel_console``, ``otel_debug``) turn their
records into plain span records (``Span``: ids in hex, times in Unix nanoseconds, attributes as key and value
text); ``table`` makes the rows: ids normalised (lowercase hex, trace ids 32 wide, span ids 16: a Zipkin or
Jaeger 64-bit trace id padded with zeros as W3C ``traceparent`` carries it), kind and status in one spelling,
the attributes logscope reads as typed columns (both GenAI naming eras, OpenInference ``llm.*``, old and new
HTTP names), the rest kept as key/value pairs, and each span's layer (client / gateway / engine) and role.

Attribute names (upstream): vLLM ``vllm/tracing.py`` SpanAttributes (``gen_ai.request.id``,
``gen_ai.latency.time_in_queue`` / ``time_to_first_token`` / ``e2e`` / ``time_in_model_prefill`` / ``decode`` /
``inference``, ``gen_ai.usage.prompt_tokens`` / ``completion_tokens``); the GenAI semantic conventions' newer
``gen_ai.usage.input_tokens`` / ``output_tokens``; OpenInference ``llm.token_count.prompt`` / ``completion``,
``llm.model_name``; HTTP semantic conventions ``http.response.status_code`` (``http.status_code`` before 1.21),
``http.request.method`` (``http.method``), ``url.full`` (``http.url``), ``server.address`` (``net.peer.name``),
``http.request.resend_count``. SGLang (``srt/observability/trace.py``, 0.5) names a request's root span
``"{role} Req {rid[:8]}"`` (role '' when not disaggregated: a leading space; 'prefill' / 'decode') with the whole rid
in its ``rid`` attribute; its stages are spans under a thread span: ``prefill_waiting`` is the queue.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import polars as pl

from logscope.numbers import number

from ._common import ID_PREFIX

TS = pl.Datetime("us", "UTC")


@dataclass
class Span:
    trace_id: str | None
    span_id: str | None
    parent_span_id: str | None
    name: str | None
    service: str | None
    kind: str | None  # as written: 2, 'SPAN_KIND_SERVER', 'SpanKind.SERVER', 'Server', 'SERVER'
    start_ns: int | None
    end_ns: int | None
    status: str | None  # as written: 2, 'STATUS_CODE_ERROR', 'ERROR', 'Error'
    status_message: str | None = None
    attrs: list[tuple[str, str, str | None]] = field(default_factory=list)  # key, value text, value type
    events: list[tuple[str | None, int | None]] = field(default_factory=list)  # name (as text), time
    scope: str | None = None
    line_no: int | None = None


# typed columns: (column, dtype, attribute names in order of preference)
TYPED: list[tuple[str, pl.DataType | type[pl.DataType], tuple[str, ...]]] = [
    ("request_id", pl.String, ("gen_ai.request.id", "gen_ai.response.id")),
    ("http_method", pl.String, ("http.request.method", "http.method")),
    ("http_status", pl.Int64, ("http.response.status_code", "http.status_code")),
    ("resend_count", pl.Int64, ("http.request.resend_count",)),
    ("url", pl.String, ("url.full", "http.url", "http.target", "url.path", "http.path")),
    ("server_address", pl.String, ("server.address", "net.peer.name", "http.host")),
    ("model", pl.String, ("gen_ai.response.model", "gen_ai.request.model", "llm.model_name")),
    ("max_tokens", pl.Int64, ("gen_ai.request.max_tokens",)),
    (
        "prompt_tokens",
        pl.Int64,
        ("gen_ai.usage.prompt_tokens", "gen_ai.usage.input_tokens", "llm.token_count.prompt"),
    ),
    (
        "output_tokens",
        pl.Int64,
        ("gen_ai.usage.completion_tokens", "gen_ai.usage.output_tokens", "llm.token_count.completion"),
    ),
    ("queue_s", pl.Float64, ("gen_ai.latency.time_in_queue",)),
    ("ttft_s", pl.Float64, ("gen_ai.latency.time_to_first_token",)),
    ("e2e_s", pl.Float64, ("gen_ai.latency.e2e",)),
    ("prefill_s", pl.Float64, ("gen_ai.latency.time_in_model_prefill",)),
    ("decode_s", pl.Float64, ("gen_ai.latency.time_in_model_decode",)),
    ("inference_s", pl.Float64, ("gen_ai.latency.time_in_model_inference",)),
    ("openinference_kind", pl.String, ("openinference.span.kind",)),
]
TYPED_KEYS = {k for _, _, keys in TYPED for k in keys}
_ENGINE_SERVICE = r"(?i)vllm|sglang|\btgi\b|text-generation-inference|tensorrt|trtllm|llm[-_]?engine"
_GATEWAY_SERVICE = r"(?i)nginx|envoy|haproxy|traefik|litellm|gateway|proxy|router|apisix|kong|ingress"
_FIRST_TOKEN = r"(?i)first[ _.-]?token"
_SGLANG_REQ = r"^\s*(?:\w+ )?Req \S+$"
_SGLANG_QUEUE = "prefill_waiting"
# attributes that carry prompt or answer text (OpenInference, the GenAI conventions of both eras, OpenLLMetry,
# Google ADK):
# dropped unless prompts are asked for (``--include-prompts``), as the log parsers do
_CONTENT = (
    r"^(input\.value|output\.value|llm\.(input|output)_messages\.\d+\.message\.(content|contents\..*|tool_calls\..*arguments)"
    r"|llm\.prompts?(\..*)?|llm\.prompt_template\..*|gen_ai\.(prompt|completion)(\.\d+\.(content|tool_calls\.\d+\.arguments))?"
    r"|gen_ai\.(input|output)\.messages|gen_ai\.system_instructions|gen_ai\.tool\.call\.(arguments|result)"
    r"|gcp\.vertex\.agent\.llm_(request|response))$"
)
_KINDS = {"0": "unspecified", "1": "internal", "2": "server", "3": "client", "4": "producer", "5": "consumer"}
_STATUS = {"0": "unset", "1": "ok", "2": "error"}


def base_id(e: pl.Expr) -> pl.Expr:
    """vLLM's ``cmpl-<X-Request-Id>-<index>-<8 hex>`` (0.14+; ``-<index>`` before) -> the X-Request-Id: one suffix
    stripped, never both (``parsers._common.base_id_expr`` strips the index after the hex, and an id ending in
    ``-00007`` loses it)."""
    bare = e.str.replace(ID_PREFIX, "")
    cmpl = e.str.starts_with("cmpl-")
    return (
        pl.when(cmpl & bare.str.contains(r"-[0-9]+-[0-9a-f]{8}$"))
        .then(bare.str.replace(r"-[0-9]+-[0-9a-f]{8}$", ""))
        .when(cmpl)
        .then(bare.str.replace(r"-[0-9]+$", ""))
        .otherwise(bare)
    )


def _hex(e: pl.Expr, width: int) -> pl.Expr:
    v = e.str.strip_chars().str.to_lowercase().str.replace(r"^0x", "")
    v = pl.when(v.str.contains(r"^[0-9a-f]+$")).then(v.str.pad_start(width, "0"))
    return pl.when(v.str.contains(r"^0+$")).then(None).otherwise(v)


def _word(e: pl.Expr, ints: dict[str, str], prefix: str) -> pl.Expr:
    """2 / 'SPAN_KIND_SERVER' / 'SpanKind.SERVER' / 'Server' -> 'server'."""
    w = e.str.strip_chars().str.to_lowercase().str.replace(prefix, "").str.replace(r"^[a-z]+\.", "")
    return w.replace(ints)


ATTRS = pl.List(pl.Struct({"key": pl.String, "value": pl.String, "type": pl.String}))
EVENTS = pl.List(pl.Struct({"name": pl.String, "ns": pl.Int64}))
RAW: dict[str, pl.DataType | type[pl.DataType]] = {
    "trace_id": pl.String,
    "span_id": pl.String,
    "parent_span_id": pl.String,
    "name": pl.String,
    "service": pl.String,
    "kind": pl.String,
    "start_ns": pl.Int64,
    "end_ns": pl.Int64,
    "status": pl.String,
    "status_message": pl.String,
    "attributes": ATTRS,
    "ev": EVENTS,
    "scope": pl.String,
    "line_no": pl.Int64,
}


def _lists(idx: list[int], cols: dict[str, list], n: int, dtype: pl.List) -> pl.Series:
    """Flat (span index, fields...) rows -> one list of structs per span (empty for a span with none): built
    from flat columns, as polars builds a nested column from Python dicts at ~1 MB/s."""
    fields = dtype.inner
    if not isinstance(fields, pl.Struct):
        raise TypeError(f"a list of structs was expected, not {dtype}")
    flat = pl.DataFrame({"i": idx, **cols}, schema={"i": pl.Int64, **dict(fields.to_schema())})
    per = flat.group_by("i").agg(pl.struct(list(cols)).alias("v"))
    return (
        pl.DataFrame({"i": range(n)}, schema={"i": pl.Int64})
        .join(per, on="i", how="left")
        .sort("i")
        .select(pl.col("v").fill_null(pl.lit([], dtype)))
        .to_series()
    )


def table(spans: list[Span], source: str, replica: str, prompts: bool = False) -> pl.DataFrame:
    """The ``spans`` rows of these span records (columns as declared; ``schemas.conform`` orders them)."""
    if not spans:
        return pl.DataFrame()
    ai: list[int] = []
    ak: list[str] = []
    av: list[str] = []
    at: list[str | None] = []
    ei: list[int] = []
    en: list[str | None] = []
    et: list[int | None] = []
    for i, s in enumerate(spans):
        for key, value, kind in s.attrs:
            ai.append(i)
            ak.append(key)
            av.append(value)
            at.append(kind)
        for name, t in s.events:
            ei.append(i)
            en.append(name)
            et.append(t)
    raw = pl.DataFrame(
        {
            "trace_id": [s.trace_id for s in spans],
            "span_id": [s.span_id for s in spans],
            "parent_span_id": [s.parent_span_id for s in spans],
            "name": [s.name for s in spans],
            "service": [s.service for s in spans],
            "kind": [None if s.kind is None else str(s.kind) for s in spans],
            "start_ns": [s.start_ns for s in spans],
            "end_ns": [s.end_ns for s in spans],
            "status": [None if s.status is None else str(s.status) for s in spans],
            "status_message": [s.status_message or None for s in spans],
            "scope": [s.scope for s in spans],
            "line_no": [s.line_no for s in spans],
        },
        schema={k: v for k, v in RAW.items() if k not in ("attributes", "ev")},
    ).with_columns(
        _lists(ai, {"key": ak, "value": av, "type": at}, len(spans), ATTRS).alias("attributes"),
        _lists(ei, {"name": en, "ns": et}, len(spans), EVENTS).alias("ev"),
    )
    return finish(raw.select(list(RAW)), source, replica, prompts)


def _attr(keys: tuple[str, ...]) -> pl.Expr:
    got = [
        pl.col("attributes")
        .list.eval(pl.element().filter(pl.element().struct.field("key") == k).struct.field("value"))
        .list.first()
        for k in keys
    ]
    return pl.coalesce(got) if len(got) > 1 else got[0]


def _cast(e: pl.Expr, dtype: pl.DataType | type[pl.DataType]) -> pl.Expr:
    if dtype == pl.Int64:
        return e.cast(pl.Float64, strict=False).round(0).cast(pl.Int64, strict=False)
    return e.cast(dtype, strict=False)


def finish(raw: pl.DataFrame, source: str, replica: str, prompts: bool = False) -> pl.DataFrame:
    ns = lambda c: pl.from_epoch(pl.col(c) // 1000, time_unit="us").dt.replace_time_zone("UTC")  # noqa: E731
    first_tok = (
        pl.col("ev")
        .list.eval(
            pl.element()
            .filter(pl.element().struct.field("name").str.contains(_FIRST_TOKEN))
            .struct.field("ns")
        )
        .list.first()
    )
    if not prompts:
        raw = raw.with_columns(
            pl.col("attributes").list.eval(
                pl.element().filter(~pl.element().struct.field("key").str.contains(_CONTENT))
            )
        )
    df = raw.with_columns(
        _hex(pl.col("trace_id"), 32).alias("trace_id"),
        _hex(pl.col("span_id"), 16).alias("span_id"),
        _hex(pl.col("parent_span_id"), 16).alias("parent_span_id"),
        _word(pl.col("kind"), _KINDS, "span_kind_").alias("kind"),
        _word(pl.col("status"), _STATUS, "status_code_").alias("status"),
        ns("start_ns").alias("start"),
        ns("end_ns").alias("end"),
        # times 1e-9, not / 1e9: polars divides one row exactly but many by the reciprocal's product, so a chunk of
        # one span gave another last digit than a chunk of many (a file read in smaller chunks)
        ((pl.col("end_ns") - pl.col("start_ns")) * 1e-9).alias("duration_s"),
        pl.when(first_tok.is_not_null()).then(pl.from_epoch(first_tok // 1000, time_unit="us")).alias("ft"),
        *[_cast(_attr(keys), t).alias(c) for c, t, keys in TYPED],
        # OpenInference keeps the request's parameters as one JSON text
        _attr(("llm.invocation_parameters",)).str.json_path_match("$.max_tokens").alias("_oi_max"),
    )
    df = df.with_columns(
        pl.coalesce("max_tokens", _cast(pl.col("_oi_max"), pl.Int64())).alias("max_tokens"),
        pl.col("ft").dt.replace_time_zone("UTC").alias("first_token_ts"),
        pl.col("ev")
        .list.eval(pl.element().struct.field("name"))
        .list.join(",")
        .replace("", None)
        .alias("events"),
        # SGLang's request root span: its rid attribute, else the 8 characters its name keeps
        pl.coalesce(
            "request_id",
            pl.when(pl.col("name").str.contains(_SGLANG_REQ)).then(
                pl.coalesce(_attr(("rid",)), pl.col("name").str.extract(r"Req (\S+)$", 1))
            ),
        ).alias("request_id"),
        pl.col("attributes")
        .list.eval(pl.element().filter(~pl.element().struct.field("key").is_in(list(TYPED_KEYS))))
        .list.eval(
            # one spelling of a double whichever reader decoded it (3.1597e-05 and 0.000031597 alike)
            pl.element().struct.with_fields(
                pl.when(pl.field("type") == "double")
                .then(pl.field("value").cast(pl.Float64, strict=False).cast(pl.String))
                .otherwise(pl.field("value"))
                .alias("value")
            )
        ),
    )
    df = df.with_columns(
        # a first-token event on a span without the TTFT attribute gives it
        pl.coalesce(
            "ttft_s", (pl.col("first_token_ts") - pl.col("start")).dt.total_microseconds() * 1e-6
        ).alias("ttft_s"),
        base_id(pl.col("request_id")).alias("base_request_id"),
        pl.lit(source).alias("source"),
        pl.lit(replica).alias("replica"),
    )
    return layers(df.drop("_oi_max"))


def layers(df: pl.DataFrame) -> pl.DataFrame:
    """Each span's ``layer`` (client / gateway / engine / other) and ``role`` (request, attempt, phase, startup,
    other): by its attributes and service first, then by its relations (a client attempt's parent in the same
    service is the logical request; an engine span under an engine request span is one of its phases; an engine
    span in a trace holding no engine request is start-up work)."""
    svc = pl.coalesce(pl.col("service"), pl.lit("")) + " " + pl.coalesce(pl.col("scope"), pl.lit(""))
    gateway = svc.str.contains(_GATEWAY_SERVICE)
    # an engine's own figures or span names; a request id alone is not one: a gateway (LiteLLM) writes the
    # upstream's gen_ai.response.id on its span
    engine = (
        pl.any_horizontal(
            [pl.col(c).is_not_null() for c in ("queue_s", "e2e_s", "prefill_s", "decode_s", "inference_s")]
        )
        | (pl.col("name") == "llm_request")
        | svc.str.contains(_ENGINE_SERVICE)
        # a gateway (LiteLLM) and a caller's GenAI instrumentation (openai-v2) name the upstream's response id
        | (pl.col("request_id").is_not_null() & ~gateway & (pl.col("kind") != "client"))
    )
    http = pl.any_horizontal([pl.col(c).is_not_null() for c in ("http_method", "http_status", "url")])
    df = df.with_columns(
        pl.when(engine)
        .then(pl.lit("engine"))
        .when(gateway)
        .then(pl.lit("gateway"))
        .when((pl.col("kind") == "client") | pl.col("openinference_kind").is_not_null())
        .then(pl.lit("client"))
        .otherwise(pl.lit("other"))
        .alias("layer"),
        ((pl.col("kind") == "client") & http).alias("_attempt"),
        ((pl.col("name") == "llm_request") | pl.col("name").str.contains(_SGLANG_REQ)).alias("_ereq"),
    )
    # the parent of a client attempt, in the same service: the caller's logical request
    parents = (
        df.filter(pl.col("_attempt") & (pl.col("layer") == "client"))
        .select("trace_id", pl.col("parent_span_id").alias("span_id"), pl.col("service").alias("_psvc"))
        .unique()
    )
    df = df.join(parents, on=["trace_id", "span_id"], how="left", nulls_equal=False)
    is_client_req = pl.col("_psvc").is_not_null() & (pl.col("_psvc") == pl.col("service"))
    # engine spans under an engine request (up to 4 levels), and traces holding an engine request
    ereq = df.filter(pl.col("_ereq")).select("trace_id", "span_id")
    under = ereq.with_columns(pl.lit(True).alias("_under"))
    found = []
    level = ereq
    for _ in range(4):
        kids = df.join(
            level.rename({"span_id": "parent_span_id"}), on=["trace_id", "parent_span_id"], how="inner"
        ).select("trace_id", "span_id")
        if kids.height == 0:
            break
        found.append(kids)
        level = kids
    under = pl.concat(found).unique() if found else ereq.clear()
    df = df.join(under.with_columns(pl.lit(True).alias("_phase")), on=["trace_id", "span_id"], how="left")
    traces_with_req = ereq.select("trace_id").unique().with_columns(pl.lit(True).alias("_treq"))
    df = df.join(traces_with_req, on="trace_id", how="left")
    role = (
        pl.when(pl.col("layer") == "engine")
        .then(
            pl.when(pl.col("_ereq"))
            .then(pl.lit("request"))
            .when(pl.col("_phase").fill_null(False))
            .then(pl.lit("phase"))
            .when(pl.col("_treq").is_null() & pl.col("request_id").is_null())
            .then(pl.lit("startup"))
            .when(pl.col("request_id").is_not_null())
            .then(pl.lit("request"))
            .otherwise(pl.lit("other"))
        )
        .when(pl.col("_attempt"))
        .then(pl.lit("attempt"))
        .when(is_client_req)
        .then(pl.lit("request"))
        # a caller's GenAI call (openai-v2 'chat <model>', OpenInference 'LLM'): the logical request it made
        .when(
            (pl.col("layer") == "client")
            & (
                pl.col("openinference_kind").is_in(["LLM", "llm"])
                | pl.col("request_id").is_not_null()
                | pl.col("model").is_not_null()
            )
        )
        .then(pl.lit("request"))
        # a gateway's server span, or its span naming the request it forwarded (LiteLLM's 'litellm-completion')
        .when(
            (pl.col("layer") == "gateway")
            & ((pl.col("kind") == "server") | pl.col("request_id").is_not_null())
        )
        .then(pl.lit("request"))
        .otherwise(pl.lit("other"))
    )
    df = _sglang_queue(df)
    return df.with_columns(
        role.alias("role"),
        pl.when(is_client_req & (pl.col("layer") == "other"))
        .then(pl.lit("client"))
        .otherwise(pl.col("layer"))
        .alias("layer"),
    ).drop("_attempt", "_ereq", "_psvc", "_phase", "_treq", "ft", "ev", "start_ns", "end_ns")


def _sglang_queue(df: pl.DataFrame) -> pl.DataFrame:
    """SGLang's request span carries no queue figure: its ``prefill_waiting`` stages are the queue. Its
    ``time_in_model_prefill`` runs from the dispatch to the first token and so holds that queue: the queue is taken
    out of it, so that queue and prefill are vLLM's parts and add up."""
    wait = (
        df.filter(pl.col("_phase").fill_null(False) & (pl.col("name") == _SGLANG_QUEUE))
        .group_by("trace_id")
        .agg(pl.col("duration_s").sum().alias("_wait"))
    )
    if wait.height == 0:
        return df
    sgl = pl.col("_ereq") & pl.col("name").str.contains(_SGLANG_REQ) & pl.col("_wait").is_not_null()
    return (
        df.join(wait, on="trace_id", how="left")
        .with_columns(
            pl.when(sgl & pl.col("queue_s").is_null())
            .then(pl.col("_wait"))
            .otherwise(pl.col("queue_s"))
            .alias("queue_s"),
            pl.when(sgl & pl.col("queue_s").is_null())
            .then((pl.col("prefill_s") - pl.col("_wait")).clip(lower_bound=0))
            .otherwise(pl.col("prefill_s"))
            .alias("prefill_s"),
        )
        .drop("_wait")
    )


def us_to_ns(*parts: object) -> int | None:
    """The sum of JSON numbers of microseconds (a start, a duration) in nanoseconds; None when one is no number,
    NaN, an infinity or past +-2**53 (a trace file is attacker-controlled: ``1e19`` must not stop its parse)."""
    if not parts or not isinstance(parts[0], int | float) or isinstance(parts[0], bool):
        return None
    if any(not isinstance(x, int | float) or number(x) is None for x in parts):
        return None
    total = sum(parts)  # type: ignore[arg-type]
    return int(total) * 1000 if number(total) is not None else None


def attr_type(v: object) -> str | None:
    """The OTLP AnyValue kind of a decoded JSON value: string, int, double, bool, array or kvlist."""
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "int"
    if isinstance(v, float):
        return "double"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    if isinstance(v, dict):
        return "kvlist"
    return None


def attr(key: object, v: object) -> tuple[str, str, str | None] | None:
    """(key, value text, value type) of an attribute, None when it has no value."""
    text = attr_text(v)
    return None if key is None or text is None else (str(key), text, attr_type(v))


def attr_text(v: object) -> str | None:
    """An attribute value as text: scalars as written, lists and maps as JSON."""
    if v is None:
        return None
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str | int | float):
        return str(v)
    return json.dumps(v, separators=(",", ":"), ensure_ascii=False)
