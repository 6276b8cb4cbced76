"""Log files whose every line a runtime or a logging service wrapped in a record: unwrapped before the format
inside is detected, as compression is undone before.

A Kubernetes node keeps a container's output in CRI format (containerd, CRI-O:
``/var/log/pods/<namespace>_<pod>_<uid>/<container>/0.log``)::

    2023-06-22T10:27:25.813799277Z stdout F standalone containerd line that is super awesome
    2024-04-13T07:59:37.505201169-05:00 stdout F standalone crio line which is awesome

Docker's default ``json-file`` driver (``/var/lib/docker/containers/<id>/<id>-json.log``)::

    {"log":"INFO: log line here\\n","stream":"stdout","time":"2024-03-30T08:31:20.545192187Z"}

A program run as a systemd service, collected with ``journalctl -u vllm > vllm.log`` (``-o short``, the default,
``short-iso``, ``short-iso-precise``) or through rsyslog (RFC 3339 or traditional), has a syslog header::

    2026-11-29T08:24:14.001000+0000 gpu-node-1 vllm[3887]: (APIServer pid=3887) INFO 11-29 08:24:14 [api_utils.py:347]
    Nov 29 08:24:14 gpu-node-1 vllm[3887]: (APIServer pid=3887) INFO 11-29 08:24:14 [api_utils.py:347]

The container runtimes cut a line longer than 16 KiB into records: CRI tags each piece but the last ``P``, and
a Docker piece's ``log`` lacks the newline. The pieces are joined per stream (stdout and stderr records
interleave) into the line the program wrote, at the place and number of the record that ends it (line numbers
keep rising), with the time of its first; a file's line count is of those lines, and a message says how many
records were joined. Formats that read a leading RFC 3339 stamp (``CONTAINER_TIME`` in their module: vLLM's own
stamps have no year, no milliseconds and no zone) get the record's time in front of each line, as ``kubectl
logs --timestamps`` writes it (a syslog header's only when it has a year: ISO, not traditional); the others get
the line alone. A line that is no record (journalctl's ``-- Boot ... --``) passes as it is.

``docker compose logs`` (and ``docker compose up``) put the container's name in front of each line, with or
without colour codes::

    vllm-1  | (APIServer pid=8) INFO 09-25 13:38:14 [api_server.py:1822] vLLM API server version 0.11.0rc2.dev98+g393de22d2

the prefix is cut, and a file of one service is that service's replica (``services``).
"""

from __future__ import annotations

import polars as pl

from logscope.parsers._common import ascii_classes, decode_json
from logscope.parsers.base import head_frame, nonblank, per_head

_TS = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?(?:Z|[+-]\d\d:\d\d)"
# a CRI record's header: time, stream, tag (P partial, F full; ':'-separated tags may follow), one blank
_CRI = ascii_classes(rf"^(?P<hdr>(?P<ts>{_TS}) (?P<stream>stdout|stderr) (?P<tag>[PF])(?::\S*)?(?: |$))")
_CRI_HEAD = ascii_classes(rf"^{_TS} (?:stdout|stderr) [PF](?::\S*)?(?: |$)")
# json-file writes its keys in this order ('attrs' before 'time' with --log-opt labels/env/tag)
_DOCKER_OPEN = '{"log":"'
_DOCKER = ascii_classes(
    rf'^\{{"log":".*","stream":"(?:stdout|stderr)",(?:"attrs":\{{.*\}},)?"time":"{_TS}"\}}\s*$'
)
_DOCKER_DTYPE = pl.Struct({"log": pl.String, "stream": pl.String, "time": pl.String})
# a syslog header: ISO time (journalctl short-iso[-precise]: +0000; rsyslog: +00:00) or traditional (no year),
# host, identifier, optional [pid]
_ISO = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?(?:Z|[+-]\d\d:?\d\d)"
_BSD = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) [ \d]\d \d\d:\d\d:\d\d(?:\.\d{1,9})?"
_SYSLOG = ascii_classes(rf"^(?P<hdr>(?:(?P<iso>{_ISO})|{_BSD}) \S+ [^\s\[\]:]+(?:\[\d+\])?: ?)")
_SYSLOG_HEAD = ascii_classes(rf"^(?:{_ISO}|{_BSD}) \S+ [^\s\[\]:]+(?:\[\d+\])?: ?")
# the kernel's lines (``journalctl -k``) keep their header: parsers/kernel_log.py reads its time, host and the kernel's
# seconds since boot, which a traditional stamp (no year) would lose here
_KERNEL_HEAD = ascii_classes(rf"^(?:{_ISO}|{_BSD}) \S+ kernel: ")
# an application's own '<time> <LEVEL> <logger>: ' prefix has that shape too: a level is no host name
_LEVEL_AS_HOST = ascii_classes(
    rf"^(?:{_ISO}|{_BSD}) (?:TRACE|DEBUG|INFO|NOTICE|WARN|WARNING|ERROR|CRITICAL|FATAL|debug|info|warn|warning|error) "
)

