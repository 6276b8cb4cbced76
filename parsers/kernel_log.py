"""The kernel's log (``dmesg``, ``journalctl -k``) -> ``platform_events``: the OOM killer, memory cgroup limits,
NVIDIA Xid errors and GPUs lost.

Every header the tools print is read (samples: tests/data/platform/INDEX.md)::

    [26002.109061] Out of memory: Killed process 576419 (python) total-vm:78521468kB, anon-rss:54398260kB, ...
    2024-04-29T14:55:41,679700+02:00 Out of memory: Killed process 1440763 (perl) total-vm:87033376kB, ...
    [Wed Jul 31 23:14:18 2024] NVRM: Xid (PCI:0000:00:05): 43, pid=1045242, name=pt_main_thread, Ch 00000008
    May 15 23:01:53 ubuntu-s-1vcpu-2gb-ams3-01 kernel: [  152.701942] Killed process 4254 (python3) total-vm:...
    Jun 29 07:24:44 compute-11 kernel: memory: usage 1048576kB, limit 1048576kB, failcnt 141

``dmesg`` (raw: seconds since boot), ``dmesg -T`` / ``--ctime`` (local time, ``--tz``), ``dmesg --time-format iso``
(``,`` before the microseconds, an offset), ``journalctl -k`` (``-o short``: no year, the folder's year;
``short-precise``; ``short-iso``; the kernel's own ``[seconds since boot]`` after the header when syslog kept it).
A line holding only the seconds since boot gets a time when the file's syslog lines give the boot time (their
time less their seconds since boot), else its time stays unknown and the file's messages say so. The kernel's
messages (mm/oom_kill.c ``dump_header``, ``__oom_kill_process``; mm/memcontrol.c ``mem_cgroup_print_oom_meminfo``;
the NVIDIA driver's ``NVRM: Xid``) are matched by their text; every other kernel line is a kernel line, read and
counted, without a row. A line starting with blanks continues the record above it (the driver's wrapped
``NVRM:`` lines, a paste's wrapped task-table row); a markdown quote (``> ``) in front of a pasted line, or the
code fence a paste glued to its first line (vllm#5901), is removed.
"""

from __future__ import annotations

import polars as pl

from logscope.scalars import int_or_none
from logscope.schemas import TS

from . import _platform as plat
from ._common import ascii_classes, local_to_utc
from .base import ChunkResult, ParseContext, counted, nonblank, one_head, per_head

NAME = "kernel_log"
KIND = "platform"
DESCRIPTION = (
    "the kernel's log (dmesg raw / -T / --time-format iso, journalctl -k): OOM kills, memory cgroup limits, "
    "NVIDIA Xid errors"
)
MODE = "lines"
SAMPLES = [
    "2024-04-29T14:55:41,679700+02:00 Out of memory: Killed process 1440763 (perl) total-vm:87033376kB, anon-rss:60356340kB, file-rss:0kB, shmem-rss:0kB, UID:21417 pgtables:169956kB oom_score_adj:0",
    "[26002.109061] Out of memory: Killed process 576419 (python) total-vm:78521468kB, anon-rss:54398260kB, file-rss:2628kB, shmem-rss:0kB, UID:1000 pgtables:119448kB oom_score_adj:0",
    "May 15 23:01:53 ubuntu-s-1vcpu-2gb-ams3-01 kernel: [  152.701942] Killed process 4254 (python3) total-vm:11968kB, anon-rss:4288kB, file-rss:3972kB, shmem-rss:0kB",
    "[Wed Jul 31 23:14:18 2024] NVRM: Xid (PCI:0000:00:05): 43, pid=1045242, name=pt_main_thread, Ch 00000008",
]

