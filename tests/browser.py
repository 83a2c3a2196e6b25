"""Render an HTML file in headless Chromium (Debian's package): images, console errors, screenshot."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
]

PROBE = """<script>
window.__errs=[];
window.addEventListener('error',function(e){window.__errs.push(String(e.message||(e.target&&(e.target.src||e.target.href))||'error'))},true);
(function(){var ce=console.error;console.error=function(){window.__errs.push([].slice.call(arguments).join(' '));ce.apply(console,arguments)}})();
window.addEventListener('load',function(){var imgs=[].map.call(document.images,function(i){return i.complete&&i.naturalWidth>0});
var d=document.createElement('pre');d.id='__check';d.textContent=JSON.stringify({imgs:imgs,errs:window.__errs});document.body.appendChild(d)});
</script>"""


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def render(page: Path, screenshot: Path | None = None, timeout: float = 120) -> dict:
    """{'images': [bool per <img>], 'errors': [...]} after load; optionally a PNG screenshot."""
    exe = chromium()
    assert exe, "chromium not installed"
    with tempfile.TemporaryDirectory() as tmp:
        probe = Path(tmp) / "probe.html"
        probe.write_text(page.read_text().replace("<head>", "<head>" + PROBE, 1))
        prof = Path(tmp) / "profile"
        out = subprocess.run(
            [
                exe,
                *FLAGS,
                f"--user-data-dir={prof}",
                "--virtual-time-budget=10000",
                "--enable-logging=stderr",
                "--dump-dom",
                probe.as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        m = re.search(r'<pre id="__check">(.*?)</pre>', out.stdout, re.S)
        assert m, f"page did not finish loading: {out.stderr[-2000:]}"
        result = json.loads(m.group(1).replace("&quot;", '"').replace("&amp;", "&"))
        console = [line for line in out.stderr.splitlines() if "Uncaught" in line or ":ERROR:CONSOLE" in line]
        result["errs"] += console
        if screenshot:
            subprocess.run(
                [
                    exe,
                    *FLAGS,
                    f"--user-data-dir={prof}2",
                    "--window-size=1280,2400",
                    f"--screenshot={screenshot}",
                    page.as_uri(),
                ],
                capture_output=True,
                timeout=timeout,
                check=True,
            )
    return {"images": result["imgs"], "errors": result["errs"]}
