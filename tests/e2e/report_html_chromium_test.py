#!/usr/bin/env python3
"""report.html opened in headless Chromium (Debian's `chromium`).

Runs a small sweep on the engine emulator (`servesweep run`: 2 layouts x 4 concurrency levels,
real agent, engine and load generator processes), rewrites the reports with `servesweep report`,
then has Chromium load report.html from disk: --dump-dom must show every expected plot as an
<svg> with drawn series (a path through >= 2 points, point markers) and no "no data"; the
screenshot must be a real PNG of non-uniform pixels. The screenshot is kept under the build
folder as a test artifact (its path is printed).

Exit 0 pass, 1 fail, 77 skip (no chromium on PATH).
"""
import argparse
import html.parser
import os
import shutil
import struct
import subprocess
import sys
import zlib

MATRIX = """\
name: html-report
engine: sim
model: sim-llama-3.1-8b
sim: {ttft_ms: 20, itl_ms: 8, startup_ms: 100}
workload: {input_len: 128, output_len: 24, num_requests: 32, warmup_requests: 2, seed: 1}
slo: {ttft_ms: 60, tpot_ms: 10}
engine_config: {price: {gpu_hour: 3.5, currency: USD}}
local: {agents: 1, gpus_per_agent: 2}
axes:
  layout: [{tp: 1}, {tp: 2}]
  concurrency: [1, 2, 4, 8]
"""

# Every plot the report must draw for this sweep: the curves, and both signal plots of each of
# its 8 runs.
EXPECTED_PLOTS = ["pareto", "ttft", "e2el", "throughput"] + [
    f"signals-{i}-{kind}" for i in range(8) for kind in ("kv", "requests")
]


class SvgCollector(html.parser.HTMLParser):
    """Per <svg data-plot=...>: its series paths, point markers, marks and texts."""

    def __init__(self):
        super().__init__()
        self.plots = {}
        self.current = None
        self.depth = 0
        self.scripts = 0
        self.in_text = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "script":
            self.scripts += 1
        if tag == "svg" and "data-plot" in a:
            self.current = {"paths": [], "points": 0, "marks": 0, "text": "", "id": a.get("id")}
            self.plots[a["data-plot"]] = self.current
            self.depth = 0
        if self.current is None:
            return
        if tag == "svg":
            self.depth += 1
        cls = a.get("class", "")
        if tag == "path" and cls == "line":
            self.current["paths"].append(a.get("d", ""))
        if tag == "circle" and cls == "point":
            self.current["points"] += 1
        if cls.startswith("mark-"):
            self.current["marks"] += 1
        self.in_text = tag == "text"

    def handle_endtag(self, tag):
        if self.current is not None and tag == "svg":
            self.depth -= 1
            if self.depth == 0:
                self.current = None
        self.in_text = False

    def handle_data(self, data):
        if self.current is not None and self.in_text:
            self.current["text"] += data + " "


def png_pixels(path):
    """(width, height, rows of bytes per pixel tuples): a minimal decoder for 8-bit RGB/RGBA."""
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", body[:10])
            if depth != 8 or colour not in (2, 6):
                raise ValueError(f"unsupported PNG: depth {depth}, colour type {colour}")
            bpp = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows, prev = [], bytearray(stride)
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            left = line[i - bpp] if i >= bpp else 0
            up = prev[i]
            ul = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + left) & 0xFF
            elif f == 2:
                line[i] = (line[i] + up) & 0xFF
            elif f == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif f == 4:
                p = left + up - ul
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - ul)
                pred = left if pa <= pb and pa <= pc else (up if pb <= pc else ul)
                line[i] = (line[i] + pred) & 0xFF
        rows.append(bytes(line))
        prev = line
    return width, height, bpp, rows