# ``docker compose logs`` / ``docker compose up``: '<service>-<n>  | ' (v2; v1 '<project>_<service>_<n>  | '), padded
# to the longest name, in colour on a terminal
_SGR = r"(?:\x1b\[[0-9;]*m)*"
_COMPOSE = ascii_classes(rf"^(?P<hdr>{_SGR}(?P<svc>[A-Za-z0-9][\w.-]*){_SGR} +{_SGR}\|{_SGR}(?: |$))")
_COMPOSE_HEAD = ascii_classes(rf"^{_SGR}[A-Za-z0-9][\w.-]*{_SGR} +{_SGR}\|{_SGR}(?: |$)")
COMPOSE_SHARE = 0.6  # of a head's lines: a service's own raw output (tqdm bars on stderr) may pass unprefixed

NAMES = {
    "cri": "CRI container log (containerd / CRI-O)",
    "docker": "Docker json-file container log",
    "syslog": "syslog / journalctl output",
    "compose": "docker compose logs output",
}
TIME_WORDS = {
    "cri": "the runtime's time",
    "docker": "the runtime's time",
    "syslog": "its syslog time where that has a year (ISO, not traditional)",
    "compose": "no time of its own",
}
MIN_SHARE = 0.9  # of a head's non-blank lines that must be records of one kind


def detect(lines: list[str]) -> str | None:
    """``cri`` or ``docker`` when the head's lines are records of that runtime, else None; never raises."""
    return detect_many([lines])[0]


def detect_many(heads: list[list[str]]) -> list[str | None]:
    """``detect`` of many heads, in one pass over their lines (a polars call per head cost ~2 ms a file)."""
    if not heads:
        return []
    s = pl.col("line")
    g = per_head(
        nonblank(head_frame(heads)),
        len(heads),
        cri=s.str.contains(_CRI_HEAD).mean(),
        # head lines are cut at a few KB: most need only open as a record, one must be whole
        open=s.str.starts_with(_DOCKER_OPEN).mean(),
        whole=s.str.contains(_DOCKER).any(),
        syslog=(
            s.str.contains(_SYSLOG_HEAD) & ~s.str.contains(_LEVEL_AS_HOST) & ~s.str.contains(_KERNEL_HEAD)
        ).mean(),
        compose=s.str.contains(_COMPOSE_HEAD).mean(),
    )
    kind = (
        pl.when(pl.col("cri") >= MIN_SHARE)
        .then(pl.lit("cri"))
        .when((pl.col("open") >= MIN_SHARE) & pl.col("whole"))
        .then(pl.lit("docker"))
        .when(pl.col("syslog") >= MIN_SHARE)
        .then(pl.lit("syslog"))
        .when(pl.col("compose") >= COMPOSE_SHARE)
        .then(pl.lit("compose"))
    )
    return g.select(kind).to_series().to_list()


def services(lines: list[str]) -> list[str]:
    """The compose services naming a head's lines, most lines first (the replica when there is one)."""
    s = pl.Series([ln for ln in lines if ln.strip()], dtype=pl.String)
    if s.len() == 0:
        return []
    names = s.str.extract(_COMPOSE, 2).drop_nulls()
    return names.value_counts(sort=True)[names.name].to_list() if names.len() else []


class Unwrapper:
    """Turns chunks of a container log's lines (``line_no``, ``line``) into chunks of the lines inside, in order;
    pieces of a line cut by a chunk's end are held until the record that ends it."""

    def __init__(self, kind: str, keep_time: bool) -> None:
        self.kind, self.keep_time = kind, keep_time
        self.carry: pl.DataFrame | None = None  # a stream's pieces still waiting for their last record
        self.joined = 0  # partial records joined into a line (a line of n records counts n - 1)

    def __call__(self, chunk: pl.DataFrame) -> pl.DataFrame:
        rec = _records(chunk, self.kind)
        if self.carry is not None:
            rec = pl.concat([self.carry, rec])
            self.carry = None
        if bool(rec["partial"].any()):
            rec = self._join(rec)
        return self._lines(rec)

    def flush(self) -> pl.DataFrame | None:
        """The pieces left at the end of the file (a line cut by the end of the log), as lines."""
        if self.carry is None or not self.carry.height:
            return None
        rec, self.carry = self._grouped(self.carry), None
        return self._lines(rec)

    def whole(self, lines: pl.DataFrame) -> pl.DataFrame:
        """The lines inside a piece of a file read on its own (a head, the lines before a cut), pieces left at its
        end included."""
        return pl.concat([p for p in (self(lines), self.flush()) if p is not None])

    def _join(self, rec: pl.DataFrame) -> pl.DataFrame:
        # a line is one stream's run of pieces and the record after them that ends it
        rec = rec.with_columns(
            (~pl.col("partial")).shift(1, fill_value=True).cum_sum().over("stream").alias("_g")
        )
        ends = (~pl.col("partial")).any().over("stream", "_g")
        self.carry = rec.filter(~ends).drop("_g")
        return self._grouped(rec.filter(ends))

    def _grouped(self, rec: pl.DataFrame) -> pl.DataFrame:
        if "_g" not in rec.columns:
            rec = rec.with_columns(pl.lit(0).alias("_g"))
        out = rec.group_by("stream", "_g", maintain_order=True).agg(
            pl.col("line_no").last(), pl.col("ts").first(), pl.col("text").str.join(""), pl.len().alias("_n")
        )
        self.joined += int(out["_n"].sum()) - out.height
        return out.select("line_no", "ts", "stream", pl.lit(False).alias("partial"), "text").sort("line_no")

    def _lines(self, rec: pl.DataFrame) -> pl.DataFrame:
        ts, text = pl.col("ts"), pl.col("text")
        line = (
            pl.when(ts.is_null()).then(text).otherwise(pl.concat_str(ts, pl.lit(" "), text))
            if self.keep_time
            else text
        )
        return rec.select("line_no", line.alias("line"))


