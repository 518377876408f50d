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
