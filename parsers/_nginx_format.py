"""nginx ``log_format`` handling: compile a format into its layout, read formats from nginx.conf,
and infer a layout from self-describing lines (``key=value`` pairs, JSON objects).

A layout is a list of tokens, each a literal or an nginx variable. The compiled scanner reads lines by it
(``_nginx_plan``: a field plan of the tokens); its ``regex`` spells the same language as one anchored regex with
a named group per variable, the layout's identity and documentation. How a variable's value ends is decided by
what follows it: the next literal's first character, or the shape of the value (timestamps, list-valued
``$upstream_*`` fields that contain ``, `` and `` : ``).

Sources: ``ngx_http_log_module.xml`` (log_format, escape=default|json|none; ``combined`` is
predefined) and ``ngx_http_upstream_module.xml`` (list-valued upstream variables), nginx.org docs.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from .nginx_conf import CONF_GLOBS, read_conf  # compressed confs too

Token = tuple[str, str]  # ("lit", text) or ("var", nginx variable name)

COMBINED = (
    '$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent '
    '"$http_referer" "$http_user_agent"'
)
# the 'main' format of nginx's sample nginx.conf (and most distribution packages)
MAIN = COMBINED + ' "$http_x_forwarded_for"'
# ingress-nginx's default log-format-upstream (docs/user-guide/nginx-configuration/log-format.md)
UPSTREAMINFO = (
    COMBINED + " $request_length $request_time [$proxy_upstream_name] [$proxy_alternative_upstream_name] "
    "$upstream_addr $upstream_response_length $upstream_response_time $upstream_status $req_id"
)
# Apache APISIX's default access_log_format (apisix/cli/config.lua): $http_host after the time, $request_time after
# the bytes, the upstream URL last
APISIX = (
    '$remote_addr - $remote_user [$time_local] $http_host "$request" $status $body_bytes_sent $request_time '
    '"$http_referer" "$http_user_agent" $upstream_addr $upstream_status $upstream_response_time '
    '"$upstream_scheme://$upstream_host$upstream_uri"'
)
# its AI form (ai-proxy docs, PR 12555's test): $apisix_upstream_response_time in that slot, which ai-proxy sets to
# whole milliseconds (math.floor(... * 1000)) where nginx's own is seconds with a dot; then the LLM fields it appends
APISIX_AI = (
    APISIX.replace("$upstream_response_time", "$apisix_upstream_response_time") + " $apisix_llm_fields"
)
# variables read as another: ingress-nginx's $req_id is the client's X-Request-ID, else $request_id, and is the
# X-Request-ID it sends upstream (into vLLM's request id), as $request_id is in a plain nginx setup
VARIABLE_ALIASES = {"req_id": "request_id"}

LIST_VARS = (
    "upstream_addr",
    "upstream_status",
    "upstream_response_time",
    "upstream_connect_time",
    "upstream_header_time",
)
# list-valued too (one value per attempt), not read: only their shape matters
_OTHER_LISTS = ("upstream_response_length", "upstream_bytes_received", "upstream_bytes_sent")

_VAR = re.compile(r"\$(?:\{(\w+)\}|(\w+))")
_TIME_LOCAL = r"\d{2}/[A-Za-z]{3}/\d{4}:\d{2}:\d{2}:\d{2} [+-]\d{4}"
_TIME_ISO = r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:[+-]\d{2}:\d{2}|Z)"
# one upstream list: entries separated by ", " (attempts) or " : " (internal redirect to another group)
_LIST = r'[^\s,"]*(?:(?:, | : )[^\s,"=]*)*'
_JSON_STR = r'(?:[^"\\]|\\.)*'
# the value shapes of the variables that have one (the field plan, ``_nginx_plan``, reads ASCII digits in them)
_FIXED = {
    "time_local": _TIME_LOCAL.replace(r"\d", "[0-9]"),
    "time_iso8601": _TIME_ISO.replace(r"\d", "[0-9]"),
    "msec": r"[0-9]+\.[0-9]+",
    "apisix_upstream_response_time": r"[0-9]+|-",  # whole ms: a dotted value is nginx's seconds, another layout
}

# nginx.conf tokens: comments, quoted strings, punctuation, bare words
_CONF_TOKEN = re.compile(r"""#[^\n]*|'((?:[^'\\]|\\.)*)'|"((?:[^"\\]|\\.)*)"|([;{}])|([^\s;{}'"#]+)""")
_CONF_UNESCAPE = re.compile(r"\\(.)")

