"""report.html in a real browser (issue "Reports people look at").

Each test makes a report with the built tool, opens it in Debian's headless
Chromium through tests/browser/check_report.mjs (playwright-core with the
system browser) and compares what the page shows with profile.json, which
the test reads itself: the verdict, the charts drawn, a flame-graph zoom,
table sorting, no console error, no network request. A hostile script checks
that module, function and file names are only ever text.

These tests never skip: without chromium, node or tests/browser/node_modules
they fail and say how to install them (`make test` does).
"""

import json
import os
import shutil
import subprocess
import textwrap

import pytest

from conftest import ROOT, TOOL, load_profile, run_tool

BROWSER_DIR = os.path.join(ROOT, "tests", "browser")
CHROMIUM = os.environ.get("TORCHNECK_CHROMIUM", "/usr/bin/chromium")
V100 = os.path.join(ROOT, "..", "shared", "fixtures", "kineto", "v100_resnet50_num_workers_0.trace.json.gz")


def open_in_browser(report, shots_dir, search=None):
    """Runs the browser driver on REPORT; returns its observations."""
    node = shutil.which("node")
    assert node, "node is missing: scripts/ensure-deps.sh installs nodejs (make test runs it)"
    version = subprocess.run([node, "--version"], capture_output=True, text=True).stdout.strip()
    assert int(version.lstrip("v").split(".")[0]) >= 20, f"node {version}: playwright-core 1.64 needs Node.js 20 or later"
    assert os.path.exists(CHROMIUM), f"no Chromium at {CHROMIUM}: scripts/ensure-deps.sh installs Debian's chromium"
    assert os.path.isdir(os.path.join(BROWSER_DIR, "node_modules", "playwright-core")), \
        "tests/browser/node_modules is missing: run `npm ci` in tests/browser (make test does)"
    os.makedirs(shots_dir, exist_ok=True)
    cmd = [node, os.path.join(BROWSER_DIR, "check_report.mjs"), report, shots_dir, "--chromium", CHROMIUM]
    if search:
        cmd += ["--search", search]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, f"browser driver failed:\n{r.stderr[-3000:]}"
    return json.loads(r.stdout)


def assert_clean_page(obs):
    assert obs["consoleErrors"] == [], obs["consoleErrors"]
    assert obs["pageErrors"] == [], obs["pageErrors"]
    assert obs["dialogs"] == [], obs["dialogs"]
    # The page is one file: nothing else is fetched, from the network or disk.
    assert obs["requests"] == [], obs["requests"]
    for shot in obs["screenshots"]:
        assert os.path.getsize(shot) > 1000, shot


def assert_sorting_works(obs, tables):
    seen = {s["table"] for s in obs["sorts"]}
    assert set(tables) <= seen, (tables, seen)
    for s in obs["sorts"]:
        values = [v for v in s["values"] if v is not None]
        assert len(values) == s["rows"], s  # every numeric cell carries its value
        want = sorted(values, reverse=(s["direction"] == "descending"))
        assert values == want, f"{s['table']}.{s['column']} click {s['click']} not sorted {s['direction']}"
    # A second click on the same header reverses the order.
    by_col = {}
    for s in obs["sorts"]:
        by_col.setdefault((s["table"], s["column"]), []).append(s["direction"])
    for dirs in by_col.values():
        assert sorted(dirs) == ["ascending", "descending"], dirs


@pytest.fixture(scope="module")
def heavy(tmp_path_factory):
    base = tmp_path_factory.mktemp("heavy")
    out = str(base / "out")
    r = run_tool(["-o", out, os.path.join(ROOT, "examples", "heavy_linear.py"), "--steps", "30"])
    assert r.returncode == 0, r.stderr
    return r, out, load_profile(out), open_in_browser(os.path.join(out, "report.html"), str(base / "shots"))


def test_report_html_is_listed_with_how_to_open_it(heavy):
    r, out, _, _ = heavy
    files = r.stderr[r.stderr.rindex("Files"):]
    line = [l for l in files.splitlines() if "report.html" in l]
    assert len(line) == 1 and os.path.join(out, "report.html") in line[0] and "browser" in line[0], files
    assert os.path.getsize(os.path.join(out, "report.html")) > 0


