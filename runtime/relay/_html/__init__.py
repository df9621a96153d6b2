"""What the shells show a person: text with its control characters written out, and
self-contained HTML pages with tables and SVG charts (``relay show --html``,
docs/timeline.md; ``relay eval --html``, docs/eval.md).

A room of its own below the shells that write pages: the command line's transcript and
timeline, and the evaluation's page, share it, and it imports nothing of relay. Everything
here is a pure function of its arguments, so that a page is the same for the same data and can
be tested without a browser.
"""

from __future__ import annotations

from ._chart import Chart as Chart
from ._chart import Marker as Marker
from ._chart import Series as Series
from ._chart import legend as legend
from ._chart import nice_ticks as nice_ticks
from ._chart import short_figure as short_figure
from ._chart import svg_chart as svg_chart
from ._page import BASE_CSS as BASE_CSS
from ._page import CONTENT_SECURITY_POLICY as CONTENT_SECURITY_POLICY
from ._page import ERROR_CAPTURE as ERROR_CAPTURE
from ._page import details as details
from ._page import figure as figure
from ._page import page as page
from ._page import row as row
from ._page import table as table
from ._page import tag as tag
from ._text import attr as attr
from ._text import json_script as json_script
from ._text import text as text
from ._text import visible as visible

__all__ = [
    "BASE_CSS",
    "CONTENT_SECURITY_POLICY",
    "ERROR_CAPTURE",
    "Chart",
    "Marker",
    "Series",
    "attr",
    "details",
    "figure",
    "json_script",
    "legend",
    "nice_ticks",
    "page",
    "row",
    "short_figure",
    "svg_chart",
    "table",
    "tag",
    "text",
    "visible",
]
