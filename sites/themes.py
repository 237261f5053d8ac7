"""Visual themes: palette, type, shape and layout of a site, and the stylesheet they make.

Guarantee: the first 270 sites of a generation get pairwise different layouts (header x listing x
filters x density x font), and hues spread by the golden angle, so 50 sites look distinct in a
screenshot. Colours keep text readable: body text and links reach a WCAG contrast ratio of at
least 4.5 against the background; button text takes the better of white and near-black.
"""

from __future__ import annotations

import colorsys
import itertools
from dataclasses import dataclass
from random import Random

FONTS = {
    "DejaVu Sans": '"DejaVu Sans", Verdana, sans-serif',
    "DejaVu Serif": '"DejaVu Serif", Georgia, serif',
    "Liberation Sans": '"Liberation Sans", Arial, Helvetica, sans-serif',
    "Liberation Serif": '"Liberation Serif", "Times New Roman", serif',
    "Liberation Mono": '"Liberation Mono", "Courier New", monospace',
}
HEADERS = ("left", "centered", "sidebar")
LISTINGS = ("grid", "table", "list")
FILTERS = ("sidebar", "top")
DENSITIES = ("compact", "comfortable", "spacious")
LAYOUTS = tuple(itertools.product(HEADERS, LISTINGS, FILTERS, DENSITIES, sorted(FONTS)))
GOLDEN_ANGLE = 137.508


@dataclass(frozen=True)
class Theme:
    background: str
    surface: str
    accent: str
    accent_text: str
    text: str
    muted: str
    border: str
    font: str  # one of FONTS
    font_size: int  # px
    radius: int  # px
    header: str  # left, centered, sidebar
    listing: str  # grid, table, list
    filters: str  # sidebar, top
    density: str  # compact, comfortable, spacious
    dark: bool

    def summary(self) -> str:
        mode = "dark" if self.dark else "light"
        return (
            f"{self.accent} {mode}, {self.font} {self.font_size}px, header {self.header}, "
            f"{self.listing}, filters {self.filters}, {self.density}"
        )


def _hex(hue: float, saturation: float, lightness: float) -> str:
    r, g, b = colorsys.hls_to_rgb((hue % 360) / 360, lightness, saturation)
    return f"#{round(r * 255):02x}{round(g * 255):02x}{round(b * 255):02x}"


