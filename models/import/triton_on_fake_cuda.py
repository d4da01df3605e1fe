"""Triton kernels on the fake CUDA device: their Python runs, their launches do nothing.

A Triton package (flash-linear-attention) allocates its outputs and scratch in Python,
with torch.empty and friends, then launches kernels that write into them. On fake tensors
those allocations are recorded like any op's; the launches have nothing to compute. So
the package's own code gives its memory, as transformers' gives the model's.

install(sm) answers what such a package asks the driver at import and at each call, as a
GPU of compute capability sm answers (its class: trace_regime.cc, SdpaCapabilityClass):
* Triton's active driver: the target (backend "cuda", the arch) and the device properties
  fla reads (multiprocessor_count, max_shared_mem: fla/utils/hardware.py picks block sizes
  from them, and some block counts size its partial buffers);
* torch.cuda's device name and properties, and the device switch of fla's input_guard
  (torch.cuda.device); the capability is fake_cuda_semantics.patch_device_capability's;
and turns every launch into a no-op: JITFunction.run (a @triton.jit kernel), Heuristics.run
and Autotuner.run (fla's CachedAutotuner calls the latter). Autotuning itself, which on a
GPU benchmarks each config once per shape with its own buffers, therefore never runs: the
plan is of a step after the first.

Call after fake_cuda_device.install() and before the package is imported: fla reads the
device at import time.
"""
import types

import torch

# What a GPU of each capability class reports (CUDA's device properties; the shared
# memory per block opt-in is the figure fla's Backend table compares against).
_DEVICES = {
    90: ("NVIDIA H100 80GB HBM3", 132, 232448, 80),
    86: ("NVIDIA L40S", 142, 101376, 48),
    80: ("NVIDIA A100-SXM4-80GB", 108, 166912, 80),
}

_installed = None


class _Utils:
    def __init__(self, sms, shared):
        self._props = {"multiprocessor_count": sms, "max_shared_mem": shared,
                       "max_num_regs": 65536, "warpSize": 32}

    def get_device_properties(self, device=0):
        return dict(self._props)


class _Driver:
    """The part of triton.backends.driver.GPUDriver a package asks: no device behind it."""

    def __init__(self, sm, sms, shared):
        from triton.backends.compiler import GPUTarget
        self.utils = _Utils(sms, shared)
        self._target = GPUTarget("cuda", sm, 32)

    def get_current_target(self):
        return self._target

    def get_current_device(self):
        return 0

    def get_current_stream(self, device=None):
        return 0

    def get_device_interface(self):
        return torch.cuda

    def is_active(self):
        return True


def _launch_nothing(self, *args, **kwargs):
    return None


def install(sm):
    """Once per process; a second call must ask for the same capability class."""
    global _installed
    if _installed is not None:
        if _installed != sm:
            raise RuntimeError(f"triton_on_fake_cuda: installed for sm{_installed}, not sm{sm}")
        return
    if sm not in _DEVICES:
        raise SystemExit(f"Triton kernels are planned on sm{sorted(_DEVICES)} GPUs, not sm{sm}")
    import triton
    from triton.runtime.autotuner import Autotuner, Heuristics
    from triton.runtime.jit import JITFunction

    name, sms, shared, gib = _DEVICES[sm]
    triton.runtime.driver.set_active(_Driver(sm, sms, shared))
    capability = (sm // 10, sm % 10)
    torch.cuda.get_device_name = lambda device=None: name
    torch.cuda.get_device_properties = lambda device=None: types.SimpleNamespace(
        name=name, major=capability[0], minor=capability[1], multi_processor_count=sms,
        shared_memory_per_block=49152, shared_memory_per_block_optin=shared,
        total_memory=gib * 2**30)
    # torch.cuda.device(i) (fla's input_guard) swaps the current device through the driver.
    torch.cuda._exchange_device = lambda device: 0
    torch.cuda._maybe_exchange_device = lambda device: 0
    JITFunction.run = _launch_nothing
    Heuristics.run = _launch_nothing
    Autotuner.run = _launch_nothing
    _installed = sm