# inference: pieces of a self-describing line
_INF_TOKEN = re.compile(
    rf"(?P<iso>{_TIME_ISO})"
    rf"|\[(?P<local>{_TIME_LOCAL})\]"
    r'|(?P<key>[A-Za-z_][\w.-]*)=(?:"(?P<qval>[^"]*)"|(?P<val>[^\s"]*(?:(?:, | : )[^\s",=]+)*))'
    r'|"(?P<req>[A-Z]+ [^"\s]+(?: HTTP/[\d.]+)?)"'
)
_JSON_PAIR = re.compile(r'"(?P<key>[^"\\]+)"\s*:\s*(?:"(?P<s>(?:[^"\\]|\\.)*)"|(?P<n>[^,}\s]*))')
_ADDRESS = re.compile(r"^(?:-|[\w.\[\]-]+:\d+|unix:\S+|[\w.-]+)(?:(?:, | : )\S+)*$")

# key spelled in a self-describing line -> nginx variable it carries
ALIASES: dict[str, str] = {}
for _var, _keys in {
    "request_id": "rid request_id req_id requestid",
    "msec": "msec",
    "request_time": "rt request_time req_time",
    "upstream_addr": "upstream_addr upstream upstream_address",
    "upstream_status": "us upstream_status",
    "upstream_response_time": "urt upstream_response_time",
    "upstream_connect_time": "uct upstream_connect_time",
    "upstream_header_time": "uht upstream_header_time",
    "status": "status code response_status",
    "bytes_sent": "sent bytes_sent",
    "body_bytes_sent": "body_bytes_sent body_bytes",
    "request_length": "req_len request_length",
    "server_port": "port server_port",
    "http_x_request_id": "client_rid x_request_id http_x_request_id client_request_id xrid",
    "http_x_stainless_retry_count": "retry_hdr http_x_stainless_retry_count x_stainless_retry_count retry_count",
    "http_user_agent": "ua_client user_agent http_user_agent agent useragent",
    "http_traceparent": "traceparent http_traceparent",
    "request": "request req",
    "request_method": "method request_method",
    "request_uri": "uri request_uri path",
    "remote_addr": "remote_addr client client_ip remote",
    "time_iso8601": "time_iso8601",
    "time_local": "time_local",
}.items():
    for _k in _keys.split():
        ALIASES[_k] = _var
_TIME_KEYS = {"time", "timestamp", "ts", "@timestamp", "date", "datetime"}
_USER_AGENT = re.compile(r"^[A-Za-z][\w.-]*/\d|\s")


@dataclass
class Layout:
    """A compiled log format: its regex and the nginx variable of each named group."""

    name: str
    origin: str  # for the assumptions list: where the layout came from
    tokens: list[Token]
    escape: str = "default"
    regex: str = ""
    variables: list[str] = field(default_factory=list)
    preferred: int = 0  # 1 when an access_log directive writes this very file with this format

    def __post_init__(self) -> None:
        self.regex, self.variables = compile_tokens(self.tokens, self.escape)

    @property
    def format(self) -> str:
        return "".join(t if k == "lit" else f"${t}" for k, t in self.tokens)


def tokenize(fmt: str) -> list[Token]:
    """Split a log_format string into literal and variable tokens."""
    out: list[Token] = []
    pos = 0
    for m in _VAR.finditer(fmt):
        if m.start() > pos:
            out.append(("lit", fmt[pos : m.start()]))
        out.append(("var", (m.group(1) or m.group(2)).lower()))
        pos = m.end()
    if pos < len(fmt):
        out.append(("lit", fmt[pos:]))
    return out


