"""report.html: one self-contained page (jinja2, autoescape on, StrictUndefined).

Log text is attacker-controlled: it reaches the page only through autoescaped template
variables, or inside ``<script type="application/json">`` blocks where every ``<``, ``>`` and
``&`` is written as a JSON ``\\u`` escape, so no log line can close the script element. Control and bidi
characters (``logscope.invisible_chars``) are shown as escapes, in the page's text and in the charts' data alike. The
Content-Security-Policy forbids any network load; Vega runs with its expression interpreter
(``ast: true``), so no ``eval`` is needed either.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import re
import sys
import tempfile
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, TypedDict

import jinja2
import jinja2.bccache
import vl_convert
from markupsafe import Markup, escape

from ..invisible_chars import visible, visible_all
from . import fmt

CSP = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:"
SEVERITIES = ("critical", "high", "medium", "low", "info")
CLASSES = ("spike", "sustained", "recurring", "crash")
_NOT_ANCHOR = re.compile(r"[^A-Za-z0-9_-]")
_WHOLE_MAX = 24  # characters of a word kept on one line in a generic table
_BREAK_AFTER = re.compile(r"(?<=[/_\-.])")  # where a path or a name may wrap: after its separators
_JSON_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
_JSON_UNSAFE = re.compile("[<>&\u2028\u2029]")


def script_json(obj: Any) -> Markup:
    """JSON safe inside a <script> element: nothing in it can end the element or open a comment."""
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return Markup(_JSON_UNSAFE.sub(lambda m: _JSON_ESCAPES[m.group(0)], text))


def columns(rows: list[dict]) -> list[str]:
    """Union of the keys of a list of records, in first-seen order."""
    seen: dict[str, None] = {}
    for r in rows:
        if isinstance(r, dict):
            seen.update(dict.fromkeys(r))
    return list(seen)


def template_source(name: str) -> tuple[str, None, Any]:
    text = resources.files("logscope.report_templates").joinpath(name).read_text(encoding="utf-8")
    return text, None, lambda: True


class _Compiled(jinja2.FileSystemBytecodeCache):
    """Compiled templates kept beside their sources, as Python keeps a module's .pyc beside it, and trusted alike
    (whoever may write there may change the templates and the code too): compiling the page's template took
    ~0.2 s of every render. A template's text is checked against its compiled copy (jinja's checksum); the key
    holds the environment's settings, so that a change of them compiles again. A folder that cannot be written
    only costs the compilation."""

    def __init__(self, directory: str, settings: str) -> None:
        super().__init__(directory, "__jinja2_%s.cache")
        self.settings = settings

    def get_cache_key(self, name: str, filename: str | None = None) -> str:
        return hashlib.sha256(f"{self.settings}\0{name}".encode()).hexdigest()

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        if (
            sys.dont_write_bytecode
        ):  # PYTHONDONTWRITEBYTECODE: nothing written beside the sources, as Python does
            return
        try:
            super().dump_bytecode(bucket)
        except OSError:
            pass

    def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        try:
            super().load_bytecode(bucket)
        except (OSError, EOFError, ValueError, TypeError, pickle.UnpicklingError):  # damaged: compiled again
            bucket.reset()


def compiled_cache(**settings: Any) -> jinja2.BytecodeCache | None:
    """The cache of compiled templates in report_templates/__pycache__, or None where the templates are not
    files (a zipped install)."""
    base = resources.files("logscope.report_templates")
    if not isinstance(base, Path):
        return None
    folder = base / "__pycache__"
    try:
        folder.mkdir(exist_ok=True)
    except OSError:
        return None
    return _Compiled(str(folder), repr(sorted(settings.items())) + jinja2.__version__)


class Settings(TypedDict, total=False):
    """jinja2.Environment's switches a page sets, typed so that ``**SETTINGS`` is checked against its signature."""

    autoescape: bool
    trim_blocks: bool
    lstrip_blocks: bool
    keep_trailing_newline: bool


SETTINGS: Settings = {"autoescape": True, "trim_blocks": True, "lstrip_blocks": True}


@cache
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FunctionLoader(template_source),
        bytecode_cache=compiled_cache(**SETTINGS, finalize="_shown"),
        undefined=jinja2.StrictUndefined,
        finalize=_shown,
        **SETTINGS,
    )
    env.filters.update(
        fnum=fmt.fnum,
        seconds=fmt.seconds,
        ms=lambda x: fmt.seconds(None if x is None else x / 1000),
        pct=fmt.pct,
        signal_value=fmt.signal_value,
        hms=fmt.hms,
        hms_span=fmt.hms_span,
        when=fmt.when,
        duration=fmt.duration,
        anchor=lambda s: _NOT_ANCHOR.sub("_", str(s)) or "_",
        sev_class=lambda s: f"sev-{s}" if s in SEVERITIES else "sev-info",
        cls_class=lambda s: f"cls-{s}" if s in CLASSES else "",
        fval=fmt.fval,
        keyed=fmt.keyed,
        whole=_whole,
        breakable=_breakable,
        label=fmt.label,
        columns=columns,
    )
    return env


