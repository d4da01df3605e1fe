"""The paths an import assumes where a GPU install may run other kernels than PyTorch's.

transformers calls a package's kernel where that package imports, else its own reference
PyTorch code (integrations/hub_kernels.py, `use_kernel_func_from_hub_with_fallback`:
fla's chunk_gated_delta_rule, mamba_ssm's mamba_split_conv1d_scan_combined,
causal_conv1d). What the trace runs must not depend on what the importing machine has
installed, so the import binds each such function itself (`kernel_packages_bound`): to
the package's kernel for the packages a plan names (`--kernels fla`), else to the
reference code. A Triton package then runs its own Python on fake CUDA, its launches
skipped (triton_on_fake_cuda.py).

The graph file says which path it planned (`assumptions`, one line each), and the plan
prints the lines: the functions the traced step called, and attention sinks (gpt-oss),
multi-head latent attention (DeepSeek), MXFP4 experts.
"""

import contextlib
import importlib
import inspect
import os
import sys

# The packages whose kernels a plan may name, with the distribution that installs them.
KERNEL_PACKAGES = {"fla": "flash-linear-attention"}


def _fallbacks(module):
    """{global name: (func_name, package, reference function)} of the kernel fallbacks in
    `module` (the wrapper's closure: hub_kernels.py, `wrapped`)."""
    found = {}
    for name, f in vars(module).items():
        if not inspect.isfunction(f):
            continue
        closure = dict(zip(f.__code__.co_freevars,
                           (c.cell_contents for c in f.__closure__ or ())))
        if {"package", "func_name", "torch_function"} <= closure.keys():
            found[name] = (closure["func_name"], closure["package"], closure["torch_function"])
    return found


def _package_kernel(func_name, package):
    """The package's function, resolved as hub_kernels.py does (its internal path mapping,
    `_KERNELS_INTERNAL_PATH_MAPPINGS`), called with the keyword arguments it takes."""
    from transformers.integrations import hub_kernels

    internal = hub_kernels._KERNELS_INTERNAL_PATH_MAPPINGS.get(func_name)
    module = importlib.import_module(f"{package}.{internal}" if internal else package)
    kernel = getattr(module, func_name)
    accepted = tuple(inspect.signature(kernel).parameters)

    def call(*args, **kwargs):
        return kernel(*args, **{k: v for k, v in kwargs.items() if k in accepted})

    return call


def kernels_path():
    """Where the kernel packages are looked for after the user's environment:
    $HEADROOM_KERNELS_PATH, else the folder scripts/setup.sh --torch installs the pinned
    ones into, outside site-packages so that no other trace sees them."""
    data = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local",
                                                           "share")
    return os.environ.get("HEADROOM_KERNELS_PATH") or os.path.join(data, "headroom",
                                                                   "kernel-packages")


def import_kernel_packages(packages, sm):
    """Makes `packages` importable for a trace on fake CUDA at capability class `sm`: the
    Triton driver answered first (fla reads the device at import), then the packages from
    the user's environment or, after it, kernels_path(). Returns {package: version}; exits
    naming what is missing."""
    import importlib.metadata

    import triton_on_fake_cuda

    triton_on_fake_cuda.install(sm)
    if kernels_path() not in sys.path:
        sys.path.append(kernels_path())
    versions = {}
    for package in packages:
        if package not in KERNEL_PACKAGES:
            raise SystemExit(f"--kernels {package}: the kernel packages planned are "
                             f"{', '.join(sorted(KERNEL_PACKAGES))}")
        try:
            importlib.import_module(package)
            versions[package] = importlib.metadata.version(KERNEL_PACKAGES[package])
        except ImportError as e:
            raise SystemExit(f"--kernels {package}: {KERNEL_PACKAGES[package]} does not import "
                             f"({e}); install it where the import runs (scripts/setup.sh "
                             f"--torch installs it in {kernels_path()})") from None
    return versions


@contextlib.contextmanager
def kernel_packages_bound(model, packages):
    """Binds the kernel fallbacks of the modules that define `model`'s classes to the
    kernels of `packages` (import_kernel_packages first), the others to their reference
    code, while the context runs; yields the set of (function, func_name, package) called."""
    called = set()
    modules = {sys.modules[type(m).__module__] for m in model.modules()
               if type(m).__module__ in sys.modules}
    originals = []
    for module in modules:
        for name, (func_name, package, reference) in _fallbacks(module).items():
            chosen = _package_kernel(func_name, package) if package in packages else reference

            def shim(*args, _chosen=chosen, _key=(name, func_name, package), **kwargs):
                called.add(_key)
                return _chosen(*args, **kwargs)

            originals.append((module, name, vars(module)[name]))
            setattr(module, name, shim)
    try:
        yield called
    finally:
        for module, name, original in originals:
            setattr(module, name, original)


def kernel_assumptions(model, config, called, versions):
    """Lines for the fallbacks `called`, the modules of `model` and `config`; `versions`,
    {package: version}, of the kernel packages bound."""
    import torch

    lines = []
    for name, func_name, package in sorted(called):
        if package in versions:
            lines.append(f"{name}: {KERNEL_PACKAGES[package]} {versions[package]}'s "
                         f"{func_name} (--kernels {package}), its allocations recorded from "
                         f"its own Python on fake CUDA, the Triton launches skipped: neither "
                         f"the kernels' time nor the autotuning of their first call on each "
                         f"shape is modelled")
        else:
            instead = (f"planned with --kernels {package}" if package in KERNEL_PACKAGES
                       else "not modelled")
            lines.append(f"{name}: transformers' reference PyTorch code, as it runs where the "
                         f"{package} package does not import; {package}'s {func_name} kernel, "
                         f"which a GPU install may run instead, is {instead}")
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
        # quantizers/quantizer_mxfp4.py: the quantizer is not trainable (is_trainable
        # False; the Trainer's validate_quantization_for_training refuses it), so training
        # loads the experts dequantized to bf16 (Mxfp4Config(dequantize=True)).
        lines.append("MXFP4 experts planned dequantized to bf16, as from_pretrained loads "
                     "them for training (Mxfp4Config(dequantize=True)): transformers' MXFP4 "
                     "quantizer trains nothing (is_trainable is False)")
    return lines