def _luminance(colour: str) -> float:
    channels = [int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast(a: str, b: str) -> float:
    """WCAG contrast ratio of two ``#rrggbb`` colours."""
    high, low = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def make_theme(rng: Random, index: int, layout_order: list[int]) -> Theme:
    """The theme of the ``index``-th site; ``layout_order``: one shuffle for the generation."""
    header, listing, filters, density, font = LAYOUTS[layout_order[index % len(LAYOUTS)]]
    hue = (index * GOLDEN_ANGLE + rng.uniform(0, 20)) % 360
    dark = rng.random() < 0.2
    saturation = rng.uniform(0.45, 0.8)
    if dark:
        background, surface = _hex(hue, 0.25, 0.09), _hex(hue, 0.22, 0.15)
        text, muted, border = _hex(hue, 0.15, 0.92), _hex(hue, 0.12, 0.72), _hex(hue, 0.18, 0.28)
        lightness, step = rng.uniform(0.6, 0.7), 0.03
    else:
        background = _hex(hue, rng.uniform(0.2, 0.5), rng.uniform(0.95, 0.985))
        surface = "#ffffff" if rng.random() < 0.7 else _hex(hue, 0.3, 0.99)
        text, muted, border = _hex(hue, 0.3, 0.12), _hex(hue, 0.12, 0.36), _hex(hue, 0.2, 0.85)
        lightness, step = rng.uniform(0.3, 0.4), -0.03
    accent = _hex(hue, saturation, lightness)
    # The accent is also the link colour: move it away from the background until it reads.
    while contrast(accent, background) < 4.5:
        lightness += step
        accent = _hex(hue, saturation, lightness)
    accent_text = max(("#ffffff", "#111111"), key=lambda ink: contrast(accent, ink))
    return Theme(
        background=background,
        surface=surface,
        accent=accent,
        accent_text=accent_text,
        text=text,
        muted=muted,
        border=border,
        font=font,
        font_size=rng.choice((14, 15, 16, 17)),
        radius=rng.choice((0, 2, 4, 8, 12, 16)),
        header=header,
        listing=listing,
        filters=filters,
        density=density,
        dark=dark,
    )


_SPACING = {"compact": (6, 10), "comfortable": (10, 16), "spacious": (14, 24)}

# One stylesheet for every site; a theme only sets the variables and picks the layout classes.
_BASE_CSS = """
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--text);font-family:var(--font);
font-size:var(--size);line-height:1.45}
a{color:var(--accent)}
h1{font-size:1.7em;margin:.2em 0 .5em}h2{font-size:1.3em;margin:.8em 0 .4em}
.wrap{max-width:1200px;margin:0 auto;padding:0 var(--gap)}
header.site{background:var(--surface);border-bottom:1px solid var(--border)}
.bar{display:flex;align-items:center;gap:var(--gap);padding:var(--pad) var(--gap);
max-width:1200px;margin:0 auto}
.logo{font-weight:bold;font-size:1.35em;color:var(--text);text-decoration:none;white-space:nowrap}
.logo .mark{display:inline-block;width:1.4em;height:1.4em;margin-right:.35em;
vertical-align:-.25em;background:var(--accent);border-radius:var(--radius)}
nav.main{display:flex;gap:var(--gap);flex-wrap:wrap}
nav.main a{color:var(--text);text-decoration:none;padding:4px 2px}
nav.main a:hover,nav.main a.on{color:var(--accent);border-bottom:2px solid var(--accent)}
form.search{display:flex;gap:6px;margin-left:auto}
input,select,textarea{font:inherit;color:var(--text);background:var(--surface);
border:1px solid var(--muted);border-radius:var(--radius);padding:6px 8px}
textarea{width:100%;min-height:6em}
button,.button{font:inherit;background:var(--accent);color:var(--accent-text);border:0;
border-radius:var(--radius);padding:7px 16px;cursor:pointer;text-decoration:none;
display:inline-block}
.button.ghost,button.ghost{background:transparent;color:var(--accent);
border:1px solid var(--accent)}
.hdr-centered .bar{flex-direction:column;gap:8px}
.hdr-centered form.search{margin:0}
.hdr-sidebar header.site{position:fixed;top:0;left:0;bottom:0;width:230px;border-right:1px solid
var(--border);border-bottom:0;overflow:auto}
.hdr-sidebar .bar{flex-direction:column;align-items:stretch}
.hdr-sidebar nav.main{flex-direction:column;gap:4px}
.hdr-sidebar .logo{white-space:normal}
.hdr-sidebar form.search{margin:0;flex-direction:column}
.hdr-sidebar main,.hdr-sidebar footer.site{margin-left:230px}
main{padding:var(--gap) 0 calc(var(--gap)*3)}
.hero{background:var(--accent);color:var(--accent-text);border-radius:var(--radius);
padding:calc(var(--pad)*3) calc(var(--gap)*2);margin-bottom:var(--gap)}
.hero h1{margin-top:0}.hero p{margin:0 0 1em;font-size:1.1em}
.hero .button{background:var(--accent-text);color:var(--accent)}
.cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(210px,1fr));gap:var(--gap)}
.card{background:var(--surface);border:1px solid var(--border);border-radius:var(--radius);
padding:var(--pad);display:flex;flex-direction:column;gap:4px}
.card .thumb,.row .thumb{height:90px;border-radius:var(--radius);color:#fff;font-size:2em;
display:flex;align-items:center;justify-content:center;font-weight:bold}
.card a.name,.row a.name{font-weight:bold;text-decoration:none}
.muted{color:var(--muted)}.value{font-weight:bold;font-size:1.1em}
.rows{display:flex;flex-direction:column;gap:var(--pad)}
.row{display:flex;gap:var(--gap);background:var(--surface);border:1px solid var(--border);
border-radius:var(--radius);padding:var(--pad);align-items:center}
.row .thumb{width:90px;height:70px;flex:none}
.row .info{flex:1;display:flex;flex-direction:column;gap:2px}
table.items,table.facts,table.cart{width:100%;border-collapse:collapse;background:var(--surface)}
table.items th,table.items td,table.facts th,table.facts td,table.cart th,table.cart td{
text-align:left;padding:var(--pad);border-bottom:1px solid var(--border);vertical-align:top}
table.facts th{width:30%;color:var(--muted);font-weight:normal}
.layout{display:flex;gap:calc(var(--gap)*1.5);align-items:flex-start}
.layout aside{flex:none;width:230px;background:var(--surface);border:1px solid var(--border);
border-radius:var(--radius);padding:var(--pad)}
.layout .results{flex:1;min-width:0}
form.filters label{display:block;margin:6px 0 2px;color:var(--muted);font-size:.9em}
form.filters input,form.filters select{width:100%}
.filters-top .layout{flex-direction:column;align-items:stretch}
.filters-top .layout aside{width:auto}
.filters-top form.filters{display:flex;flex-wrap:wrap;gap:var(--gap);align-items:flex-end}
.filters-top form.filters div{min-width:140px}
.toolbar{display:flex;justify-content:space-between;align-items:center;margin-bottom:var(--pad)}
.pages{display:flex;gap:6px;margin-top:var(--gap);flex-wrap:wrap}
.pages a,.pages span{padding:4px 10px;border:1px solid var(--border);border-radius:var(--radius);
text-decoration:none;background:var(--surface)}
.pages span.on{background:var(--accent);color:var(--accent-text)}
.detail{display:flex;gap:calc(var(--gap)*2);align-items:flex-start}
.detail .thumb{width:320px;height:220px;flex:none;border-radius:var(--radius);color:#fff;
font-size:4em;display:flex;align-items:center;justify-content:center;font-weight:bold}
.detail .facts-col{flex:1}
.panel{background:var(--surface);border:1px solid var(--border);border-radius:var(--radius);
padding:calc(var(--pad)*2)}
.field{margin-bottom:calc(var(--pad)*1.5)}
.field label{display:block;font-weight:bold;margin-bottom:3px}
.field .hint{color:var(--muted);font-size:.9em}
.field input,.field select{min-width:320px}
.field.invalid input,.field.invalid select,.field.invalid textarea{border:2px solid #c62828}
.error{color:#c62828;font-weight:bold;margin:2px 0}
.error-summary{border:3px solid #c62828;padding:var(--pad) var(--gap);margin-bottom:var(--gap);
background:var(--surface)}
.notice{border-left:6px solid var(--accent);background:var(--surface);padding:var(--gap)}
.reference{font-size:1.5em;font-weight:bold;letter-spacing:.05em}
footer.site{border-top:1px solid var(--border);background:var(--surface);padding:var(--gap) 0;
color:var(--muted);font-size:.9em}
#cookie-banner{position:fixed;left:0;right:0;bottom:0;z-index:50;background:#1d1d1f;color:#f5f5f7;
padding:22px 32px;display:flex;gap:24px;align-items:center;min-height:150px;
box-shadow:0 -4px 16px rgba(0,0,0,.3)}
#cookie-banner p{flex:1;margin:0;font-size:15px}
#cookie-banner button{background:#f5f5f7;color:#1d1d1f}
#newsletter{position:fixed;inset:0;z-index:60;background:rgba(0,0,0,.55);display:flex;
align-items:center;justify-content:center}
#newsletter .modal{background:var(--surface);color:var(--text);padding:32px;width:460px;
border-radius:var(--radius);position:relative}
#newsletter .close{position:absolute;top:8px;right:8px;background:transparent;color:var(--text);
font-size:1.4em;padding:2px 10px}
"""


def stylesheet(theme: Theme) -> str:
    """The complete CSS of a site: its variables, then the shared rules."""
    pad, gap = _SPACING[theme.density]
    variables = (
        f":root{{--bg:{theme.background};--surface:{theme.surface};--accent:{theme.accent};"
        f"--accent-text:{theme.accent_text};--text:{theme.text};--muted:{theme.muted};"
        f"--border:{theme.border};--font:{FONTS[theme.font]};--size:{theme.font_size}px;"
        f"--radius:{theme.radius}px;--pad:{pad}px;--gap:{gap}px}}"
    )
    return variables + _BASE_CSS