def _shown(x: Any) -> Any:
    """Every value a template prints: a text's control and bidi characters as escapes (a file name with a
    U+202E would read backwards); Markup is the page's own (the bundle, the styles, the charts' JSON)."""
    return visible(x) if isinstance(x, str) and not isinstance(x, Markup) else x


def _whole(x: Any) -> Markup | None:
    """A value of a generic table kept on one line: an ISO time (as HH:MM:SS; a narrow column broke it at
    every character) or a short word such as a replica name ('replica-0' broke at its hyphen); None for any
    other value."""
    if not isinstance(x, str):
        return None
    if fmt.is_iso(x):
        return Markup('<span class="nowrap">{}</span>').format(fmt.hms(x))
    if len(x) <= _WHOLE_MAX and not any(c.isspace() for c in x):
        return Markup('<span class="nowrap">{}</span>').format(visible(x))
    return None


def _breakable(x: Any) -> Any:
    """A path or a name that may wrap only after a separator ('/', '_', '-', '.'), never inside a word: a narrow
    column broke 'gateway' into 'gate / way' and 'prometheus_query_range' anywhere."""
    if not isinstance(x, str):
        return x
    return Markup("<wbr>").join(escape(part) for part in _BREAK_AFTER.split(visible(x)))


# sha256 of vl-convert's bundle, per vl-convert version (the bundle is pinned to it and built alike every
# time): a cached copy is inlined only when it hashes to this, so a file planted in the cache folder never
# runs in a report. Another version builds its bundle at every run (~1 s) until its hash is added here:
# python -c "import vl_convert, hashlib; print(vl_convert.__version__,
#            hashlib.sha256(vl_convert.javascript_bundle().encode()).hexdigest())"
BUNDLE_SHA256 = {
    "1.9.0": "3425bd951a44d478d0505c6b5d1e8d57656b6e9a4da7bfe88a718ce61d76e572",
}


def _bundle_path() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "logscope" / f"vega-bundle-vl-convert-{vl_convert.__version__}.js"


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _javascript_bundle() -> str:
    """vl-convert's bundle, kept in the user's cache folder: building it takes ~1 s and holds the GIL.
    The cached copy is used only when its hash is the one shipped for this vl-convert version
    (``BUNDLE_SHA256``): anything else there (a planted script, a half-written file) is built again and
    replaced. Any I/O error = rebuild."""
    known = BUNDLE_SHA256.get(vl_convert.__version__)
    path = _bundle_path()
    if known is not None:
        try:
            data = path.read_bytes()
            if _sha256(data) == known:
                return data.decode("utf-8")
        except (OSError, UnicodeDecodeError):
            pass
    js = vl_convert.javascript_bundle()
    if known is not None and _sha256(js.encode("utf-8")) == known:
        _cache(path, js)
    return js


def _cache(path: Path, js: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # a new file of its own (O_EXCL: never through a link planted at a guessable name), renamed over the
        # old one: a concurrent run reads the old file or the new one, never half
        with tempfile.NamedTemporaryFile(
            "w", encoding="utf-8", dir=path.parent, prefix=f".{path.name}.", suffix=".tmp", delete=False
        ) as fh:
            fh.write(js)
        Path(fh.name).replace(path)
    except OSError:
        pass


@cache
def vega_bundle() -> Markup:
    """Vega, Vega-Lite and Vega-Embed as one script, from vl-convert (offline), wrapped in a function
    scope so that the bundle's top-level names cannot clash with the page's."""
    js = _javascript_bundle()
    if "</script" in js.lower():  # cannot happen with the pinned bundle; never emit a broken page
        js = re.sub(r"</(script)", r"<\\/\1", js, flags=re.IGNORECASE)
    return Markup("(function () {\n" + js + "\n})();")


def css() -> Markup:
    return Markup(
        resources.files("logscope.report_templates").joinpath("report.css").read_text(encoding="utf-8")
    )


def render_html(context: dict) -> str:
    tpl = environment().get_template("report.html.j2")
    # names in the charts (replicas, files) with their control and bidi characters shown, as in the page's text
    specs = {name: script_json(visible_all(spec)) for name, spec in context["charts"].items() if spec}
    return tpl.render(**context, specs=specs, csp=CSP, css=css(), vega_bundle=vega_bundle())
