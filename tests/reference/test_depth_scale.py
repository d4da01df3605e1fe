"""A model whose parameters outside its layers follow its depth (Gemma 4's per-layer
inputs), traced at two depths one layer apart and extrapolated to its own
(models/import/depth_scale.py): the extrapolation's rules on hand-made sections, the
layers two toy Gemma 4 trace, and the graph of one, which must equal the one traced at
its whole depth (the same program, every size; one PYTHONHASHSEED, as transformers orders a set of
layer types by hash).

    python3 test_depth_scale.py
"""

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
IMPORTER = os.path.join(HERE, "..", "..", "models", "import")
sys.path.insert(0, IMPORTER)

from cases import TINY_GEMMA4, TINY_GEMMA4_KV_SHARED  # noqa: E402
from depth_scale import extrapolated  # noqa: E402
from expectations import Expectations  # noqa: E402
from step_recorder import UnliftableOp  # noqa: E402


def refusal(shallow, deep, steps=3):
    try:
        extrapolated(shallow, deep, steps)
    except UnliftableOp as e:
        return str(e)
    return None


def check_extrapolation(expect):
    # A shape's dimension and a fit's coefficient grow by their step per layer; powers of
    # b and s, indices and names stay.
    shallow = {"tensors": [{"shape": ["b", "s", 48], "alias_of": ["local", 3]}],
               "ops": [{"flops": {"forward": [[96, 1, 1]], "backward": []},
                        "saved_extra": [[[8, 1, 1, "round_up(s,32)"]]]}]}
    deep = {"tensors": [{"shape": ["b", "s", 56], "alias_of": ["local", 3]}],
            "ops": [{"flops": {"forward": [[112, 1, 1]], "backward": []},
                     "saved_extra": [[[10, 1, 1, "round_up(s,32)"]]]}]}
    expect(extrapolated(shallow, deep, 3),
           {"tensors": [{"shape": ["b", "s", 72], "alias_of": ["local", 3]}],
            "ops": [{"flops": {"forward": [[144, 1, 1]], "backward": []},
                     "saved_extra": [[[14, 1, 1, "round_up(s,32)"]]]}]},
           "sizes carried three layers on")
    expect(refusal({"alias_of": ["local", 3]}, {"alias_of": ["local", 4]}),
           "graph.alias_of[1]: 3 at one depth, 4 at the next", "an index that moves is refused")
    expect(refusal({"flops": [[96, 1, 1]]}, {"flops": [[96, 1, 2]]}),
           "graph.flops[0][2]: 1 at one depth, 2 at the next", "a power of s that moves")
    expect(refusal({"shape": [64]}, {"shape": [32]}),
           "graph.shape[0]: 64 and 32 at two depths extrapolate to -32", "a size that shrinks")
    expect(refusal({"tensors": [1, 2]}, {"tensors": [1, 2, 3]}),
           "graph.tensors: 2 entries at one depth, 3 at the next", "an entry more per layer")


def tiny_gemma4_args(workdir, fields):
    """The importer's arguments for a toy Gemma 4 (cases.py's `fields` over E2B's config),
    and its config as transformers reads it."""
    import headroom_import

    with open(os.path.join(HERE, "configs", "gemma-4-e2b-text.json"), encoding="utf-8") as f:
        config = json.load(f)
    config.update(fields)
    path = os.path.join(workdir, f"config-{len(os.listdir(workdir))}.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(config, f)
    args = headroom_import.parse_args([path, "--out", "unused", "--precision", "bf16",
                                       "--lora-rank", "4", "--lora-targets",
                                       "q_proj,k_proj,v_proj,o_proj", "--min-seq-len", "16",
                                       "--quiet"])
    return args, headroom_import.load_config(path)[1]


def check_kv_shared_depths(expect, workdir):
    """The toy Gemma 4 with KV-shared layers, 12 of them: layers 0-4 and 6 sliding, 5 a
    full layer storing its K/V, 7 the sliding layer storing its K/V, 8-11 reading them
    (the last 4, num_kv_shared_layers). The first two of each kind are traced (the shared
    ones, 8, 9 and 11, are 3 of the 7), then one layer more (2)."""
    import headroom_import
    import traced_layers

    args, config = tiny_gemma4_args(workdir, TINY_GEMMA4_KV_SHARED)
    _, depths, _ = traced_layers.traced_model_config(config, headroom_import.regime_of(args))
    expect([layers for layers, _ in depths], [[0, 1, 5, 7, 8, 9, 11],
                                              [0, 1, 2, 5, 7, 8, 9, 11]],
           "the KV-shared toy's two depths")
    expect(depths[0][1].num_kv_shared_layers, 3, "num_kv_shared_layers renumbered")


def check_tiny_gemma4_graph(expect, workdir):
    """The toy Gemma 4 of 6 layers (5 sliding, the last of them storing its K/V, and a
    full one storing its own), traced at 4 and 5 layers: its graph is the one traced at
    all 6."""
    import headroom_import
    import traced_layers

    args, config = tiny_gemma4_args(workdir, TINY_GEMMA4)
    _, depths, _ = traced_layers.traced_model_config(config, headroom_import.regime_of(args))
    expect([layers for layers, _ in depths], [[0, 1, 4, 5], [0, 1, 2, 4, 5]],
           "the toy's two depths")
    scaled = headroom_import.import_graph(args, lambda line: None)

    original = traced_layers.traced_model_config

    def whole_depth(config, regime):
        kinds, _, count = original(config, regime)
        return kinds, [(list(range(len(kinds))), config)], count

    traced_layers.traced_model_config = whole_depth
    try:
        whole = headroom_import.import_graph(args, lambda line: None)
    finally:
        traced_layers.traced_model_config = original
    expect(json.dumps(scaled, sort_keys=True) == json.dumps(whole, sort_keys=True), True,
           "the toy's graph extrapolated from 4 and 5 layers equals the one traced at 6")


def main():
    if os.environ.get("PYTHONHASHSEED") != "0":
        os.execve(sys.executable, [sys.executable] + sys.argv,
                  {**os.environ, "PYTHONHASHSEED": "0"})
    import tempfile

    checks = Expectations()
    check_extrapolation(checks.expect)
    with tempfile.TemporaryDirectory() as workdir:
        check_kv_shared_depths(checks.expect, workdir)
        check_tiny_gemma4_graph(checks.expect, workdir)
    return checks.report()


if __name__ == "__main__":
    sys.exit(main())
