"""Templates, stylesheet and chart theme of logscope's report (package data, read with importlib.resources)."""