def _value_pattern(var: str, nxt: str | None, escape: str) -> str:
    if var in _FIXED:
        return _FIXED[var]
    if var in LIST_VARS or var in _OTHER_LISTS:
        return _JSON_STR if (escape == "json" and nxt and nxt[0] == '"') else _LIST
    if nxt is None:
        return ".*"
    if nxt == "":  # another variable follows directly: nothing tells where this one ends
        return ".*?"
    if escape == "json" and nxt[0] == '"':
        return _JSON_STR
    return f"[^{re.escape(nxt[0])}]*"


def compile_tokens(
    tokens: list[Token], escape: str = "default", capture: set[str] | None = None
) -> tuple[str, list[str]]:
    """One anchored regex for a tokenised format; groups are named after the variables (first use).

    With ``capture``, only those variables get a group (the others match the same text, uncaptured).
    Cached: every file of a folder of many small logs compiles the same few formats.
    """
    regex, names = _compile(tuple(tokens), escape, None if capture is None else frozenset(capture))
    return regex, list(names)


@functools.lru_cache(maxsize=512)
def _compile(
    tokens: tuple[Token, ...], escape: str, capture: frozenset[str] | None
) -> tuple[str, tuple[str, ...]]:
    parts, names = ["^"], []
    for i, (kind, text) in enumerate(tokens):
        if kind == "lit":
            parts.append(re.escape(text))
            continue
        nxt = None
        if i + 1 < len(tokens):
            nxt = tokens[i + 1][1] if tokens[i + 1][0] == "lit" else ""
        pat = _value_pattern(text, nxt, escape)
        name = VARIABLE_ALIASES.get(text, text)  # the group is named for what the parser reads it as
        if name in names or not re.fullmatch(r"[A-Za-z_]\w*", name):
            parts.append(f"(?:{pat})")
        else:
            names.append(name)
            parts.append(f"(?P<{name}>{pat})" if capture is None or name in capture else f"(?:{pat})")
    parts.append(r"\r?$")
    return "".join(parts), tuple(names)


def layout_from_format(fmt: str, name: str, origin: str) -> Layout:
    """A layout from a format string; a leading ``escape=json`` or a whole log_format statement is accepted."""
    fmt = fmt.strip()
    if fmt.startswith("log_format"):
        found = parse_conf(fmt if fmt.endswith(";") else fmt + ";")
        if found:
            n, esc, f = found[0]
            return Layout(n, origin, tokenize(f), esc)
    escape = "default"
    m = re.match(r"escape=(\w+)\s+", fmt)
    if m:
        escape, fmt = m.group(1), fmt[m.end() :]
        if len(fmt) >= 2 and fmt[0] == fmt[-1] and fmt[0] in "'\"":
            fmt = fmt[1:-1]
    return Layout(name, origin, tokenize(fmt), escape)


def parse_conf(text: str) -> list[tuple[str, str, str]]:
    """Every ``log_format NAME [escape=..] '...' '...';`` of a config: (name, escape, format)."""
    out: list[tuple[str, str, str]] = []
    stmt: list[str] | None = None
    for m in _CONF_TOKEN.finditer(text):
        if m.group(0).startswith("#") and m.group(1) is None and m.group(2) is None:
            continue
        quoted = m.group(1) if m.group(1) is not None else m.group(2)
        word = _CONF_UNESCAPE.sub(r"\1", quoted) if quoted is not None else (m.group(3) or m.group(4))
        if stmt is None:
            if quoted is None and word == "log_format":
                stmt = []
            continue
        if quoted is None and word in (";", "{", "}"):
            if len(stmt) >= 2:
                name, rest = stmt[0], stmt[1:]
                escape = "default"
                if rest[0].startswith("escape="):
                    escape, rest = rest[0].split("=", 1)[1], rest[1:]
                out.append((name, escape, "".join(rest)))
            stmt = None
            continue
        stmt.append(word)
    return out


