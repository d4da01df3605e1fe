"""One CUDA device for fake tensors on a machine with no GPU and no driver, so that the
autograd engine runs backward, and optimizers step, on fake CUDA tensors with CUDA's
semantics (shared/facts/fake-cuda-whole-step.md).

Without it the engine stops twice (torch 2.15, torch/csrc/autograd/engine.cpp):
* it asks c10's CUDA device guard how many devices there are (0 without a driver) to
  start its device threads;
* GraphTask::stash_current_streams asks the CUDA hooks hasPrimaryContext(0), which throws
  "hasPrimaryContext expects a valid device index" when the count is 0.

install() builds a small C++ extension once (torch.utils.cpp_extension.load_inline, about
20 s on 2 cores; cached in HEADROOM_EXTENSIONS_DIR, which ctest sets under the build
directory) and:
* stores a do-nothing DeviceGuardImplInterface for DeviceType::CUDA in c10's
  device_guard_impl_registry: one device, default streams, events that are always ready;
* points the hasPrimaryContext slot of the CUDA hooks' vtable at a function returning true
  (the slot index from the pointer-to-member: under the Itanium C++ ABI a virtual one
  holds 1 + its byte offset in the vtable).

It also answers, in Python, what torch.cuda would ask the driver for on the paths a
training step takes, as an H100 answers:
* that CUDA autocast is available and bf16 supported (torch.amp.autocast and GradScaler
  turn themselves off otherwise, and torch.utils.checkpoint recomputes under
  torch.autocast("cuda") with the forward's autocast state);
* the CUDA generator's state (torch.utils.checkpoint stashes it; a host tensor on a GPU
  too, so no device memory), and the device count.

For reference processes only: nothing here can touch real memory, and it must never run
next to real CUDA work. Use it under FakeTensorMode, in a process of its own.
"""
import os

import torch

# The extension's C++ (LibTorch) lives with the runtime, outside the planner and models/.
_SOURCE_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "runtime",
                            "fake_cuda", "device_extension.cpp")

_installed = False


def extensions_dir():
    """Where the extension is built and cached: HEADROOM_EXTENSIONS_DIR (ctest: under the
    build directory), else torch's own default."""
    path = os.environ.get("HEADROOM_EXTENSIONS_DIR")
    if path:
        os.makedirs(path, exist_ok=True)
    return path


def install():
    """Installs the device (once per process). Raises if a real CUDA device is present:
    patched hooks next to a real driver would corrupt real work."""
    global _installed
    if _installed:
        return
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) != "" and torch.cuda.is_available():
        raise RuntimeError("fake_cuda_device: a real CUDA device is visible; run the fake-CUDA "
                           "reference with CUDA_VISIBLE_DEVICES=\"\"")
    import logging
    # Its "No CUDA runtime is found" at import is this machine's normal state.
    logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)
    from torch.utils.cpp_extension import load_inline

    kwargs = {"build_directory": extensions_dir()} if extensions_dir() else {}
    with open(_SOURCE_PATH, encoding="utf-8") as f:
        source = f.read()
    module = load_inline("headroom_fake_cuda_device", cpp_sources=source, functions=["install"],
                         verbose=False, **kwargs)
    module.install()
    _answer_torch_cuda()
    _installed = True


def _answer_torch_cuda():
    """torch.cuda's Python functions that a step calls and that would ask the driver."""
    def get_rng_state(device="cuda"):
        # CUDAGeneratorImpl::get_state: seed and Philox offset, 16 bytes on the host.
        return torch.zeros(16, dtype=torch.uint8, device="cpu")

    torch.cuda.amp.common.amp_definitely_not_available = lambda: False
    torch.cuda.is_bf16_supported = lambda including_emulation=True: True  # sm90
    torch.cuda.get_rng_state = get_rng_state
    torch.cuda.set_rng_state = lambda new_state, device="cuda": None
    torch.cuda.device_count = lambda: 1
    torch.cuda.current_device = lambda: 0


def answer_streams():
    """What FSDP2 asks torch.cuda for (fully_shard: current_device, its copy-in and
    reduce-scatter streams and their events), answered by the guard's one default stream:
    generic torch.Stream / torch.Event objects, whose methods go through the device guard
    above. Call after importing transformers: its annotations read torch.cuda.Stream."""
    import contextlib

    def stream(*args, **kwargs):
        return torch.Stream(stream_id=0, device_index=0, device_type=1)

    default = stream()
    torch.cuda.Stream = stream
    torch.cuda.Event = lambda *args, **kwargs: torch.Event(device="cuda")
    torch.cuda.current_stream = lambda *args, **kwargs: default
    torch.cuda.default_stream = lambda *args, **kwargs: default
    torch.cuda.stream = lambda s: contextlib.nullcontext()
    torch.cuda.set_device = lambda *args: None
    torch.cuda.synchronize = lambda *args: None