def run(cmd, timeout):
    print("+", " ".join(cmd), flush=True)
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=timeout)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--servesweep", required=True)
    parser.add_argument("--work", required=True, help="folder for the sweep and the screenshot")
    args = parser.parse_args()

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        print("SKIP: no chromium on PATH (scripts/install-deps.sh installs Debian's chromium)")
        return 77

    work = os.path.abspath(args.work)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    matrix = os.path.join(work, "html-report.yaml")
    with open(matrix, "w") as f:
        f.write(MATRIX)
    out = os.path.join(work, "out")
    sweep = run([args.servesweep, "run", matrix, "--out", out], timeout=240)
    if sweep.returncode != 0:
        print(sweep.stdout)
        print(f"FAIL: servesweep run exited {sweep.returncode}")
        return 1
    # `report` rewrites it from results.db alone.
    report_html = os.path.join(out, "report.html")
    os.remove(report_html)
    report = run([args.servesweep, "report", out], timeout=60)
    if report.returncode != 0 or not os.path.exists(report_html):
        print(report.stdout)
        print("FAIL: servesweep report did not write report.html")
        return 1

    failures = []
    source = open(report_html, encoding="utf-8").read()
    for needle in ("<script", "http://", "https://", "src="):
        # The only URL allowed is the SVG namespace.
        count = source.count(needle) - (source.count('xmlns="http://www.w3.org/2000/svg"')
                                        if needle == "http://" else 0)
        if count:
            failures.append(f"report.html is not self-contained: {count} x '{needle}'")

    # Chromium's profile and crash folders in the work folder, not $HOME.
    env = dict(os.environ, HOME=work, XDG_CONFIG_HOME=work, XDG_CACHE_HOME=work)
    common = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
              f"--user-data-dir={os.path.join(work, 'chromium-profile')}"]
    url = "file://" + report_html
    print("+ chromium --dump-dom", url, flush=True)
    dom = subprocess.run(common + ["--dump-dom", url], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True, timeout=120, env=env)
    if dom.returncode != 0 or "<svg" not in dom.stdout:
        failures.append(f"chromium --dump-dom exited {dom.returncode} without a rendered page")
    collector = SvgCollector()
    collector.feed(dom.stdout)
    if collector.scripts:
        failures.append(f"the rendered DOM has {collector.scripts} <script> element(s)")
    for plot in EXPECTED_PLOTS:
        p = collector.plots.get(plot)
        if p is None:
            failures.append(f"plot '{plot}' is missing from the rendered DOM")
            continue
        drawn = [d for d in p["paths"] if d.startswith("M") and d.count("L") >= 1]
        if not drawn:
            failures.append(f"plot '{plot}' has no series line through >= 2 points")
        if p["points"] == 0:
            failures.append(f"plot '{plot}' has no point markers")
        if "no data" in p["text"]:
            failures.append(f"plot '{plot}' says no data")
        if p["id"] != "plot-" + plot:
            failures.append(f"plot '{plot}' has id {p['id']!r}, expected 'plot-{plot}'")
    # The sweep's SLO holds at every level, so the throughput plot marks its best SLO points.
    if collector.plots.get("throughput", {}).get("marks", 0) == 0:
        failures.append("the throughput plot marks no best SLO point")
    print(f"rendered plots: {len(collector.plots)} "
          f"({', '.join(sorted(collector.plots))})")

    screenshot = os.path.join(work, "report.png")
    print("+ chromium --screenshot", screenshot, flush=True)
    subprocess.run(common + [f"--screenshot={screenshot}", "--window-size=1400,2400",
                             "--hide-scrollbars", url],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120, env=env)
    if not os.path.exists(screenshot):
        failures.append("chromium wrote no screenshot")
    else:
        size = os.path.getsize(screenshot)
        width, height, bpp, rows = png_pixels(screenshot)
        colours = set()
        for y in range(0, height, 4):
            row = rows[y]
            for x in range(0, width * bpp, bpp * 4):
                colours.add(row[x:x + 3])
        non_white_rows = sum(1 for r in rows if r.count(b"\xff") < len(r) * 0.99)
        print(f"screenshot: {screenshot} ({size} bytes, {width}x{height}, "
              f"{len(colours)} colours sampled, {non_white_rows} rows with ink)")
        if (width, height) != (1400, 2400):
            failures.append(f"screenshot is {width}x{height}, expected 1400x2400")
        if size < 20_000:
            failures.append(f"screenshot is only {size} bytes")
        if len(colours) < 8:
            failures.append(f"screenshot has {len(colours)} colours: a blank or uniform page")
        if non_white_rows < height // 4:
            failures.append(f"screenshot has ink on only {non_white_rows} of {height} rows")

    for f in failures:
        print("FAIL:", f)
    print("artifact:", screenshot)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
