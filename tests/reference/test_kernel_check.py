"""The default-path suite's kernel check (run_reference_suite.kernel_problem), on the oneDNN
kernels a reference run reports: a bf16 kernel no rule has measured, or one other than the
kernel the plan modelled, must fail the case in one line that names it and the probe to
run; the kernels each rule was measured on must pass. Needs no torch.

    python3 test_kernel_check.py
"""

import sys

from run_reference_suite import PROBE_COMMAND, kernel_problem


def plan(mode):
    return {"config": {"cpu_bf16": mode}}


def ran(*impls, src="bf16"):
    return {"onednn_kernels": {f"matmul {impl} src:{src}": 3 for impl in impls}}


def main():
    failures = []
    checks = []

    def expect(ok, what):
        checks.append(what)
        if not ok:
            failures.append(what)

    # Measured kernels under the mode whose rule models them.
    for mode, impl in [("amx", "brg_matmul:avx10_1_512_amx"),
                       ("avx512-bf16", "brg_matmul:avx512_core_bf16"),
                       ("emulated", "gemm:jit:bf16")]:
        expect(kernel_problem(plan(mode), ran(impl)) is None, f"{impl} under {mode} passes")
    expect(kernel_problem(plan("aten"), {"onednn_kernels": {}}) is None,
           "no oneDNN matmul under aten passes")
    # fp32 products through oneDNN are not bf16 kernels.
    expect(kernel_problem(plan("aten"), ran("brg_matmul:avx512_core", src="f32")) is None,
           "an fp32 oneDNN matmul is not a bf16 kernel")

    # A future AMX variant, and another oneDNN ISA: loud, naming the kernel and the probe.
    for impl in ("brg_matmul:avx10_1_512_amx_fp16", "brg_matmul:avx2_vnni_2"):
        problem = kernel_problem(plan("amx"), ran("brg_matmul:avx10_1_512_amx", impl))
        expect(problem is not None and impl in problem and PROBE_COMMAND in problem
               and "\n" not in problem, f"{impl} is reported in one line with the probe")
    # An AMX run's vector products take the AVX512-BF16 kernel's GEMV path, bounded by
    # the AMX plan; without the AMX kernel beside it, the plan read the wrong CPU.
    expect(kernel_problem(plan("amx"), ran("brg_matmul:avx10_1_512_amx",
                                           "brg_matmul:avx512_core_bf16")) is None,
           "AMX with its GEMV products in the AVX512-BF16 kernel passes")
    # A measured kernel, but not the one the plan modelled: another kernel's rule.
    problem = kernel_problem(plan("amx"), ran("brg_matmul:avx512_core_bf16"))
    expect(problem is not None and "avx512-bf16" in problem,
           "an AVX512-BF16 run planned with the AMX rule fails")
    expect(kernel_problem(plan("avx512-bf16"), {"onednn_kernels": {}}) is not None,
           "ATen's gemm planned with a oneDNN rule fails")

    for f in failures:
        print(f"FAILED: {f}")
    print(f"{len(checks) - len(failures)} of {len(checks)} checks hold")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
