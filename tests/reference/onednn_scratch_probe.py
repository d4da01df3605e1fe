"""The scratch oneDNN allocates for single bf16 matrix products on this CPU, measured with
torch.profiler: the table a CPU bf16 kernel's rule in planner/simulate/onednn_scratch.cc is
held to (tests/data/onednn-*-scratch.tsv, checked by tests/onednn_scratch_test.cc).

    python3 tests/reference/onednn_scratch_probe.py [--out FILE] [--threads 1,2]

Prints the oneDNN matmul kernel that ran (ONEDNN_VERBOSE, in a child process) and writes
one row per thread count, op and shape: the output's bytes and the scratch, every byte the
call allocated besides its output (each call allocates its output, then one scratchpad
block it frees before returning). Each call is measured after two warm-up calls (oneDNN's
primitive cache), its inputs made beforehand. Ops: linear / mm [m, k] x [k, n]
(F.linear(a, w, b) and a @ w.t(), w [n, k]); grad_input g[m, n] @ w[n, k] (a linear's
input gradient); grad_weight g.t() @ a (a weight gradient: the first operand transposed,
the tokens inner); bmm4: 4 contiguous matrices [m, k] x [k, n].
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run_reference_suite import bf16_kernels, onednn_kernels  # noqa: E402

SHAPES = [(64, 32, 32), (64, 32, 128), (128, 64, 64), (128, 64, 256), (256, 64, 192),
          (512, 64, 64), (64, 128, 512), (1024, 256, 256), (2048, 768, 768),
          (256, 768, 3072), (4096, 1024, 1024), (128, 2048, 2048)]

KERNEL_PROBE = """
import torch
a = torch.randn(64, 64, dtype=torch.bfloat16)
a @ a
"""


def kernel_name():
    """The oneDNN matmul implementation a bf16 product runs here, e.g.
    brg_matmul:avx10_1_512_amx; None when ATen runs its own gemm."""
    out = subprocess.run([sys.executable, "-c", KERNEL_PROBE], capture_output=True, text=True,
                         env=dict(os.environ, ONEDNN_VERBOSE="1"))
    kernels = bf16_kernels({"onednn_kernels": onednn_kernels(out.stdout)})
    return next(iter(sorted(kernels, key=str)))


def allocations(fn):
    """The sizes of the blocks `fn` allocated, in order, and its result."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        out = fn()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "trace.json")
        prof.export_chrome_trace(path)
        with open(path) as f:
            trace = json.load(f)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    memory = sorted((float(e["ts"]), int(e["args"]["Bytes"]))
                    for e in events if e.get("name") == "[memory]")
    return [b for _, b in memory if b > 0], out


def products(m, k, n):
    import torch
    a = torch.randn(m, k, dtype=torch.bfloat16)
    w = torch.randn(n, k, dtype=torch.bfloat16)
    bias = torch.randn(n, dtype=torch.bfloat16)
    g = torch.randn(m, n, dtype=torch.bfloat16)
    a4 = a.expand(4, m, k).contiguous()
    b4 = w.t().expand(4, k, n).contiguous()
    return [("linear", lambda: torch.nn.functional.linear(a, w, bias)),
            ("mm", lambda: a @ w.t()),
            ("grad_input", lambda: g @ w),
            ("grad_weight", lambda: g.t() @ a),
            ("bmm4", lambda: torch.bmm(a4, b4))]


def write_atomically(path, text):
    """Through a symlink to its target, from an exclusive temporary beside it, replaced in
    one step; nothing left behind on failure."""
    target = os.path.realpath(path)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(target), prefix=".probe-")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, target)
    except BaseException:
        os.unlink(tmp)
        raise


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="write the table here (TSV; default: stdout)")
    parser.add_argument("--threads", default="1,2", help="torch threads to measure at")
    args = parser.parse_args()
    import torch
    kernel = kernel_name()
    print(f"oneDNN bf16 matmul kernel: {kernel or 'none (ATen runs its own bf16 gemm)'}; "
          f"torch {torch.__version__}", file=sys.stderr)
    lines = [f"# kernel {kernel}, torch {torch.__version__}",
             "threads\top\tm\tk\tn\toutput_bytes\tscratch_bytes"]
    for threads in (int(t) for t in args.threads.split(",")):
        torch.set_num_threads(threads)
        for m, k, n in SHAPES:
            for op, fn in products(m, k, n):
                for _ in range(2):
                    fn()  # warm oneDNN's primitive cache
                sizes, out = allocations(fn)
                output = out.numel() * out.element_size()
                lines.append(f"{threads}\t{op}\t{m}\t{k}\t{n}\t{output}\t{sum(sizes) - output}")
                print(lines[-1], file=sys.stderr, flush=True)
    text = "\n".join(lines) + "\n"
    if args.out:
        write_atomically(args.out, text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
