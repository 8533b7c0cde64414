"""Static pictures for notebooks that show on opening: a PNG with the SVG beside it.

JupyterLab draws an SVG output only in a trusted notebook, and a notebook someone else ran is
not trusted: a fresh clone, Binder and a downloaded file all open untrusted and would show
``<IPython.core.display.SVG object>``. A PNG is drawn everywhere (JupyterLab trusted or not,
Binder, GitHub, nbviewer). ``picture`` therefore returns one display object carrying both: the
PNG, drawn at twice the resolution so it stays sharp on high-density screens, for viewers that
will not draw the SVG, and the SVG for those that will. Either is scaled down to the width of
the page by JupyterLab's own image styles.

    from kip_lab.viz import picture, machine_dot
    picture(machine_dot(GROUP_STATE_MACHINE, current="Stable"))   # DOT text
    picture(ownership_swimlanes(frames))                          # an Altair chart
"""

from __future__ import annotations

import base64
import re
import struct
from typing import Any

from kip_lab.contract import checked, refuse

PNG_SCALE = 2  # pixels per CSS pixel in the stored PNG
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


class Picture:
    """One picture in two formats; IPython displays it as a PNG + SVG bundle."""

    def __init__(self, svg: str, png: bytes, description: str) -> None:
        if not png.startswith(PNG_SIGNATURE):
            raise ValueError(f"{description}: the PNG could not be drawn: {png[:200]!r}")
        self.svg = svg
        self.png = png
        self.description = description

    @property
    def size(self) -> tuple[int, int]:
        """The PNG's (width, height) in pixels, read from its header."""
        return struct.unpack(">II", self.png[16:24])

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> tuple[dict, dict]:
        width, height = self.size
        data = {
            "image/png": base64.b64encode(self.png).decode("ascii"),
            "image/svg+xml": self.svg,
            "text/plain": self.description,
        }
        # drawn at its CSS size (half its pixels); JupyterLab still scales it down to the page width
        metadata = {"image/png": {"width": width // PNG_SCALE, "height": height // PNG_SCALE}}
        return data, metadata

    def __repr__(self) -> str:
        return f"<picture: {self.description}>"


def _dot_picture(dot_source: str) -> Picture:
    from kip_lab.viz.dot import DOT_MISSING_MESSAGE, render

    svg = render(dot_source, format="svg")
    if not isinstance(svg, str) or svg.startswith(DOT_MISSING_MESSAGE):
        raise RuntimeError(DOT_MISSING_MESSAGE)
    png = render(dot_source.replace("  graph [", f"  graph [dpi={72 * PNG_SCALE}, ", 1), format="png")
    if not isinstance(png, bytes):  # text instead of an image: the missing-graphviz message
        raise RuntimeError(DOT_MISSING_MESSAGE)
    name = re.match(r'\s*digraph "((?:[^"\\]|\\.)*)"', dot_source)
    return Picture(svg, png, f"diagram: {name.group(1) if name else 'graph'}")


def _chart_picture(chart: Any) -> Picture:
    from kip_lab.viz.charts import to_png, to_svg

    title = chart.to_dict(validate=False).get("title", "")
    text = title.get("text", "") if isinstance(title, dict) else title
    return Picture(to_svg(chart), to_png(chart, scale=PNG_SCALE), f"chart: {text or 'Vega-Lite'}")


@checked
def picture(source: Any) -> Picture:
    """A ``Picture`` of DOT text (``machine_dot``, ``group_dot``) or of an Altair chart."""
    if isinstance(source, str):
        if not re.match(r"\s*(strict\s+)?(di)?graph\b", source):
            raise refuse("picture", "source", "DOT text (from machine_dot or group_dot) or an Altair chart")
        return _dot_picture(source)
    if hasattr(source, "to_dict"):
        return _chart_picture(source)
    raise refuse("picture", "source", f"DOT text or an Altair chart, not {type(source).__name__}")


VEGA_LITE_MIMETYPE = "application/vnd.vegalite.v5+json"


def notebook_chart_bundle(spec: dict, **_options: Any) -> dict[str, Any]:
    """An Altair renderer: the Vega-Lite spec, which JupyterLab draws itself (offline, interactive),
    with a PNG of it beside.

    The PNG is what GitHub and other viewers without Vega show. It also keeps a notebook from
    opening modified: JupyterLab's Vega renderer adds a PNG to every chart output that has none,
    which changes the notebook as soon as it is drawn.
    """
    import vl_convert as vlc

    from kip_lab.viz.charts import _vl_version

    png = vlc.vegalite_to_png(spec, vl_version=_vl_version(), allowed_base_urls=[])
    return {
        VEGA_LITE_MIMETYPE: spec,
        "image/png": base64.b64encode(png).decode("ascii"),
        "text/plain": "<a Vega-Lite chart>",
    }


def notebook_charts() -> None:
    """Show Altair charts in notebooks as ``notebook_chart_bundle`` makes them (the first cell of every notebook)."""
    import altair as alt

    alt.renderers.register("kip_lab", notebook_chart_bundle)
    alt.renderers.enable("kip_lab")
