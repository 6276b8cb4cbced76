"""The report: summary.json, summary.md (+ timeline.png) and report.html from an output folder.

Rendering reads only what the earlier stages wrote (Parquet tables, ingest/correlation/diagnosis
JSON), so ``logscope report`` can re-render without re-parsing. A missing piece never stops it:
the section says "not available" and why.
"""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import polars as pl

from .. import clock, jsontext
from ..invisible_chars import visible_all
from . import charts, fmt, section_charts, views
from .fmt import redact_prompt
from .html import render_html, vega_bundle
from .load import Loaded, load
from .markdown import render_markdown
from .options import Judged, ReportOptions, judged
from .summary import build
from .vl import Data, finish

MAX_SHAPES_HTML = 30
# a day-long incident can hold thousands of episodes and hundreds of restarts: the page and the ticket
# show this many (every episode a finding links to among them); summary.json and the tables keep all
MAX_EPISODES_HTML = 100
MAX_EPISODES_MD = 30
MAX_LIFECYCLE_ROWS = 30
MAX_CLAIMS_HTML = 100  # claims listed with their evidence (all are in summary.json)
MAX_CLAIMS_MD = 40
MAX_READ_NOTES_MD = 20  # what reading the files met, in summary.md (the report's appendix has every one)
LADDER_COLS = (
    # the step's verdict first (a wide table scrolls: at 1,024 px only the first ten columns show), then its figures
    "step", "concurrency", "requests", "slo_status", "broke", "died", "gave_up", "gave_up_share", "cold_set_aside",
    "arrival_rate", "active_mean", "ttft_p50", "ttft_p95", "ttft_clock", "ttft_p95_engine", "e2e_p50", "e2e_p95",
    "e2e_clock", "e2e_p95_engine", "queue_p95", "prefill_p95", "decode_p95", "success_share", "throughput_tps",
    "kv_max", "waiting_max", "preemptions", "max_tokens_mean", "output_tokens_mean", "slo_undecided",
    "slo_not_judged", "pressure",
)  # fmt: skip

# the columns that hold words (why a step broke, died or was not judged): wrapped, so one long reason does not push
# every figure off a 1,024 px screen
LADDER_TEXT = frozenset({"broke", "died", "slo_undecided", "slo_not_judged", "pressure"})

__all__ = ["render", "build", "context", "dumps"]


def render(out: Path, options: ReportOptions) -> dict[str, Path]:
    """Write the report files into ``out`` and return their paths: summary.json, summary.md, report.html, and
    timeline.png when ``options.png`` asks for it."""
    out = Path(out)
    png = options.png
    paths = {
        "summary_json": out / "summary.json",
        "summary_md": out / "summary.md",
        "report_html": out / "report.html",
        **({"timeline_png": out / "timeline.png"} if png else {}),
    }
    # the Vega bundle (~1 s when not cached) is read on a thread while the tables are read; the PNG (~2 s on a
    # small timeline, most of a small folder's analyze: drawn only when asked) by a child process, as vl-convert
    # holds the GIL while drawing: the child starts now and readies vl-convert's JavaScript engine while the
    # timeline is built
    painter = _Painter() if png else None
    try:
        ld = load(out)
        opts = judged_by(ld, options)
        with clock.covering(*ld.rng.clip(*clock.files_span(out))), ThreadPoolExecutor(max_workers=2) as pool:
            bundle = pool.submit(vega_bundle)
            summary = build(ld, opts)
            timeline = _timeline(ld, summary, opts)
            # the picture is the longest piece: it is drawn while the other charts and the pages are made
            picture = pool.submit(painter.draw, _png_spec(*timeline, summary)) if painter else None
            ctx = context(ld, summary, opts, timeline)
            jsontext.write(paths["summary_json"], summary, jsontext.SUMMARY)
            paths["summary_md"].write_text(render_markdown(ctx), encoding="utf-8")
            bundle.result()
            paths["report_html"].write_text(render_html(ctx), encoding="utf-8")
            if picture is not None:
                paths["timeline_png"].write_bytes(picture.result())
    finally:
        if painter is not None:
            painter.close()
    return paths


def judged_by(ld: Loaded, options: ReportOptions) -> Judged:
    """``options`` with the SLO the diagnosis judged by (diagnosis.json): a report rendered again later
    states and draws that SLO, whatever the options of the rendering say."""
    from ..diagnose import slo_options

    given = slo_options(ld.doc("diagnosis"))
    return judged(options, given)


def _timeline(ld: Loaded, summary: dict, options: ReportOptions) -> tuple[dict | None, list[str]]:
    """The timeline's spec and notes (a timeline that cannot be drawn is a note)."""
    failed: list[str] = []
    spec, notes = _guard(failed, "timeline", charts.timeline, ld, summary, options) or (None, [])
    return spec, [*notes, *failed]