_MON = "Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec"
_DAY = "Mon|Tue|Wed|Thu|Fri|Sat|Sun"
_ISO_DMESG = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d,\d+[+-]\d\d:?\d\d"  # dmesg: a comma, always an offset
_ISO_SYSLOG = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)"
_BSD = rf"(?:{_MON}) [ \d]\d \d\d:\d\d:\d\d(?:\.\d+)?"
# the header: a markdown quote (or a glued code fence), then one time form, then the kernel's seconds since boot; the message is the rest
_HEADER = ascii_classes(
    r"^(?P<hdr>(?:> ?|```)?"
    rf"(?:(?P<iso>{_ISO_DMESG}) "
    rf"|\[(?P<ctime>(?:{_DAY}) (?:{_MON}) [ \d]\d \d\d:\d\d:\d\d \d{{4}})\] "
    rf"|(?:(?P<siso>{_ISO_SYSLOG})|(?P<bsd>{_BSD})) (?P<host>\S+) kernel: ?"
    r"|(?P<bare>kernel: ))?"
    r"(?:\[ *(?P<up>\d+\.\d+)\] ?)?)"
)
_ANY_HEADER = ascii_classes(
    rf"^(?:> ?|```)?(?:{_ISO_DMESG} |\[(?:{_DAY}) (?:{_MON}) [ \d]\d \d\d:\d\d:\d\d \d{{4}}\] "
    rf"|(?:{_ISO_SYSLOG}|{_BSD}) \S+ kernel: |kernel: |\[ *\d+\.\d+\] )"
)
_CONTINUED = r"^[ \t]+\S"
# what the kernel says, by kind (mm/oom_kill.c, mm/memcontrol.c, the NVIDIA driver)
_KILLED = ascii_classes(r"(?:^|: )Killed process (\d+) \(([^)]*)\)")
_SELECT = ascii_classes(r"^Memory cgroup out of memory: Kill process (\d+) \(([^)]*)\)")
_CONSTRAINT = r"^oom-kill:constraint=(CONSTRAINT_[A-Z_]+)"
_INVOKED = r"^(.+?) invoked oom-killer: "
_USAGE = ascii_classes(r"^memory: usage (\d+)kB, limit (\d+)kB")
_REAPED = ascii_classes(r"^oom_reaper: reaped process (\d+) \(([^)]*)\)")
_XID = ascii_classes(r"NVRM: Xid \((PCI:[0-9A-Fa-f:.]+)\): (\d+),")
_LOST = r"fallen off the bus"
_KINDS = (
    ("oom_kill", _KILLED),
    ("oom_select", _SELECT),
    ("oom_constraint", _CONSTRAINT),
    ("oom_invoked", _INVOKED),
    ("memcg_usage", _USAGE),
    ("oom_reaped", _REAPED),
    ("xid", _XID),
    ("gpu_lost", _LOST),
)


def detect_heads(frame: pl.DataFrame, n: int) -> pl.Series:
    s = pl.col("line")
    head = s.str.contains(_ANY_HEADER)
    g = per_head(nonblank(frame), n, any=head.any(), m=(head | s.str.contains(_CONTINUED)).mean())
    return g.select(pl.when(pl.col("any")).then(0.9 * pl.col("m")).otherwise(0.0)).to_series()


def detect(head: list[str]) -> float:
    return one_head(detect_heads, head)


