"""logscope: post-mortem of LLM-serving incidents from vLLM, gateway and client logs.

Library API (the CLI is a thin layer over these)::

    import logscope
    logscope.ingest("incident-logs", "out")     # Parquet tables
    logscope.analyze("incident-logs", "out")    # + correlation, diagnosis, report
"""

import os as _os

__version__ = "0.1.0"

# logscope.parsers and logscope.report_templates live at the top of a source checkout (parsers/,
# report_templates/) and are installed inside this package (pyproject's [tool.maturin]: logscope/parsers and
# logscope/report_templates are links to them). In a checkout whose links were not kept (git's core.symlinks
# off), the checkout's top is one more place to find them. Only those two names are looked up there by anything.
_here = _os.path.dirname(_os.path.abspath(__file__))
if not _os.path.isdir(_os.path.join(_here, "parsers")):
    _top = _os.path.dirname(_here)
    if _os.path.isfile(_os.path.join(_top, "parsers", "__init__.py")) and _top not in __path__:
        __path__.append(_top)

_API = ("ingest", "correlate", "diagnose", "analyze", "render", "AnalyzeOptions")


def __getattr__(name: str):
    # Lazy, so that importing logscope.schemas (as the parsers do) does not import the pipeline.
    if name in _API:
        from . import api

        return getattr(api, name)
    raise AttributeError(name)


__all__ = ["__version__", *_API]