def conf_access_logs(text: str) -> dict[str, str]:
    """``access_log PATH [FORMAT]`` directives: file name -> format name ('combined' when none)."""
    out = {}
    for m in re.finditer(r"(?m)^\s*access_log\s+([^\s;]+)(?:\s+([^\s;]+))?", text):
        if m.group(1) != "off":
            fmt = m.group(2) if m.group(2) and "=" not in m.group(2) else "combined"
            out[Path(m.group(1).strip("'\"")).name] = fmt.strip("'\"")
    return out


def _var_for_key(key: str, value: str | None, used: set[str]) -> str:
    k = key.lower().lstrip("@")
    var = ALIASES.get(k)
    if k == "ua" and value is not None:  # lab spelling: ua= upstream address; elsewhere a user agent
        var = (
            "http_user_agent" if _USER_AGENT.search(value) and not _ADDRESS.match(value) else "upstream_addr"
        )
    if (k in _TIME_KEYS or var in ("time_iso8601", "time_local", "msec")) and value:
        if re.fullmatch(_TIME_ISO, value):
            var = "time_iso8601"
        elif re.fullmatch(_TIME_LOCAL, value):
            var = "time_local"
        elif re.fullmatch(r"1\d{9}\.\d+", value):
            var = "msec"
    if var is None or var in used:
        var = "x_" + re.sub(r"\W", "_", k)
    while var in used:
        var += "_"
    used.add(var)
    return var


def infer_kv(line: str) -> list[Token] | None:
    """Tokens for a ``key=value`` line (with optional leading time / bare request / status)."""
    tokens: list[Token] = []
    used: set[str] = set()
    pos, n_keys, after_request = 0, 0, False
    for m in _INF_TOKEN.finditer(line):
        gap = line[pos : m.start()]
        _gap_tokens(gap, tokens, used, after_request)
        after_request = False
        if m.group("iso"):
            tokens.append(("var", _var_for_key("time_iso8601", m.group("iso"), used)))
        elif m.group("local"):
            tokens += [
                ("lit", "["),
                ("var", _var_for_key("time_local", m.group("local"), used)),
                ("lit", "]"),
            ]
        elif m.group("req"):
            tokens += [("lit", '"'), ("var", _var_for_key("request", None, used)), ("lit", '"')]
            after_request = True
        else:
            n_keys += 1
            q = m.group("qval") is not None
            value = m.group("qval") if q else m.group("val")
            tokens.append(("lit", m.group("key") + ('="' if q else "=")))
            tokens.append(("var", _var_for_key(m.group("key"), value, used)))
            if q:
                tokens.append(("lit", '"'))
        pos = m.end()
    _gap_tokens(line[pos:], tokens, used, False)
    return _merge(tokens) if n_keys >= 3 else None


def _gap_tokens(gap: str, tokens: list[Token], used: set[str], after_request: bool) -> None:
    """Text between recognised pieces: whitespace stays literal, other words become variables."""
    for piece in re.split(r"(\s+)", gap):
        if not piece:
            continue
        if piece.isspace():
            tokens.append(("lit", piece))
            continue
        if after_request and re.fullmatch(r"\d{3}", piece) and "status" not in used:
            var = "status"
        elif (
            after_request
            and "status" in used
            and re.fullmatch(r"\d+|-", piece)
            and "body_bytes_sent" not in used
        ):
            var = "body_bytes_sent"
        elif not tokens and re.fullmatch(r"[\d.:a-fA-F\[\]]+", piece) and "remote_addr" not in used:
            var = "remote_addr"
        else:
            var = f"x_f{len(used)}"
        used.add(var)
        tokens.append(("var", var))


def infer_json(line: str) -> list[Token] | None:
    """Tokens for a one-object-per-line JSON access log (escape=json): keys stay literal."""
    s = line.strip()
    if not (s.startswith("{") and s.endswith("}")):
        return None
    tokens: list[Token] = []
    used: set[str] = set()
    pos, n = 0, 0
    for m in _JSON_PAIR.finditer(line):
        q = m.group("s") is not None
        start = m.start("s") if q else m.start("n")
        end = m.end("s") if q else m.end("n")
        tokens.append(("lit", line[pos:start]))
        tokens.append(("var", _var_for_key(m.group("key"), m.group("s") if q else m.group("n"), used)))
        pos, n = end, n + 1
    tokens.append(("lit", line[pos:]))
    return _merge(tokens) if n >= 2 else None