def parse_chunk(lines: pl.DataFrame, ctx: ParseContext, state: dict) -> ChunkResult:
    line = pl.col("line").str.strip_suffix("\r")
    g = lines.select("line_no", line.alias("line"), line.str.extract_groups(_HEADER).alias("g")).unnest("g")
    headed = pl.any_horizontal(
        [pl.col(c).is_not_null() for c in ("iso", "ctime", "siso", "bsd", "bare", "up")]
    )
    g = g.with_columns(headed.alias("_ok"))
    cont = g["line"].str.contains(_CONTINUED)
    recognized = g["_ok"] | cont
    g = g.with_columns(pl.col("_ok").cum_sum().alias("_rec"), cont.alias("_cont"))
    # a record's wrapped lines ('               NVRM: fallen off the bus ...') belong to its message
    tails = (
        g.filter(pl.col("_cont") & (pl.col("_rec") > 0))
        .group_by("_rec", maintain_order=True)
        .agg(pl.col("line").str.strip_chars().str.join(" ").alias("_tail"))
    )
    rows = (
        g.filter(pl.col("_ok"))
        .join(tails, on="_rec", how="left", maintain_order="left")
        .with_columns(
            pl.concat_str(
                pl.col("line").str.slice(pl.col("hdr").str.len_chars()),
                pl.when(pl.col("_tail").is_not_null())
                .then(pl.lit(" ") + pl.col("_tail"))
                .otherwise(pl.lit("")),
            ).alias("msg")
        )
    )
    rows = _times(rows, ctx, state)
    msg = pl.col("msg")
    kind = pl.lit(None, dtype=pl.String)
    for name, rx in reversed(_KINDS):  # the first that matches wins
        kind = pl.when(msg.str.contains(rx)).then(pl.lit(name)).otherwise(kind)
    rows = rows.with_columns(kind.alias("kind")).filter(pl.col("kind").is_not_null())
    res = ChunkResult(recognized=recognized)
    if rows.height:
        res.tables["platform_events"] = plat.events(_fields(rows, ctx))
    unanchored = rows.filter(pl.col("ts").is_null() & pl.col("up").is_not_null()).height
    state["unanchored"] = state.get("unanchored", 0) + unanchored
    if rows.filter(pl.col("bsd").is_not_null()).height:
        res.assumptions.append(
            f"journalctl/syslog times have no year: {ctx.year} ({ctx.year_source}), zone {ctx.tz} (--tz)"
        )
    if rows.filter(pl.col("ctime").is_not_null()).height:
        res.assumptions.append(f"dmesg -T times are the host's local time: read as {ctx.tz} (--tz)")
    return res


def finish(ctx: ParseContext, state: dict) -> ChunkResult | None:
    return counted(
        state,
        "unanchored",
        "{n} kernel record(s) carry only the seconds since boot ('[12345.678901]': dmesg without -T or "
        "--time-format iso) and no syslog line of the file gives the boot time: kept with a null time",
    )


def _times(rows: pl.DataFrame, ctx: ParseContext, state: dict) -> pl.DataFrame:
    iso = (
        pl.col("iso")
        .str.replace(",", ".")
        .str.replace(r"([+-]\d\d)(\d\d)$", "${1}:${2}")
        .str.replace("Z$", "+00:00")
    )
    siso = pl.col("siso").str.replace(r"([+-]\d\d)(\d\d)$", "${1}:${2}").str.replace("Z$", "+00:00")
    aware = pl.coalesce(
        iso.str.to_datetime("%Y-%m-%dT%H:%M:%S%.f%:z", strict=False, time_unit="us"),
        siso.str.to_datetime("%Y-%m-%dT%H:%M:%S%.f%:z", strict=False, time_unit="us"),
        siso.str.to_datetime("%Y-%m-%dT%H:%M:%S%:z", strict=False, time_unit="us"),
    ).dt.convert_time_zone("UTC")
    ctime = (
        pl.col("ctime")
        .str.slice(4)
        .str.replace_all(" +", " ")
        .str.to_datetime("%b %d %H:%M:%S %Y", strict=False, time_unit="us")
    )
    bsd = pl.col("bsd").str.replace_all(" +", " ")
    bsd = pl.concat_str(
        pl.lit(str(ctx.year)),
        pl.lit(" "),
        bsd,
        pl.when(~bsd.str.contains(r"\.")).then(pl.lit(".0")).otherwise(pl.lit("")),
    )
    naive = pl.coalesce(ctime, bsd.str.to_datetime("%Y %b %d %H:%M:%S%.f", strict=False, time_unit="us"))
    wall = pl.coalesce(aware.cast(TS), local_to_utc(naive, ctx.tz))
    rows = rows.with_columns(wall.alias("_wall"), pl.col("up").cast(pl.Float64).alias("up"))
    # the boot time: a syslog line's time less the kernel's seconds since boot it carries
    pairs = rows.filter(pl.col("_wall").is_not_null() & pl.col("up").is_not_null())
    if pairs.height:
        boot = (pairs["_wall"].dt.epoch("us") - (pairs["up"] * 1e6).round(0).cast(pl.Int64)).median()
        state["boot_us"] = int_or_none(boot) if boot is not None else state.get("boot_us")
    boot_us = state.get("boot_us")
    anchored = (
        pl.from_epoch((pl.lit(boot_us) + (pl.col("up") * 1e6).round(0)).cast(pl.Int64), time_unit="us")
        .dt.replace_time_zone("UTC")
        .cast(TS)
        if boot_us is not None
        else pl.lit(None, dtype=TS)
    )
    return rows.with_columns(
        pl.coalesce(pl.col("_wall"), anchored).alias("ts"),
        pl.when(pl.col("_wall").is_not_null())
        .then(pl.lit("written"))
        .when(pl.col("up").is_not_null() & anchored.is_not_null())
        .then(pl.lit("boot-anchored"))
        .otherwise(pl.lit("relative"))
        .alias("ts_basis"),
    )