def test_example_report_loads_clean_and_shows_the_verdict(heavy):
    _, _, profile, obs = heavy
    assert_clean_page(obs)
    assert profile["verdict"], "the example should have a verdict"
    assert obs["verdict"] == profile["verdict"]
    assert len(obs["findingCards"]) == len(profile["findings"])
    for card, f in zip(obs["findingCards"], profile["findings"]):
        assert f["title"] in card and f["recommendation"] in card
        for e in f["evidence"]:
            assert e in card


def test_every_chart_has_rendered_content(heavy):
    _, _, profile, obs = heavy
    charts = {c["id"]: c for c in obs["charts"]}
    assert {"chart-steps", "chart-layers", "chart-flame"} <= set(charts)
    assert not obs["nvmlSectionVisible"]  # no NVML on a CPU-only machine: no GPU section
    for c in charts.values():
        assert c["empty"] is None, c
        assert c["width"] > 0 and c["height"] > 0 and c["drawn"] > 0, c
    # One bar per step (each with at least one segment), and the top layers by name.
    assert charts["chart-steps"]["drawn"] >= len(profile["steps"]["per_step"])
    top = max((l for l in profile["layers"] if l["depth"] > 0), key=lambda l: l["forward_ms"] + l["backward_ms"])
    assert any(t.startswith(top["name"] + " (" + top["type"] + ")") for t in obs["layerTitles"])


def test_flame_click_zooms_and_search_marks(heavy):
    _, _, _, obs = heavy
    fl = obs["flame"]
    assert fl["frames"] > 3 and "clicked" in fl, fl
    assert fl["clicked"]["width"] < 0.8 * fl["bodyWidth"]
    assert fl["afterWidth"] >= fl["bodyWidth"] - 4, fl      # the clicked frame spans the graph
    assert fl["rootIsAncestor"]
    assert abs(fl["afterResetWidth"] - fl["clicked"]["width"]) < 2, fl  # a click on the root zooms back out
    assert fl["matches"] and all(fl["search"].lower() in m.lower() for m in fl["matches"]), fl
    assert "match" in fl["searchStatus"]


def test_tables_sort(heavy):
    _, _, _, obs = heavy
    assert_sorting_works(obs, ["table-ops", "table-python", "table-layers", "table-steps"])