def _records(chunk: pl.DataFrame, kind: str) -> pl.DataFrame:
    """line_no, ts, stream, partial, text of each record; a line that is no record passes whole (ts null)."""
    line = pl.col("line")
    if kind == "cri":
        head = line.str.slice(0, 128).str.extract_groups(_CRI)  # a header is ~50 characters
        df = chunk.with_columns(head.alias("h")).with_columns(pl.col("h").struct.field("ts"))
        at = pl.col("h").struct.field("hdr").str.len_chars()  # where the text starts
        return df.select(
            "line_no",
            "ts",
            pl.col("h").struct.field("stream"),
            (pl.col("h").struct.field("tag") == "P").fill_null(False).alias("partial"),
            pl.when(pl.col("ts").is_null()).then(line).otherwise(line.str.slice(at)).alias("text"),
        )
    if kind == "syslog":
        head = line.str.slice(0, 256).str.extract_groups(_SYSLOG)  # host and identifier are short
        df = chunk.with_columns(head.alias("h"))
        hdr, iso = pl.col("h").struct.field("hdr"), pl.col("h").struct.field("iso")
        # RFC 3339 wants the offset's colon (journalctl writes +0000)
        ts = (
            pl.when(iso.str.contains(r"[+-][0-9]{4}$"))
            .then(pl.concat_str(iso.str.head(-2), pl.lit(":"), iso.str.tail(2)))
            .otherwise(iso)
        )
        return df.select(
            "line_no",
            ts.alias("ts"),
            pl.lit(None, dtype=pl.String).alias("stream"),
            pl.lit(False).alias("partial"),
            pl.when(hdr.is_null()).then(line).otherwise(line.str.slice(hdr.str.len_chars())).alias("text"),
        )
    if kind == "compose":
        hdr = line.str.slice(0, 160).str.extract(_COMPOSE, 1)
        return chunk.select(
            "line_no",
            pl.lit(None, dtype=pl.String).alias("ts"),
            line.str.extract(_COMPOSE, 2).alias("stream"),
            pl.lit(False).alias("partial"),
            pl.when(hdr.is_null()).then(line).otherwise(line.str.slice(hdr.str.len_chars())).alias("text"),
        )
    rec = chunk.with_columns(pl.when(line.str.starts_with(_DOCKER_OPEN)).then(line).alias("_j"))
    j = decode_json(rec["_j"], _DOCKER_DTYPE)
    rec = rec.with_columns(j.alias("j")).with_columns(
        pl.col("j").struct.field("log").alias("_log"), pl.col("j").struct.field("time").alias("_time")
    )
    log = pl.col("_log")
    ok = log.is_not_null() & pl.col("_time").is_not_null()
    return rec.select(
        "line_no",
        pl.when(ok).then(pl.col("_time")).alias("ts"),
        pl.when(ok).then(pl.col("j").struct.field("stream")).alias("stream"),
        (ok & ~log.str.ends_with("\n")).alias("partial"),
        pl.when(ok).then(log.str.strip_suffix("\n")).otherwise(line).alias("text"),
    )


def head_lines(kind: str, lines: list[str], keep_time: bool = False) -> list[str]:
    """A head's lines unwrapped (detection reads the lines inside; the pieces of a cut line are joined)."""
    if not lines:
        return []
    df = pl.DataFrame(
        {"line_no": pl.int_range(1, len(lines) + 1, eager=True), "line": pl.Series(lines, dtype=pl.String)}
    )
    return Unwrapper(kind, keep_time).whole(df)["line"].to_list()


def ends_line(kind: str | None, record: bytes) -> bool:
    """Whether a record (one physical line of the file) ends the line it holds a piece of: a cut after it leaves no
    line in pieces (interleaved streams aside). CRI: tag F; json-file: a log ending in a newline, the only place
    its escaped newline meets the closing quote (a quote inside the log is escaped too)."""
    if kind == "cri":
        parts = record[:160].split(b" ", 3)
        return len(parts) >= 3 and parts[2][:1] == b"F"
    if kind == "docker":
        return b'\\n","stream":' in record
    return True
