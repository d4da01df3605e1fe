"""The layers an import traces (models/import/traced_layers.py), on transformers' own
config classes at their real depths: which layers each pattern traces, and that the
truncated config renumbers what transformers reads by layer number (Llama 4's
moe_layers, DeepSeek's first_k_dense_replace, Gemma 4's per-layer overrides) so each
traced layer keeps its kind. Builds no model.

    python3 test_traced_layers.py
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "models", "import"))

from expectations import Expectations  # noqa: E402
from traced_layers import layer_kinds, layer_selections, truncated  # noqa: E402


def config(model_type, **fields):
    import transformers

    return transformers.AutoConfig.for_model(model_type, **fields)


def main():
    checks = Expectations()
    expect = checks.expect

    # A period of ten (Granite 4: an attention layer after nine Mamba-2 layers): the first
    # two of each kind are fewer layers than the period plus one.
    granite = ["attention" if k % 10 == 5 else "mamba" for k in range(40)]
    expect(layer_selections(granite)[0], [0, 1, 5, 15], "Granite 4's layers")
    # Sliding and full layers alternating (Gemma 2): the period plus one, three layers.
    expect(layer_selections(["sliding", "full"] * 13)[0], [0, 1, 2], "alternating layers")
    # One kind: two layers.
    expect(layer_selections(["decoder"] * 32)[0], [0, 1], "one kind")

    # Llama 4 Scout: NoPE every fourth layer. Layers 0, 1, 3 and 7 traced as a model of
    # four; each keeps its kind once moe_layers is renumbered.
    scout = config("llama4_text", num_hidden_layers=8, interleave_moe_layer_step=2)
    kinds, keys = layer_kinds(scout)
    small = truncated(scout, [0, 1, 3, 7], keys)
    expect(small.moe_layers, [n for n, k in enumerate([0, 1, 3, 7]) if k in scout.moe_layers],
           "Llama 4's moe_layers renumbered")
    expect(layer_kinds(small)[0], [kinds[k] for k in [0, 1, 3, 7]], "Llama 4's kinds kept")

    # DeepSeek-V3: the first three layers dense. Layers 0, 1, 3 and 4: two dense, two MoE.
    deepseek = config("deepseek_v3", num_hidden_layers=8, first_k_dense_replace=3)
    kinds, keys = layer_kinds(deepseek)
    small = truncated(deepseek, [0, 1, 3, 4], keys)
    expect(small.first_k_dense_replace, 2, "first_k_dense_replace renumbered")
    expect(layer_kinds(small)[0], [kinds[k] for k in [0, 1, 3, 4]], "DeepSeek's kinds kept")

    # Gemma 4: the full layers (every sixth) have head_dim 512 through per_layer_config,
    # and the last layer of each type stores its K/V (kv_sharing_modes, derived).
    gemma = config("gemma4_text", num_hidden_layers=12)
    kinds, keys = layer_kinds(gemma)
    expect(sorted(set(kinds)), ["full_attention/kv_sharing_modes=None/per_layer_config=head_dim:512",
                                "full_attention/kv_sharing_modes=store/per_layer_config=head_dim:512",
                                "sliding_attention/kv_sharing_modes=None",
                                "sliding_attention/kv_sharing_modes=store"], "Gemma 4's kinds")
    layers = layer_selections(kinds)[0]
    expect(layers, [0, 1, 5, 10, 11], "Gemma 4's layers")
    small = truncated(gemma, layers, keys)
    expect(small.per_layer_config[2].head_dim, 512, "per_layer_config renumbered")
    expect(layer_kinds(small)[0], [kinds[k] for k in layers], "Gemma 4's kinds kept")

    check_layer_writes(expect)
    check_vision_language_configs(expect)
    check_images(expect)
    check_kernel_paths(expect)
    return checks.report()


def check_kernel_paths(expect):
    """kernel_paths: the kernel fallbacks a traced step calls are named, and only those
    (Qwen3-Next's gated delta rule falls back from fla); the modules and configs whose
    GPU kernels no import sees get their line (gpt-oss's sinks and MXFP4 experts,
    DeepSeek's MLA), a Llama none."""
    import torch

    import transformers
    from kernel_paths import kernel_assumptions, kernel_packages_bound

    def meta(model_type, **fields):
        cfg = config(model_type, num_hidden_layers=2, **fields)
        with torch.device("meta"):
            return transformers.AutoModelForCausalLM.from_config(cfg), cfg

    qwen, qwen_cfg = meta("qwen3_next")
    module = sys.modules[type(qwen.model.layers[0].linear_attn).__module__]
    original = module.torch_chunk_gated_delta_rule
    with kernel_packages_bound(qwen, set()) as called:
        expect(module.torch_chunk_gated_delta_rule is not original, True, "the fallback shimmed")
        try:
            module.torch_chunk_gated_delta_rule()  # the original refuses no arguments
        except TypeError:
            pass
    expect(module.torch_chunk_gated_delta_rule is original, True, "the fallback restored")
    expect(sorted(called), [("torch_chunk_gated_delta_rule", "chunk_gated_delta_rule", "fla")],
           "the fallback called, and only it")
    lines = kernel_assumptions(qwen, qwen_cfg, called, {})
    expect(len(lines) == 1 and "fla's chunk_gated_delta_rule" in lines[0]
           and lines[0].endswith("planned with --kernels fla"), True, str(lines))
    gpt_oss = meta("gpt_oss", quantization_config={"quant_method": "mxfp4"})
    lines = kernel_assumptions(*gpt_oss, set(), {})
    expect([("sinks" in lines[0]), ("MXFP4" in lines[1])], [True, True], str(lines))
    lines = kernel_assumptions(*meta("deepseek_v3"), set(), {})
    expect(len(lines) == 1 and "latent attention" in lines[0], True, str(lines))
    expect(kernel_assumptions(*meta("llama"), set(), {}), [], "a Llama assumes no kernel path")


def check_images(expect):
    """image_inputs: the multimodal Gemma 3 plans with images and its decoder layers come
    from its text_config; without images, images on a text model and images on another
    VLM are each refused in one line; the tokens counted per image are Gemma3Processor's."""
    from image_inputs import check_images as checked, image_tokens
    from traced_layers import text_config_of, with_text_config

    gemma3 = config("gemma3", text_config={"num_hidden_layers": 34}, mm_tokens_per_image=256)
    expect(image_tokens(gemma3, 2), 2 * (256 + 4), "two images' tokens in the sequence")
    expect(text_config_of(gemma3).num_hidden_layers, 34, "Gemma 3's layers from text_config")
    text = text_config_of(gemma3)
    small = with_text_config(gemma3, truncated(text, [0, 5], layer_kinds(text)[1]))
    expect((small.text_config.num_hidden_layers, gemma3.text_config.num_hidden_layers),
           (2, 34), "a truncated copy leaves the config as it was")
    expect(small.text_config.layer_types, ["sliding_attention", "full_attention"],
           "the truncated text_config's layer types")
    expect(text_config_of(config("llama")).model_type, "llama", "a text model is its own")
    for cfg, images, refusal in ((gemma3, 0, "without images"),
                                 (config("llama"), 1, "no vision tower"),
                                 (config("qwen3_5"), 1, "multimodal Gemma 3 only")):
        try:
            checked(cfg, images)
            message = ""
        except SystemExit as e:
            message = str(e)
        expect(refusal in message, True, f"{cfg.model_type} with {images} images: {message}")
    checked(gemma3, 1)  # planned: no refusal


def check_vision_language_configs(expect):
    """headroom_import's causal_lm_config: Qwen3.5's multimodal config plans its text model
    (AutoModelForCausalLM builds Qwen3_5ForCausalLM on the text_config); Qwen3-VL, which
    only AutoModelForImageTextToText builds, is refused in one line; Mistral 3's names the
    text_config's type, which AutoModelForCausalLM builds."""
    from headroom_import import causal_lm_config

    expect(causal_lm_config(config("qwen3_5")).model_type, "qwen3_5_text",
           "Qwen3.5 plans its text model")
    for model_type, hint in (("qwen3_vl", None), ("mistral3", "'mistral'")):
        try:
            causal_lm_config(config(model_type))
            refused = ""
        except SystemExit as e:
            refused = str(e)
        expect("vision-language model" in refused, True, f"{model_type} refused: {refused}")
        expect(hint in refused if hint else "text_config" not in refused, True,
               f"{model_type}'s hint: {refused}")


def check_layer_writes(expect):
    """trace_step's layer hooks name the mapping or list argument a layer writes into and
    the tensors it wrote (Gemma 4 stores K/V in its KVSharingDict), and nothing for a
    layer that only reads one: graph_lift writes the first's as `kept_by_arguments`."""
    import types

    import torch
    from transformers.cache_utils import KVSharingDict

    from trace_step import layer_io_hooks

    class Layer(torch.nn.Module):
        def forward(self, hidden, shared, store):
            if store:
                shared["full_attention"] = (hidden * 2, hidden * 3)
            return hidden + sum(t.sum() for pair in shared.values() for t in pair)

    class AnyTensor:  # the recorder's tensor index, by identity
        def __getitem__(self, t):
            return types.SimpleNamespace(index=id(t))

    recorder = types.SimpleNamespace(by_object=AnyTensor(), layer_io=[[None, None], [None, None]],
                                     layer_writes=[None, None])
    layers = [Layer(), Layer()]
    hooks = [h for k, layer in enumerate(layers) for h in layer_io_hooks(recorder, k, layer)]
    shared = KVSharingDict()
    hidden = layers[0](torch.ones(2, 3), shared=shared, store=True)
    layers[1](hidden, shared=shared, store=False)
    for h in hooks:
        h.remove()
    stored = [id(t) for t in shared["full_attention"]]
    expect(recorder.layer_writes, [("shared (a KVSharingDict)", stored), None],
           "the layer that writes, and the tensors it wrote")


if __name__ == "__main__":
    sys.exit(main())
