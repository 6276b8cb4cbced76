# vl-convert-python as its compiled module runs (1.9.0), for what logscope calls of it: the package's own stubs
# (vl_convert/__init__.pyi) leave out the module's __version__ and make javascript_bundle's snippet required,
# where the function defaults it (help(vl_convert.javascript_bundle): 'javascript_bundle(snippet=None,
# vl_version=None)'; the default snippet puts vegaEmbed, vegaLite and vega on window, as report.html needs).
# mypy_path ([tool.mypy] in pyproject.toml) puts this file before the installed one.
from typing import Any

__version__: str

def javascript_bundle(snippet: str | None = None, vl_version: str | None = None) -> str: ...
def vegalite_to_png(
    vl_spec: str | dict[str, Any],
    vl_version: str | None = None,
    scale: float | None = None,
    ppi: float | None = None,
    config: dict[str, Any] | None = None,
    theme: str | None = None,
    show_warnings: bool | None = None,
    allowed_base_urls: list[str] | None = None,
) -> bytes: ...