def _fields(rows: pl.DataFrame, ctx: ParseContext) -> pl.DataFrame:
    msg, kind = pl.col("msg"), pl.col("kind")
    pid = pl.coalesce(
        msg.str.extract(_KILLED, 1),
        msg.str.extract(_SELECT, 1),
        msg.str.extract(_REAPED, 1),
        msg.str.extract(ascii_classes(r",pid=(\d+)"), 1),
        msg.str.extract(ascii_classes(r"\bpid=(\d+), name="), 1),
    ).cast(pl.Int64, strict=False)
    process = pl.coalesce(
        msg.str.extract(_KILLED, 2),
        msg.str.extract(_SELECT, 2),
        msg.str.extract(_REAPED, 2),
        msg.str.extract(r",task=([^,]*),pid=", 1),
        msg.str.extract(_INVOKED, 1),
        msg.str.extract(r"\bpid=\S+, name=([^,<]+),", 1),
    )
    rss = pl.sum_horizontal(
        [plat.kb_bytes(msg.str.extract(rf"{k}-rss:([0-9,]+)kB", 1)) for k in ("anon", "file", "shmem")]
    )
    return rows.select(
        "ts",
        "ts_basis",
        pl.col("up").alias("uptime_s"),
        pl.lit(ctx.source).alias("source"),
        pl.lit(ctx.replica).alias("replica"),
        pl.lit("kernel").alias("layer"),
        "kind",
        pl.col("kind").alias("reason"),
        "host",
        pid.alias("pid"),
        process.alias("process"),
        pl.when(kind == "oom_kill").then(rss).alias("rss_bytes"),
        plat.kb_bytes(msg.str.extract(_USAGE, 2)).alias("memory_limit_bytes"),
        plat.kb_bytes(msg.str.extract(_USAGE, 1)).alias("memory_usage_bytes"),
        msg.str.extract(_CONSTRAINT, 1).alias("constraint"),
        pl.coalesce(
            msg.str.extract(r",oom_memcg=([^,]*)", 1), msg.str.extract(r",task_memcg=([^,]*)", 1)
        ).alias("memcg"),
        msg.str.extract(_XID, 2).cast(pl.Int64, strict=False).alias("xid"),
        pl.coalesce(msg.str.extract(_XID, 1), msg.str.extract(r"NVIDIA GPU ([0-9A-Fa-f:.]+)", 1)).alias(
            "gpu"
        ),
        msg.str.slice(0, 500).alias("message"),
        "line_no",
    )
