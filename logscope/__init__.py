"""logscope: post-mortem of LLM-serving incidents from vLLM, gateway and client logs.

Library API (the CLI is a thin layer over these)::

    import logscope
    logscope.ingest("incident-logs", "out")     # Parquet tables
    logscope.analyze("incident-logs", "out")    # + correlation, diagnosis, report
"""

__version__ = "0.1.0"

_API = ("ingest", "correlate", "diagnose", "analyze", "render", "AnalyzeOptions")


def __getattr__(name: str):
    # Lazy, so that importing logscope.schemas (as the parsers do) does not import the pipeline.
    if name in _API:
        from . import api

        return getattr(api, name)
    raise AttributeError(name)


__all__ = ["__version__", *_API]