def context(
    ld: Loaded, summary: dict, options: ReportOptions, timeline: tuple[dict | None, list[str]] | None = None
) -> dict:
    """Everything the templates may name (tests check they name nothing else).

    ``s`` is summary.json itself; the rest are views of it or of the tables: chart specs
    (Vega-Lite dicts, None when there is no data), sentences, and display rows.
    """
    timeline_spec, notes = timeline or _timeline(ld, summary, options)
    failed: list[str] = []
    retry_spec, retry_stats = _guard(failed, "retry timing", section_charts.retry_gap_chart, ld) or (
        None,
        None,
    )
    length_spec, length_stats = _guard(failed, "output lengths", section_charts.output_length_chart, ld) or (
        None,
        None,
    )
    ladder = _guard(failed, "ladder", section_charts.ladder_chart, summary, options)
    overview = _guard(failed, "whole-input overview", section_charts.range_overview, summary)
    from . import traces_view  # the traces section, when the folder had spans

    waterfall, tview = _guard(
        failed, "traces", traces_view.view, ld.out, ld.doc("correlation").get("traces"), ld.doc("diagnosis")
    ) or (
        None,
        None,
    )
    notes = [*notes, *failed]
    return {
        "s": summary,
        "png": options.png,  # timeline.png is drawn beside summary.md
        "charts": {
            "timeline": timeline_spec,
            "ladder": ladder,
            "retry_gaps": retry_spec,
            "output_lengths": length_spec,
            "overview": overview,
            "waterfall": waterfall,
            "span_split": (tview or {}).get("split_spec"),
        },
        "traces_view": tview,
        "timeline_notes": notes,
        "retry_gaps": retry_stats or {},
        "lengths": length_stats or {},
        "layers": _layers(summary["retries"]),
        "coverage": _coverage(summary),
        "not_available_offsets": ld.why("clock_offsets"),
        "capacity_lines": views.capacity_lines(summary["capacity"]),
        "lifecycle_lines": views.lifecycle_lines(summary["server_lifecycle"], MAX_LIFECYCLE_ROWS),
        "stop_lines": views.stop_lines(summary["server_lifecycle"], MAX_LIFECYCLE_ROWS),
        "cold_start_view": views.cold_start_view(summary["cold_start"], MAX_LIFECYCLE_ROWS),
        "cold_start_rows": views.cold_start_rows(summary["cold_start"], MAX_LIFECYCLE_ROWS),
        "input_counts": views.input_counts(summary["inputs"]),
        "episodes_html": (shown := views.episodes_shown(summary, MAX_EPISODES_HTML)),
        "lengths_view": views.output_lengths_view(summary.get("output_lengths"), shown),
        "episodes_md": views.episodes_shown(summary, MAX_EPISODES_MD),
        "read_notes_md": views.read_notes(summary["inputs"], MAX_READ_NOTES_MD),
        "claims_html": views.claims_view(summary, MAX_CLAIMS_HTML),
        "claims_md": views.claims_view(summary, MAX_CLAIMS_MD),
        **_ladder_view(summary),
        **_shapes(ld, options.include_prompts),
    }


def _guard(failed: list[str], name: str, fn, *args):
    """A chart that cannot be built is left out with a note; the rest of the report still renders."""
    try:
        return fn(*args)
    except Exception as e:  # noqa: BLE001 - one chart must not take the report down
        failed.append(f"the {name} chart could not be drawn ({type(e).__name__}: {str(e)[:200]})")
        return None


def dumps(summary: dict) -> str:
    """The exact bytes of summary.json (stable: same inputs, same bytes)."""
    return jsontext.SUMMARY.dumps(summary)


def _static(spec: dict) -> dict:
    """The timeline for a picture: the point layers of the line panels keep only the values standing
    alone between gaps (the others are invisible hover targets for tooltips, which a PNG cannot show,
    and cost a third of the drawing)."""

    def hover(layer: dict) -> bool:
        return (layer.get("mark") or {}).get("type") == "point" and "opacity" in (layer.get("encoding") or {})

    def lone_only(layer: dict) -> dict:
        return {**layer, "transform": [*layer.get("transform", []), {"filter": "datum.lone"}]}

    rows = [
        {**v, "layer": [lone_only(lay) if hover(lay) else lay for lay in v["layer"]]} if "layer" in v else v
        for v in spec.get("vconcat", [])
    ]
    return {**spec, "vconcat": rows} if rows else spec


def png_title(summary: dict | None) -> dict:
    """timeline.png's title: the input folder and the incident's date and span (a picture pasted into a ticket
    stands alone, without the page's header)."""
    summary = summary or {}
    name = Path(str((summary.get("inputs") or {}).get("path") or "")).name or "the input"
    span = summary.get("span") or {}
    start, end = span.get("start"), span.get("end")
    if start is None:
        when = "date unknown: no record of the input carries a time"
    else:
        first, last = fmt.when(start), fmt.when(end)
        same_day = end is not None and first[:10] == last[:10]
        when = f"{first.removesuffix(' UTC')} – {last[11:] if same_day else last}" + (
            f" ({fmt.duration(span.get('duration_s'))})" if span.get("duration_s") is not None else ""
        )
    return {"text": f"logscope timeline · {name}", "subtitle": when, "anchor": "start", "fontSize": 16}


