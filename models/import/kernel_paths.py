"""The paths an import assumes where a GPU install may run other kernels than the trace.

The trace runs transformers' own PyTorch code on fake tensors: no Triton, no hub
kernels, no quantizer. Where a model's code would take another path on a GPU with those
installed, the graph file says which path it planned (`assumptions`, one line each), and
the plan prints the lines:

* transformers' kernel fallbacks (integrations/hub_kernels.py,
  `use_kernel_func_from_hub_with_fallback`): a function that runs a package's kernel
  (fla's chunk_gated_delta_rule, mamba_ssm's mamba_split_conv1d_scan_combined,
  causal_conv1d) where it imports, else its reference PyTorch code, which the trace ran.
  Only the fallbacks the traced step called are named.
* attention sinks (gpt-oss), multi-head latent attention (DeepSeek), MXFP4 experts.
"""

import contextlib
import inspect
import sys


def _fallbacks(module):
    """{global name: (func_name, package)} of the kernel fallbacks in `module` that run
    their reference code (the wrapper's closure: hub_kernels.py, `wrapped`)."""
    found = {}
    for name, f in vars(module).items():
        if not inspect.isfunction(f):
            continue
        closure = dict(zip(f.__code__.co_freevars,
                           (c.cell_contents for c in f.__closure__ or ())))
        if "package" in closure and "func_name" in closure and \
                closure.get("is_new_implementation") is False:
            found[name] = (closure["func_name"], closure["package"])
    return found


@contextlib.contextmanager
def fallbacks_called(model):
    """Counts the calls of the kernel fallbacks in the modules that define `model`'s
    classes, while the context runs; yields the set of (function, func_name, package)."""
    called = set()
    modules = {sys.modules[type(m).__module__] for m in model.modules()
               if type(m).__module__ in sys.modules}
    originals = []
    for module in modules:
        for name, (func_name, package) in _fallbacks(module).items():
            original = vars(module)[name]

            def shim(*args, _original=original, _key=(name, func_name, package), **kwargs):
                called.add(_key)
                return _original(*args, **kwargs)

            originals.append((module, name, original))
            setattr(module, name, shim)
    try:
        yield called
    finally:
        for module, name, original in originals:
            setattr(module, name, original)


def kernel_assumptions(model, config, called):
    """Lines for the fallbacks `called`, the modules of `model` and `config`."""
    import torch

    lines = [f"{name}: transformers' reference PyTorch code, as it runs where the {package} "
             f"package does not import; {package}'s {func_name} kernel, which a GPU install "
             f"may run instead, is not modelled" for name, func_name, package in sorted(called)]
    classes = {type(m).__name__: m for m in model.modules()}
    for name, module in sorted(classes.items()):
        if isinstance(getattr(module, "sinks", None), torch.nn.Parameter):
            # modeling_gpt_oss.py eager_attention_forward: the sinks join the scores.
            lines.append(f"{name}: attention sinks in transformers' eager attention, the "
                         f"sinks concatenated to the scores; a flash-attention kernel with "
                         f"sinks is not modelled")
        if hasattr(module, "kv_a_proj_with_mqa") and hasattr(module, "kv_b_proj"):
            # modeling_deepseek_v3.py: kv_b_proj decompresses K and V to every head.
            lines.append(f"{name}: multi-head latent attention as transformers runs it, K "
                         f"and V decompressed to full heads (kv_b_proj); an absorbed-MLA "
                         f"kernel is not modelled")
    quantization = getattr(config, "quantization_config", None) or {}
    if not isinstance(quantization, dict):
        quantization = quantization.to_dict()
    if quantization.get("quant_method") == "mxfp4":
        # quantizers/quantizer_mxfp4.py: Mxfp4Config(dequantize=True), and any device
        # without Triton >= 3.4 or compute capability 7.5, load the experts in bf16.
        lines.append("MXFP4 experts planned dequantized to bf16, as from_pretrained loads "
                     "them for training (Mxfp4Config(dequantize=True)); the MXFP4 Triton "
                     "kernels are not modelled")
    return lines
