"""A report's markdown as one self-contained page (headgeom analyze's report.html): each block of the
markdown those reports write becomes its element, figures beside the report are embedded and no
other file is read, every string is escaped."""
import base64
import io
from html.parser import HTMLParser

from PIL import Image

from headgeom.report.html_markdown import markdown_html, write_markdown_html

MARKDOWN = """# headgeom analyze: <run>

- model: release `simsiam`, head `mlp`
- sha256: `abc` (ok: a line
  that wraps)

## rotation

ξ from 0 to 90 (degrees), 12 steps; anchor: **identity** & more.

> a quote

| point | D | spread |
|---|---|---|
| z | 8 | 0.5 [0.4, 0.6] |
| head.3 | 4 | 0.1 \\| 2 |

![rotation orbits](figures/orbits_rotation.png)

![missing](figures/orbits_hue.png)

![outside](../secret.png)

```
<raw> text
```
"""


class Tags(HTMLParser):
    def __init__(self, source):
        super().__init__(convert_charrefs=True)
        self.tags, self.texts = [], []
        self.feed(source)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        if data.strip():
            self.texts.append(data.strip())


def _png() -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (6, 4), "green").save(buf, format="PNG")
    return buf.getvalue()


def test_each_block_becomes_its_element_and_only_figures_beside_the_report_are_embedded(tmp_path):
    png = _png()
    (tmp_path / "figures").mkdir()
    (tmp_path / "figures" / "orbits_rotation.png").write_bytes(png)
    (tmp_path.parent / "secret.png").write_bytes(png)  # outside the report's folder: never read
    body = markdown_html(MARKDOWN, tmp_path)
    parsed = Tags(body)
    names = [t for t, _ in parsed.tags]
    assert names.count("h1") == 1 and names.count("h2") == 1 and names.count("ul") == 1
    assert names.count("li") == 2 and names.count("blockquote") == 1 and names.count("table") == 1
    assert names.count("tr") == 3 and names.count("pre") == 1 and names.count("img") == 1
    assert "<h1>headgeom analyze: &lt;run&gt;</h1>" in body
    assert "<li>sha256: <code>abc</code> (ok: a line that wraps)</li>" in body  # a wrapped item stays one
    assert "anchor: <strong>identity</strong> &amp; more." in body
    assert "<td>0.1 | 2</td>" in body and "<pre>&lt;raw&gt; text</pre>" in body
    (img,) = [a for t, a in parsed.tags if t == "img"]
    assert img["alt"] == "rotation orbits" and base64.b64decode(img["src"].split(",", 1)[1]) == png
    assert "figure figures/orbits_hue.png is not beside the report" in body
    assert "figure ../secret.png is not beside the report" in body


def test_the_page_is_written_atomically_with_its_title(tmp_path):
    path = write_markdown_html(tmp_path / "out" / "report.html", MARKDOWN, "headgeom analyze: <run>")
    page = path.read_text()
    assert page.startswith("<!DOCTYPE html>") and "<title>headgeom analyze: &lt;run&gt;</title>" in page
    assert "Content-Security-Policy" in page and list(path.parent.iterdir()) == [path]  # no temporary left