def _png_spec(spec: dict | None, notes: list[str], summary: dict | None = None) -> dict:
    """The Vega-Lite spec of timeline.png, titled with the incident's folder and date."""
    if spec is not None:
        spec = _static(spec)
    if spec is None:  # still a picture, so that summary.md never shows a broken image
        text = "Timeline not available: " + ("; ".join(notes) or "no timed data")
        d = Data()
        spec = finish(
            {
                "data": d.add("note", [{"t": text[:160]}]),
                "mark": {"type": "text", "fontSize": 14, "align": "left"},
                "encoding": {
                    "text": {"field": "t", "type": "nominal"},
                    "x": {"value": 10},
                    "y": {"value": 20},
                },
                "width": 900,
                "height": 40,
            },
            d,
        )
    spec = {**spec, "title": png_title(summary)}
    return visible_all(spec)  # names drawn in the picture: control and bidi characters as escapes


class _Painter:
    """Draws timeline.png in a child process (vl-convert holds the GIL for the whole drawing, ~1.2 s on a
    busy timeline), started early so that vl-convert's JavaScript engine (~0.3 s) is ready when the spec
    comes. Where no child process can run, the picture is drawn in this one: the same bytes."""

    _CHILD = (
        "import json, sys, vl_convert\n"
        "vl_convert.vegalite_to_png({'mark': 'point'})  # start the JavaScript engine while the spec is built\n"
        "sys.stdout.buffer.write(vl_convert.vegalite_to_png(json.load(sys.stdin.buffer), scale=1.5))\n"
    )

    def __init__(self) -> None:
        self.child: subprocess.Popen | None = None
        if sys.executable:  # empty when embedded: no interpreter to start
            try:
                self.child = subprocess.Popen(
                    [sys.executable, "-c", self._CHILD],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL,
                )
            except OSError:
                pass

    def close(self) -> None:
        """Stop a child that was never given a spec (the report failed before the timeline was drawn)."""
        if self.child is not None and self.child.poll() is None:
            self.child.kill()
            self.child.communicate()

    def draw(self, spec: dict) -> bytes:
        if self.child is not None:
            try:
                png, _ = self.child.communicate(
                    json.dumps(spec).encode(), timeout=600
                )  # NaN reads back as NaN
                if self.child.returncode == 0 and png.startswith(b"\x89PNG"):
                    return png
            except (OSError, subprocess.SubprocessError):
                self.child.kill()
        import vl_convert

        return vl_convert.vegalite_to_png(spec, scale=1.5)


def _layers(r: dict) -> list[tuple[str, float]]:
    """Amplification at each hop; a hop is shown only when both ends were counted."""

    def ratio(a: str, b: str) -> float | None:
        x, y = r.get(a), r.get(b)
        return x / y if isinstance(x, int | float) and isinstance(y, int | float) and y else None

    eng = r.get("server_engine") or "server"  # whose records the executions are (layers_seen.engine)
    hops = [
        ("client attempts per logical request", ratio("client_attempts", "logical_requests")),
        ("gateway requests per logical request", ratio("gateway_requests", "logical_requests")),
        ("upstream attempts per gateway request", ratio("gateway_attempts", "gateway_requests")),
        (f"{eng} executions per gateway request", ratio("server_requests", "gateway_requests")),
        (f"{eng} executions per logical request", ratio("server_requests", "logical_requests")),
    ]
    return [(name, v) for name, v in hops if v is not None]


def _coverage(summary: dict) -> float | None:
    total = summary["inputs"]["lines_total"]
    return summary["inputs"]["lines_parsed"] / total if total else None


def _ladder_view(summary: dict) -> dict:
    steps = (summary.get("ladder") or {}).get("steps") or []
    cols = [c for c in LADDER_COLS if any(s.get(c) is not None for s in steps)]
    # a share or KV usage as a percentage, as on the page (fmt.keyed)
    # a histogram's p95 as its bucket ('1–2.5 s'), not its interpolation's false precision
    return {
        "ladder_cols": cols,
        "ladder_text": [c for c in cols if c in LADDER_TEXT],
        "ladder_rows": [
            [s.get(f"{c}_bucket") or fmt.keyed(s.get(c), c) or s.get(c) for c in cols] for s in steps
        ],
    }


def _shapes(ld: Loaded, include_prompts: bool) -> dict:
    t = ld.table("unrecognized").sort(["count", "path", "shape"], descending=[True, False, False])
    rows = []
    for r in t.head(MAX_SHAPES_HTML).iter_rows(named=True):
        examples = [redact_prompt(x, include_prompts) for x in (r["examples"] or [])[:3]]
        rows.append({**r, "examples": examples, "shape": redact_prompt(r["shape"], include_prompts)})
    # the files holding most of them, named in the folded list's summary line
    files = t.group_by("path").agg(pl.col("count").sum()).sort(["count", "path"], descending=[True, False])
    top = files["path"].head(3).to_list() + ([f"{files.height - 3} more"] if files.height > 3 else [])
    return {"shapes": rows, "shapes_more": max(t.height - MAX_SHAPES_HTML, 0), "shape_files": top}
