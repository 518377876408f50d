"""The layer tree as the model names it: each module called in the run is
listed under the name model.named_modules() gives it, also when containers
that are never called (nn.ModuleDict, nn.ModuleList) stand between it and
its parent, a block's time is inside its model's, and heavy_layer's advice
fits the heavy layer's kind and shape."""

import json

import pytest

from conftest import load_profile, run_tool, script


def test_blocks_held_in_containers_are_named_by_their_path(tmp_path):
    # GIVEN a nanoGPT-style model: blocks in a ModuleList in a ModuleDict
    out, truth_path = tmp_path / "out", tmp_path / "truth.json"
    r = run_tool(["--detail=full", "-o", str(out), script("gpt_layout.py"), "--truth", str(truth_path)])
    assert r.returncode == 0, r.stderr
    truth = json.loads(truth_path.read_text())
    layers = {layer["name"]: layer for layer in load_profile(str(out))["layers"]}
    # THEN every layer is the root (by its class) or one of named_modules()'s
    # names, no root of the same class is numbered, and the blocks, the
    # embeddings and the final norm are there under their paths
    named = set(truth["named_modules"]) - set(truth["containers"])
    assert set(layers) <= named | {truth["root"]}, sorted(set(layers) - named)
    blocks = [n for n in named if n.startswith("transformer.h.") and n.count(".") == 2]
    for name in blocks + ["transformer.wte", "transformer.wpe", "transformer.ln_f", "lm_head"]:
        assert name in layers, f"{name} missing: {sorted(layers)}"
    # AND the model's forward and backward hold its blocks'
    root = layers[truth["root"]]
    for key in ("forward_ms", "backward_ms"):
        inside = sum(layers[b][key] for b in blocks)
        assert root[key] >= inside, f"{key}: the model {root[key]:.2f} ms, its blocks {inside:.2f} ms"


def test_two_roots_of_one_class_are_named_by_what_holds_them(tmp_path):
    # GIVEN a GAN's generator and discriminator, both nn.Sequential, the one
    # held as a trainer's self.netG, the other as a local netD
    out, truth_path = tmp_path / "out", tmp_path / "truth.json"
    r = run_tool(["--detail=full", "-o", str(out), script("gan_roots.py"), "--truth", str(truth_path)])
    assert r.returncode == 0, r.stderr
    truth = json.loads(truth_path.read_text())
    holders = truth["holders"]
    layers = {layer["name"] for layer in load_profile(str(out))["layers"]}
    # THEN each root is named by its holder and its layers under it, as its
    # own named_modules() names them; no class name is numbered (a module
    # without children, the loss, keeps its class's name)
    expected = ({root for root in holders} | {f"{root}.{n}" for root, names in holders.items() for n in names}
                | set(truth["modules_without_children"]))
    assert layers <= expected, sorted(layers - expected)
    assert {"netG", "netD", "netG.0", "netD.0"} <= layers, sorted(layers)


# What heavy_layer must advise for each kind of heavy layer (docs/findings.md):
# a hidden layer made narrower, an output layer fed fewer inputs (its outputs
# are the task's), a vocabulary projection its own advice, a recurrent layer
# a smaller hidden size.
ADVICE = {
    "hidden": "halve mid's width: Linear(64, 2048) -> Linear(64, 1024)",
    "output": "out's 8192 outputs are what the task asks",
    "vocab": "lm_head is the vocabulary projection (8192 outputs, as wte's rows)",
    "lstm": "halve rnn's hidden_size, 256 -> 128",
}


@pytest.mark.parametrize("kind", sorted(ADVICE))
def test_heavy_layer_advice_fits_the_layer(kind, tmp_path):
    # GIVEN a model whose one heavy layer is of KIND, the model the whole step
    out, truth_path = tmp_path / "out", tmp_path / "truth.json"
    r = run_tool(["--detail=full", "-o", str(out), script("heavy_layer_kinds.py"), kind, "--truth", str(truth_path)])
    assert r.returncode == 0, r.stderr
    truth = json.loads(truth_path.read_text())
    found = {f["id"]: f for f in load_profile(str(out))["findings"]}
    # THEN heavy_layer names it, shows its configuration as the script's own
    # module prints it, says whether it is the model's output layer, and
    # advises what fits its kind
    assert "heavy_layer" in found, sorted(found)
    f = found["heavy_layer"]
    assert f"Layer {truth['heavy']} " in f["title"], f["title"]
    [shape] = [e for e in f["evidence"] if e.startswith(truth["heavy"] + ": ") and "(" + truth["config"] + ")" in e]
    assert shape.endswith(", the model's output layer") == (truth["heavy"] == truth["output_layer"]), shape
    assert ADVICE[kind] in f["recommendation"], f["recommendation"]
    # AND its gain is computed from the layer's shape, except where it
    # depends on the data (a vocabulary's token frequencies): an upper bound
    assert f["gain_is_upper_bound"] == (kind == "vocab"), f


def test_a_wait_in_one_call_is_no_heavy_layer(tmp_path):
    # GIVEN four equal Linear layers, one of which waits once (a sleep in a
    # forward pre-hook, as a page fault or a steal lands on whatever layer runs)
    out, truth_path = tmp_path / "out", tmp_path / "truth.json"
    r = run_tool(["--detail=full", "-o", str(out), script("layer_wait.py"), "--truth", str(truth_path)])
    assert r.returncode == 0, r.stderr
    truth = json.loads(truth_path.read_text())
    profile = load_profile(str(out))
    layers = {layer["name"]: layer for layer in profile["layers"]}
    waited = layers[truth["layer"]]
    # premise: by its time alone the waiting layer holds over 40 % of the
    # model, heavy_layer's mark
    model_ms = sum(l["forward_ms"] + l["backward_ms"] for l in layers.values() if l["depth"] == 0)
    assert waited["forward_ms"] + waited["backward_ms"] > 0.4 * model_ms, (waited, model_ms)
    # THEN the wait is found in its calls, as long as the hook's own clock
    # measured it, less the 4 typical calls a stalled call is allowed (its
    # mean call without stalls: at least its median)
    typical_call_ms = (waited["forward_ms"] + waited["backward_ms"] - waited["stalled_ms"]) / waited["calls"]
    assert truth["wait_ms"] - 4 * typical_call_ms - 0.5 <= waited["stalled_ms"], (waited, truth)
    assert waited["stalled_ms"] <= waited["forward_ms"] + waited["backward_ms"], waited
    # AND no layer is named heavy for it: by their work the four are equal
    named = [f["title"] for f in profile["findings"] if f["id"] == "heavy_layer" and f["severity"] != "low"]
    assert not named, named