def _merge(tokens: list[Token]) -> list[Token]:
    out: list[Token] = []
    for k, t in tokens:
        if k == "lit" and out and out[-1][0] == "lit":
            out[-1] = ("lit", out[-1][1] + t)
        elif not (k == "lit" and t == ""):
            out.append((k, t))
    return out


def match_count(layout: Layout, head: list[str]) -> int:
    """Head lines the layout matches, as the parser will match them (its field plan, ``_nginx_plan``)."""
    from . import _nginx_plan  # it builds on this module's layouts

    if not head:
        return 0
    return _nginx_plan.plan([layout]).count(pl.Series(head, dtype=pl.String))


def candidates(head: list[str], options: dict) -> list[tuple[Layout, int]]:
    """Layouts that match head lines, best first: --nginx-log-format, then formats of a *.conf beside
    the log, then formats inferred from the lines, then the predefined combined / main."""
    head = [h for h in head if h.strip()][:200]
    explicit: list[Layout] = []
    if options.get("nginx_log_format"):
        explicit.append(
            layout_from_format(options["nginx_log_format"], "cli", "the --nginx-log-format option")
        )
    conf = _conf_layouts(options.get("path"))
    inferred: list[Layout] = []
    seen: set[str] = set()
    tried: set[tuple] = set()  # the lines of one log mostly give the same tokens: one Layout each
    for line in head:
        toks = infer_json(line) if line.lstrip().startswith("{") else infer_kv(line)
        if toks is None:
            continue
        esc = "json" if line.lstrip().startswith("{") else "default"
        if (key := (tuple(toks), esc)) in tried:
            continue
        tried.add(key)
        lay = Layout("inferred", "", toks, esc)
        if lay.regex not in seen:
            seen.add(lay.regex)
            lay.origin = f"inferred from the log's own key=value/JSON keys as {lay.format!r}"
            inferred.append(lay)
        if len(inferred) >= 5:
            break
    builtin = [
        Layout("combined", "nginx's predefined 'combined' format", tokenize(COMBINED)),
        Layout("main", "the 'main' format of nginx's sample nginx.conf", tokenize(MAIN)),
        Layout(
            "upstreaminfo",
            "ingress-nginx's default log-format-upstream 'upstreaminfo'",
            tokenize(UPSTREAMINFO),
        ),
        Layout(
            "apisix_ai",
            "Apache APISIX's access format with ai-proxy's $apisix_upstream_response_time (ms) and LLM fields after",
            tokenize(APISIX_AI),
        ),
        Layout("apisix", "Apache APISIX's default access_log_format", tokenize(APISIX)),
    ]
    out: list[tuple[Layout, int]] = []
    for group in (explicit, conf, inferred, builtin):
        scored = [(lay, match_count(lay, head)) for lay in group]
        scored = [s for s in scored if s[1] > 0]
        scored.sort(key=lambda s: (-s[1], -s[0].preferred))
        out += scored
    return out


def _conf_layouts(path: str | None) -> list[Layout]:
    if not path:
        return []
    p = Path(path)
    folder = p.parent
    try:
        confs = sorted(c for g in CONF_GLOBS for c in folder.glob(g))
    except OSError:
        return []
    out = []
    log_name = re.sub(r"(\.\d{1,3})?(\.(gz|zst|bz2|xz))?$", "", p.name)  # access.log.1.gz -> access.log
    for conf in confs:
        text = read_conf(conf)
        if text is None:
            continue
        named = conf_access_logs(text)
        for name, escape, fmt in parse_conf(text):
            origin = f"log_format {name!r} in {conf.name} beside the log"
            out.append(
                Layout(name, origin, tokenize(fmt), escape, preferred=int(named.get(log_name) == name))
            )
    return out