def test_analyze_report_has_the_gpu_section(tmp_path):
    out = str(tmp_path / "out")
    r = subprocess.run([TOOL, "analyze", "-o", out, V100], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    profile = load_profile(out)
    obs = open_in_browser(os.path.join(out, "report.html"), str(tmp_path / "shots"))
    assert_clean_page(obs)
    assert obs["verdict"] == profile["verdict"]
    assert obs["gpuSectionVisible"]
    charts = {c["id"]: c for c in obs["charts"]}
    for cid in ("chart-gpu-util", "chart-gpu-idle", "chart-gpu-steps", "chart-steps"):
        assert charts[cid]["empty"] is None and charts[cid]["drawn"] > 0, charts[cid]
    g = profile["gpu"]
    tl = g["devices"][0]["util_timeline"]
    assert 2 <= len(tl) <= 2000
    assert all(a[0] <= b[0] for a, b in zip(tl, tl[1:])) and all(0 <= u <= 1 for _, u in tl)
    # Busy time over the timeline matches the GPU's busy share within a bucket's rounding:
    # the timeline spans the whole trace, the utilisation only the steps, so only a loose check.
    assert any(u > 0 for _, u in tl)
    # Every kernel row, with its name as text.
    kernels = obs["tableText"]["table-kernels"]
    for k in g["top_kernels"]:
        assert k["name"] in kernels
    assert_sorting_works(obs, ["table-kernels", "table-ops"])


HOSTILE_CLASS = "<img src=x onerror=alert(1)>"  # no "." either: the layer type is the part after the last "."
HOSTILE_MODULE = "</script><script>self['__pwned']=2</script>"  # no "." (add_module forbids it)
HOSTILE_FUNCTION = "<svg onload=window.__pwned=3>"

EVIL_SCRIPT = textwrap.dedent('''
    import torch

    HOSTILE_CLASS = {cls!r}
    HOSTILE_MODULE = {mod!r}
    HOSTILE_FUNCTION = {fn!r}

    def forward(self, x):
        s = 0
        for i in range(300000):  # pure Python, so the sampler sees this frame
            s += i
        return self.lin(x) + 0 * s

    forward.__code__ = forward.__code__.replace(co_name=HOSTILE_FUNCTION, co_qualname=HOSTILE_FUNCTION)
    Evil = type(HOSTILE_CLASS, (torch.nn.Module,), {{"forward": forward}})

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            evil = Evil()
            evil.lin = torch.nn.Linear(16, 16)
            self.add_module(HOSTILE_MODULE, evil)

        def forward(self, x):
            return getattr(self, HOSTILE_MODULE)(x)

    net = Net()
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    for step in range(12):
        opt.zero_grad()
        net(torch.randn(4, 16)).sum().backward()
        opt.step()
''').format(cls=HOSTILE_CLASS, mod=HOSTILE_MODULE, fn=HOSTILE_FUNCTION)


def test_hostile_names_are_text_and_never_run(tmp_path):
    # A path with "</script>" in it: a folder "evil<" holding a folder "script>".
    folder = tmp_path / "evil<" / "script><img src=x onerror=window.__pwned=4>"
    folder.mkdir(parents=True)
    path = folder / "train.py"
    path.write_text(EVIL_SCRIPT)
    assert "</script>" in str(path)
    out = str(tmp_path / "out")
    r = run_tool(["-o", out, str(path)])
    assert r.returncode == 0, r.stderr
    profile = load_profile(out)
    # The profile holds the hostile names: the page must show them as text.
    layer = [l for l in profile["layers"] if l["type"] == HOSTILE_CLASS]
    assert layer and layer[0]["name"] == HOSTILE_MODULE, profile["layers"]
    assert any(f["function"] == HOSTILE_FUNCTION for f in profile["python"]), "the sampler should see the hostile frame"
    with open(os.path.join(out, "report.html"), encoding="utf-8") as f:
        html = f.read()
    assert "</script><script>window.__pwned" not in html and "<img src=x" not in html

    obs = open_in_browser(os.path.join(out, "report.html"), str(tmp_path / "shots"), search="svg onload")
    assert_clean_page(obs)
    assert obs["pwnedAfterLoad"] is None and obs["pwned"] is None
    assert obs["imgElements"] == 0
    layers_text = obs["tableText"]["table-layers"]
    assert HOSTILE_CLASS in layers_text and HOSTILE_MODULE in layers_text
    assert any(t.startswith(HOSTILE_MODULE + " (" + HOSTILE_CLASS + ")") for t in obs["layerTitles"])
    python_text = obs["tableText"]["table-python"]
    assert HOSTILE_FUNCTION in python_text and str(path) in python_text
    assert str(path) in obs["bodyText"]  # the script path in the header
    assert any(HOSTILE_FUNCTION in m for m in obs["flame"]["matches"]), obs["flame"]


RLO = "\u202e"  # right-to-left override: what follows it reads right to left, to the end of its paragraph
# The page's own words in the header's run line, in the order it writes them.
RUN_LINE_WORDS = ["script", "args", "ended:", "wall"]
# The run line's words outside any <bdi> (the page's own), each with where
# the browser drew it; each <bdi> with its text and its computed unicode-bidi.
RUN_LINE_READER = r"""(() => {
  const line = document.getElementById('run-line');
  const words = [];
  const walker = document.createTreeWalker(line, NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    if (n.parentElement.closest('bdi')) continue;
    for (const m of n.data.matchAll(/[a-z]+:?/g)) {
      const r = document.createRange();
      r.setStart(n, m.index);
      r.setEnd(n, m.index + m[0].length);
      const box = r.getBoundingClientRect();
      words.push({ word: m[0], left: box.left, top: box.top });
    }
  }
  const names = [...line.querySelectorAll('bdi')].map((b) => ({
    text: b.textContent, unicodeBidi: getComputedStyle(b).unicodeBidi,
  }));
  return { words, names, title: document.title };
})()"""


def test_a_right_to_left_override_in_a_name_cannot_reorder_the_header(tmp_path):
    # GIVEN a script in a folder whose name holds U+202E, run with arguments
    # holding it too, and one in Arabic
    folder = tmp_path / (RLO + "folder")
    folder.mkdir()
    path = folder / "train.py"
    path.write_text("import torch\nx = torch.randn(32, 32)\nfor step in range(5):\n    x = torch.tanh(x @ x)\n")
    args = ["--name", RLO + "gnp.exe", "\u0645\u0631\u062d\u0628\u0627"]
    out = str(tmp_path / "out")
    r = run_tool(["-o", out, str(path), *args])
    assert r.returncode == 0, r.stderr[-3000:]
    obs = probe_page(os.path.join(out, "report.html"), RUN_LINE_READER)
    # THEN the page's own words are drawn in the order it writes them, left
    # to right on a line (a line drawn below comes after)
    own = [w for w in obs["words"] if w["word"] in RUN_LINE_WORDS]
    assert [w["word"] for w in own] == RUN_LINE_WORDS, obs["words"]
    for a, b in zip(own, own[1:]):
        assert b["top"] > a["top"] + 2 or (abs(b["top"] - a["top"]) <= 2 and b["left"] > a["left"]), (a, b)
    # AND each name sits in an isolating element, the override shown as
    # \u202e, other text (Arabic) as it is
    visible = [s.replace(RLO, "\\u202e") for s in [str(path), *args]]
    assert [n["text"] for n in obs["names"]] == visible, obs["names"]
    assert {n["unicodeBidi"] for n in obs["names"]} == {"isolate"}, obs["names"]
    assert obs["title"] == "torchneck: " + visible[0]


def embedded_data(report):
    """The JSON the page draws from, read back out of its data block."""
    with open(report, encoding="utf-8") as f:
        html = f.read()
    open_tag = '<script type="application/json" id="torchneck-data">'
    start = html.index(open_tag) + len(open_tag)
    return json.loads(html[start:html.index("</script>", start)])


def test_report_command_rebuilds_report_html(heavy, tmp_path):
    # `./torchneck report DIR` (a report rebuilt from the spill) writes the page too.
    _, out, profile, _ = heavy
    folder = tmp_path / "copy"
    shutil.copytree(out, folder)
    os.remove(folder / "report.html")
    r = subprocess.run([TOOL, "report", str(folder)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    data = embedded_data(folder / "report.html")
    assert data["profile"]["verdict"] == load_profile(str(folder))["verdict"]
    assert data["flame"]["value"] > 0 and data["flame"]["children"]


def with_data(report, profile, flame, path):
    """A copy of REPORT drawing other data: the CSP names the script, not the
    data block, so the page's own script still runs on it."""
    with open(report, encoding="utf-8") as f:
        html = f.read()
    open_tag = '<script type="application/json" id="torchneck-data">'
    start = html.index(open_tag) + len(open_tag)
    end = html.index("</script>", start)
    data = json.dumps({"profile": profile, "flame": flame})
    for a, b in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026")):
        data = data.replace(a, b)
    with open(path, "w", encoding="utf-8") as f:
        f.write(html[:start] + data + html[end:])
    return str(path)


def test_flame_graph_draws_every_kind_of_frame(heavy, tmp_path):
    # The flame tree may hold modules, operators, backward nodes and scopes below the
    # Python frames, and threads above them: each is drawn, coloured by kind.
    _, out, profile, _ = heavy
    def node(name, kind, value, children=(), **kw):
        return {"name": name, "kind": kind, "value": value, "self": value - sum(c["value"] for c in children),
                "children": list(children), **kw}
    tree = node("all", "root", 1000, [
        node("MainThread", "thread", 900, [
            node("train_step", "python", 900, [
                node("Optimizer.step#SGD.step", "scope", 100),
                node("fc (Linear)", "module", 500, [
                    node("aten::mm", "operator", 500, [node("aten::addmm <b>", "operator", 200)])]),
                node("MmBackward0", "backward", 250),
            ], file="train.py", line=7)]),
        node("pt_autograd_0", "thread", 100)], omitted_nodes=0)
    page = with_data(os.path.join(out, "report.html"), profile, tree, tmp_path / "kinds.html")
    obs = open_in_browser(page, str(tmp_path / "shots"), search="aten::")
    assert_clean_page(obs)
    fl = obs["flame"]
    assert fl["frames"] == 9
    kinds = ("root", "thread", "python", "module", "operator", "backward", "scope")
    assert fl["kinds"] == sorted("kind-" + k for k in kinds)
    assert set(fl["legend"]) == set(kinds)
    assert sorted(m.split("  ")[0] for m in fl["matches"]) == ["aten::addmm <b>", "aten::mm"]
    assert "1 outermost matches, 50.0 %" in fl["searchStatus"]


def test_empty_flame_tree_says_no_samples(heavy, tmp_path):
    _, out, profile, _ = heavy
    empty = {"name": "all", "kind": "root", "value": 0, "self": 0, "children": [], "omitted_nodes": 0}
    page = with_data(os.path.join(out, "report.html"), profile, empty, tmp_path / "empty.html")
    obs = open_in_browser(page, str(tmp_path / "shots"))
    assert_clean_page(obs)
    flame = [c for c in obs["charts"] if c["id"] == "chart-flame"][0]
    assert flame["empty"] and "No samples" in flame["empty"]
    assert obs["verdict"] == profile["verdict"]


def test_a_step_longer_than_the_timeline_is_timed_by_its_optimizer_steps(tmp_path):
    # LBFGS whose first optimizer.step fills a timeline of 400 events: the
    # steps line gives the optimizer step's time from its aggregates, and
    # the window's spans apart (tests/python/test_loops.py checks the
    # figure against the script's own clock).
    out = str(tmp_path / "out")
    r = run_tool(["--timeline-events=400", "-o", out,
                  os.path.join(ROOT, "tests", "python", "scripts", "loops", "lbfgs_closure.py"),
                  "--max-iter", "20", "--steps", "6"])
    assert r.returncode == 0, r.stderr
    steps = load_profile(out)["steps"]
    assert steps["count_source"] == "optimizer" and steps["count"] == 6
    obs = open_in_browser(os.path.join(out, "report.html"), str(tmp_path / "shots"))
    assert_clean_page(obs)
    assert "6 steps (from optimizer.step calls over the whole run)" in obs["bodyText"]
    assert "each inside optimizer.step on average" in obs["bodyText"]
    assert "a step on average (every step after warm-up" not in obs["bodyText"]
    # and the steps after the window by the step clocks (steps.whole_run;
    # test_long_run.py checks its figures against the script's own clock)
    w = steps["whole_run"]
    assert w is not None and w["last_step"] == 6, steps
    assert f"steps {w['beyond_first_step'] + 1}..6 after the timeline window, by the step clocks" in obs["bodyText"]


# --- the Ranks section of a distributed job's merged report ------------------

DIST_TRAIN = os.path.join(ROOT, "tests", "python", "scripts", "dist", "ddp_train.py")
# Opens a page, waits for it to be drawn and returns what the expression in
# PAGE_READER evaluates to in it, with the page's own errors and requests.
# Same means as check_report.mjs: playwright-core driving Debian's Chromium.
PAGE_PROBE = r"""
const { chromium } = await import(process.env.PLAYWRIGHT);
const url = process.env.PAGE_URL;
const obs = { errors: [], requests: [] };
const browser = await chromium.launch({ executablePath: process.env.CHROMIUM, headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'] });
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  page.on('console', (m) => { if (m.type() === 'error') obs.errors.push(m.text()); });
  page.on('pageerror', (e) => obs.errors.push(String(e)));
  page.on('dialog', async (d) => { obs.errors.push('dialog: ' + d.message()); await d.dismiss(); });
  page.on('request', (r) => { if (r.url() !== url && !r.url().startsWith('data:')) obs.requests.push(r.url()); });
  await page.goto(url, { waitUntil: 'load' });
  await page.waitForSelector('html[data-rendered="1"]', { timeout: 15000 });
  Object.assign(obs, await page.evaluate(process.env.PAGE_READER));
} finally {
  await browser.close();
}
process.stdout.write(JSON.stringify(obs));
"""
# The Ranks section read back out of the DOM (check_report.mjs sees the
# tables' text and the charts' sizes; this sees each cell's value, each bar
# segment's value and width, and what is highlighted).
RANKS_READER = r"""(() => {
    const q = (sel) => [...document.querySelectorAll(sel)];
    const text = (id) => { const e = document.getElementById(id); return e && !e.hidden ? e.textContent : null; };
    const rows = (id) => q('#' + id + ' tbody tr').map((tr) => ({ cls: tr.className,
      cells: Object.fromEntries([...tr.children].map((td, i) => [q('#' + id + ' th')[i].getAttribute('data-key'),
        { text: td.textContent, v: td.hasAttribute('data-v') ? Number(td.getAttribute('data-v')) : null }])) }));
    return {
      visible: !document.getElementById('s-ranks').hidden,
      toc: q('nav#toc a').map((a) => a.textContent),
      failure: text('ranks-failure'), line: text('ranks-line'), collectivesLine: text('collectives-line'),
      notes: q('#ranks-notes li').map((li) => li.textContent),
      rankRows: rows('table-ranks'), collectiveRows: rows('table-collectives'),
      collectivesEmpty: (document.querySelector('#table-collectives .empty') || {}).textContent || null,
      bars: q('#chart-ranks g.rank-bar').map((g) => ({
        rank: g.getAttribute('data-rank'), cls: g.getAttribute('class'),
        labels: [...g.querySelectorAll('text')].map((t) => t.textContent),
        segments: [...g.querySelectorAll('rect[data-key]')].map((r) => ({ key: r.getAttribute('data-key'),
          ms: Number(r.getAttribute('data-ms')), x: Number(r.getAttribute('x')), width: Number(r.getAttribute('width')),
          shown: r.getBoundingClientRect().width })),
      })),
      pwned: window.__pwned === undefined ? null : String(window.__pwned),
    };
  })()"""
PARTS = ["data_ms", "compute_ms", "collective_wait_ms", "collective_transfer_ms"]


def probe_page(report, reader):
    """What READER (a JavaScript expression) reads from REPORT's page once
    drawn; the page must have made no error and no request."""
    node = shutil.which("node")
    assert node, "node is missing: scripts/ensure-deps.sh installs nodejs (make test runs it)"
    pw = os.path.join(BROWSER_DIR, "node_modules", "playwright-core", "index.mjs")
    assert os.path.exists(pw), "tests/browser/node_modules is missing: run `npm ci` in tests/browser (make test does)"
    env = dict(os.environ, PLAYWRIGHT="file://" + pw, CHROMIUM=CHROMIUM, PAGE_READER=reader,
               PAGE_URL="file://" + os.path.abspath(str(report)))
    r = subprocess.run([node, "--input-type=module", "-e", PAGE_PROBE], env=env, capture_output=True, text=True,
                       timeout=180)
    assert r.returncode == 0, f"page probe failed:\n{r.stderr[-3000:]}"
    obs = json.loads(r.stdout)
    assert obs["errors"] == [] and obs["requests"] == [], obs
    return obs


def probe_ranks(report):
    obs = probe_page(report, RANKS_READER)
    assert obs["pwned"] is None, obs
    return obs


def torchrun_job(base, mode):
    out = str(base / "out")
    r = subprocess.run([TOOL, "torchrun", "-o", out, "--nproc_per_node=2", DIST_TRAIN, "--mode", mode,
                        "--truth", str(base / "truth")], env=dict(os.environ, USE_LIBUV="0"),
                       capture_output=True, text=True, timeout=300)
    return r, out, load_profile(out)


def assert_ranks_view_is_the_profile(obs, profile):
    """Every rank's row, bar and highlight against the job's own profile.json."""
    ranks = profile["ranks"]
    assert obs["visible"] and "Ranks" in obs["toc"]
    named = {f["rank"] for f in profile["findings"] if isinstance(f.get("rank"), int)}
    failed = (profile.get("first_failure") or {}).get("rank")
    # The table: one row per rank, in rank order, each value the profile's.
    assert [row["cells"]["rank"]["v"] for row in obs["rankRows"]] == [r["rank"] for r in ranks]
    for row, r in zip(obs["rankRows"], ranks):
        c = row["cells"]
        assert c["host"]["text"] == r["host"]
        assert c["ended"]["text"] == f"{r['ending'] or 'no profile'} ({r['exit_code']})"
        for key in ["steps", "step_ms", *PARTS, "last_arrival_share", "collectives", "collective_bytes"]:
            assert c[key]["v"] == r[key], (key, c[key], r[key])
        assert c["runqueue_share"]["v"] == r["runqueue_share"]  # None (no data-v) where the profile has null
        assert ("rank-named" in row["cls"]) == (r["rank"] in named), (row, named)
        assert ("rank-failed" in row["cls"]) == (r["rank"] == failed), (row, failed)
    # The bars: one per rank, each segment's width its value on one scale for all.
    assert [int(b["rank"]) for b in obs["bars"]] == [r["rank"] for r in ranks]
    scales = []
    for bar, r in zip(obs["bars"], ranks):
        segs = {s["key"]: s for s in bar["segments"]}
        assert set(segs) == {k for k in PARTS if r[k] > 0}, (bar, r)
        x = None
        for k in PARTS:
            if k not in segs:
                continue
            s = segs[k]
            assert s["ms"] == r[k] and s["shown"] > 0, (k, s, r)
            assert x is None or s["x"] == pytest.approx(x), bar  # stacked in order, no gap
            x = s["x"] + s["width"]
            scales.append(s["width"] / s["ms"])
        assert ("named" in bar["cls"].split()) == (r["rank"] in named), bar
    assert max(scales) == pytest.approx(min(scales), rel=1e-9), scales
    # The collectives table: every name with its numbers; the clock note.
    by_name = profile["collectives"]["by_name"]
    assert [row["cells"]["name"]["text"] for row in obs["collectiveRows"]] == \
        [c["name"] for c in sorted(by_name, key=lambda c: -c["mean_ms"])]
    for row in obs["collectiveRows"]:
        c = next(x for x in by_name if x["name"] == row["cells"]["name"]["text"])
        for key in ("calls", "bytes_per_call", "mean_ms", "wait_ms", "transfer_ms"):
            assert row["cells"][key]["v"] == c[key], (key, row, c)
    assert "clock: " + profile["collectives"]["clock"] in obs["collectivesLine"]
    assert f"{profile['collectives']['matched']} collectives matched" in obs["collectivesLine"]
    assert obs["notes"] == profile["collectives"]["notes"]
    assert (obs["failure"] is None) == (profile.get("first_failure") is None)
    if profile.get("first_failure"):
        assert obs["failure"] == "FAILED: " + profile["first_failure"]["text"]


@pytest.fixture(scope="module")
def slow_loader_job(tmp_path_factory):
    base = tmp_path_factory.mktemp("ranks")
    r, out, profile = torchrun_job(base, "slow_loader")
    assert r.returncode == 0, r.stderr[-3000:]
    return out, profile, base


def test_distributed_report_shows_each_rank(slow_loader_job):
    out, profile, base = slow_loader_job
    obs = probe_ranks(os.path.join(out, "report.html"))
    assert_ranks_view_is_the_profile(obs, profile)
    # Rank 1's DataLoader sleeps: it is the straggler, highlighted, and at a
    # glance its own time (data + compute) is the longer bar part, rank 0's
    # wait for it the longer wait.
    strag = [f for f in profile["findings"] if f["id"] == "straggler"]
    assert strag and strag[0]["rank"] == 1, [f["id"] for f in profile["findings"]]
    highlighted = [int(b["rank"]) for b in obs["bars"] if "named" in b["cls"].split()]
    assert highlighted == [1]
    assert any("straggler (input)" in t for t in obs["bars"][1]["labels"]), obs["bars"][1]
    assert obs["rankRows"][1]["cells"]["named"]["text"] == "straggler (input)"
    width = {int(b["rank"]): {s["key"]: s["width"] for s in b["segments"]} for b in obs["bars"]}
    own = {k: width[k].get("data_ms", 0) + width[k].get("compute_ms", 0) for k in width}
    assert own[1] > own[0] and width[0]["collective_wait_ms"] > width[1].get("collective_wait_ms", 0), width
    assert obs["failure"] is None


def test_distributed_report_loads_clean_and_its_tables_sort(slow_loader_job):
    out, profile, base = slow_loader_job
    obs = open_in_browser(os.path.join(out, "report.html"), str(base / "shots"))
    assert_clean_page(obs)
    assert obs["verdict"] == profile["verdict"]
    charts = {c["id"]: c for c in obs["charts"]}
    assert charts["chart-ranks"]["empty"] is None and charts["chart-ranks"]["drawn"] >= len(profile["ranks"])
    assert_sorting_works(obs, ["table-ranks", "table-collectives"])


def test_crashed_job_report_says_which_rank_failed_first(tmp_path):
    r, out, profile = torchrun_job(tmp_path, "crash")
    assert r.returncode != 0 and profile["first_failure"]["rank"] == 1, r.stderr[-3000:]
    obs = probe_ranks(os.path.join(out, "report.html"))
    assert_ranks_view_is_the_profile(obs, profile)
    assert obs["failure"].startswith("FAILED: rank 1 failed first")
    failed = [row for row in obs["rankRows"] if "rank-failed" in row["cls"]]
    assert [row["cells"]["rank"]["v"] for row in failed] == [1]
    assert failed[0]["cells"]["ended"]["text"].startswith("exception")
    assert "failed first" in failed[0]["cells"]["named"]["text"]


def test_single_process_report_has_no_ranks_section(heavy):
    _, _, profile, obs = heavy
    assert "ranks" not in profile
    assert "chart-ranks" not in {c["id"] for c in obs["charts"]}  # only a visible section's charts are listed
    assert "table-ranks" not in obs["tableText"] and "table-collectives" not in obs["tableText"]
    assert "Ranks" not in obs["bodyText"].splitlines()


def test_analyze_of_rank_traces_shows_the_ranks(tmp_path):
    # `torchneck analyze FOLDER` of Kineto rank traces: the ranks compared as
    # a live job's (each entry its summary and its GPU report), the same view.
    folder = tmp_path / "ranks"
    folder.mkdir()
    for r in (0, 1):
        name = f"sampled_rank{r}_of128.trace.json.gz"
        os.symlink(os.path.join(os.path.dirname(V100), name), folder / name)
    out = str(tmp_path / "out")
    r = subprocess.run([TOOL, "analyze", "-o", out, str(folder)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    profile = load_profile(out)
    assert len(profile["ranks"]) == 2 and all("step_ms" in x and "gpu" in x for x in profile["ranks"])
    obs = probe_ranks(os.path.join(out, "report.html"))
    assert_ranks_view_is_the_profile(obs, profile)


def test_ranks_view_copes_with_partial_and_hostile_entries(slow_loader_job, tmp_path):
    # What a mixed or damaged ranks[] may hold: a GPU-only entry (analyze's
    # kind), missing and null fields, a non-object, a hostile host name. The
    # page shows what is there, as text, and draws the rest.
    out, profile, _ = slow_loader_job
    hostile = "<img src=x onerror=window.__pwned=5>"
    p = json.loads(json.dumps(profile))
    p["ranks"][0]["host"] = hostile
    p["ranks"][1].update(runqueue_share=None, collective_bytes=None, clock_offset_ns=1500000)
    p["ranks"][0]["gpu"] = {"utilization": 0.25}  # a GPU run's merged ranks carry their GPU report
    del p["ranks"][1]["ending"]
    p["ranks"].append({"rank": 2, "trace": "rank2.trace.json", "utilization": 0.5})
    p["ranks"].append(None)
    p["collectives"] = {"by_name": "not a list"}
    p["first_failure"] = {"rank": 2, "text": "rank 2 failed first: " + hostile}
    page = with_data(os.path.join(out, "report.html"), p, None, tmp_path / "partial.html")
    obs = probe_ranks(page)
    assert obs["visible"]
    rows = obs["rankRows"]
    assert [row["cells"]["rank"]["v"] for row in rows] == [0, 1, 2]
    label = "rank 0 (" + hostile + ")"
    assert rows[0]["cells"]["host"]["text"] == hostile
    assert obs["bars"][0]["labels"][0] == label[:25] + "\u2026"  # the bar's label, truncated, as text
    assert rows[1]["cells"]["ended"]["text"] == "-" and rows[1]["cells"]["runqueue_share"]["text"] == "-"
    assert [row["cells"]["gpu_util"]["text"] for row in rows] == ["25.0", "-", "-"]
    assert [row["cells"]["clock_offset_ms"]["v"] for row in rows] == [0, 1.5, None]
    assert rows[2]["cells"]["step_ms"]["text"] == "-" and rows[2]["cells"]["host"]["text"] == ""
    assert "rank-failed" in rows[2]["cls"] and obs["failure"] == "FAILED: rank 2 failed first: " + hostile
    assert obs["bars"][2]["segments"] == [] and "no steps compared" in obs["bars"][2]["labels"][-1]
    assert obs["collectiveRows"] == [] and obs["collectivesEmpty"]
    # One rank with steps is no comparison: no section.
    p["ranks"] = [profile["ranks"][0], {"rank": 1, "trace": "rank1.trace.json"}]
    obs = probe_ranks(with_data(os.path.join(out, "report.html"), p, None, tmp_path / "one.html"))
    assert not obs["visible"] and "Ranks" not in obs["toc"]
