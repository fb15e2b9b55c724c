"""REPORT.html as a reader sees it: opened in a real browser (Chromium, headless), which says whether the scoreboard
is on top, every figure loads and no link is dead.

    python -m experiments.report_browser [results/REPORT.html]

A copy of the page gets a script that, once the page has loaded, writes what the browser found into the DOM; Chromium
prints the DOM (--dump-dom) and the copy is removed. Links to other files are checked here, against the folder the
page lives in; anchors (#id) by the browser.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from urllib.parse import unquote

CHECK_ID = "edgeflow-report-check"
CHECK_SCRIPT = f"""<script>
window.addEventListener("load", () => {{
  const images = [...document.images];
  const found = {{
    first_heading: (document.querySelector("h2") || {{}}).textContent || null,
    images: images.length,
    broken_images: images.filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.alt || i.src.slice(0, 60)),
    dead_anchors: [...document.querySelectorAll('a[href^="#"]')].map(a => a.getAttribute("href"))
                  .filter(h => !document.getElementById(decodeURIComponent(h.slice(1)))),
    links: [...document.querySelectorAll("a[href]")].map(a => a.getAttribute("href")),
  }};
  const out = document.createElement("pre");
  out.id = "{CHECK_ID}";
  out.textContent = JSON.stringify(found);
  document.body.appendChild(out);
}});
</script>"""


class NoBrowser(RuntimeError):
    """Chromium is not installed (Debian's `chromium`: `make system-deps`)."""


def browser() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    raise NoBrowser("no Chromium on this machine: `make system-deps` installs Debian's chromium")


def open_in_browser(page: Path, timeout_s: float = 60.0) -> dict:
    """What a headless Chromium found on `page` after it loaded: first_heading, images, broken_images, dead_anchors,
    links (every href)."""
    page = Path(page).resolve()
    text = page.read_text()
    # the copy sits beside the page, so that relative links resolve as they do for a reader
    with tempfile.NamedTemporaryFile("w", suffix=".html", dir=page.parent, prefix=".check-", delete=False) as f:
        f.write(text.replace("</body>", CHECK_SCRIPT + "</body>") if "</body>" in text else text + CHECK_SCRIPT)
        copy = Path(f.name)
    try:
        # --no-sandbox: containers and CI runners run as root, where Chromium's sandbox refuses to start
        run = subprocess.run([browser(), "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=5000",
                              "--dump-dom", copy.as_uri()], capture_output=True, text=True, timeout=timeout_s)
    finally:
        copy.unlink(missing_ok=True)
    m = re.search(rf'<pre id="{CHECK_ID}">(.*?)</pre>', run.stdout, re.S)
    if not m:
        raise RuntimeError(f"Chromium did not load {page} (exit {run.returncode}): {run.stderr.strip()[-400:]}")
    import html

    return json.loads(html.unescape(m.group(1)))


def problems(found: dict, page: Path) -> list[str]:
    """What a reader would trip over: the scoreboard not first, a figure that does not load, a dead link."""
    out = []
    if (found.get("first_heading") or "").strip() != "Scoreboard":
        out.append(f"the first section is {found.get('first_heading')!r}, not the scoreboard")
    out += [f"figure does not load: {b}" for b in found["broken_images"]]
    out += [f"dead anchor: {a}" for a in found["dead_anchors"]]
    for href in found["links"]:
        if href.startswith(("#", "http://", "https://", "mailto:", "data:")):
            continue
        target = (Path(page).parent / unquote(href.split("#")[0])).resolve()
        if not target.exists():
            out.append(f"dead link: {href}")
    return out


def main(argv: list[str] | None = None) -> int:
    page = Path((argv or sys.argv[1:] or ["results/REPORT.html"])[0])
    found = open_in_browser(page)
    bad = problems(found, page)
    print(f"{page}: {found['images']} figures, {len(found['links'])} links, first section "
          f"{found['first_heading']!r}" + ("" if not bad else "\n  " + "\n  ".join(bad)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
