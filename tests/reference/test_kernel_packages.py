"""What an import needs to record a kernel package's code (docs/graph-file.md, "Kernel
packages"): a custom autograd Function recorded as one op that owns its node, its saves
and its gradient edges (step_recorder.functions_as_ops), and sizes mixing tokens and
chunks (size_fit._fit_with_chunks), on fake CPU tensors; with HEADROOM, `plan --kernels
fla` refused for a model whose step calls no fla kernel (a toy OLMo 3, imported on fake
CUDA). fla itself runs in ctest FakeCudaStep.FlaKernelsWithinOnePercent.

    python3 test_kernel_packages.py [HEADROOM]
"""

import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "models", "import"))

from expectations import Expectations  # noqa: E402


def check_mixed_sizes(expect):
    from headroom_import import SAMPLE_POINTS, SINGLE_SAMPLE_POINTS
    from size_fit import NoExactFit, fit_size

    def chunks(s):
        return -(-s // 64)

    # fla's backward scratch: per token (w, u) and per 64-token chunk (the states h).
    values = [3 * b * s + 5 * b * chunks(s) + 7 * b for b, s in SAMPLE_POINTS]
    expect(fit_size(SAMPLE_POINTS, values),
           [[7, 1, 0], [3, 1, 1], [5, 1, 1, "chunks(s,64)"]], "b s and b chunks(s,64)")
    single = [2 * s + 9 * chunks(s) for _, s in SINGLE_SAMPLE_POINTS]
    expect(fit_size(SINGLE_SAMPLE_POINTS, single), [[2, 0, 1], [9, 0, 1, "chunks(s,64)"]],
           "one micro-batch: s and chunks(s,64)")
    expect(fit_size(SAMPLE_POINTS, [4 * b * s for b, s in SAMPLE_POINTS]), ((4, 1, 1),),
           "a polynomial stays one")
    try:
        fit_size(SAMPLE_POINTS, [b * s + (s // 100) for b, s in SAMPLE_POINTS])
        expect("fitted", "NoExactFit", "a size of neither form")
    except NoExactFit:
        pass


def record_toy(packages):
    """The recorder after a forward and backward through Toy, its module's Functions
    recorded as ops when `packages` names it."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    from step_recorder import StepRecorder

    class Toy(torch.autograd.Function):
        """Saves both inputs, makes its output inside (as fla's forward does)."""

        @staticmethod
        def forward(ctx, x, y):
            out = torch.empty_like(x)
            scratch = torch.empty(x.shape[0], 4)
            del scratch
            ctx.save_for_backward(x, y)
            return out

        @staticmethod
        def backward(ctx, grad):
            x, y = ctx.saved_tensors
            return torch.empty_like(x), torch.empty_like(y)

    with FakeTensorMode():
        w = torch.nn.Parameter(torch.ones(8, 16))
        v = torch.nn.Parameter(torch.ones(8, 16))
        recorder = StepRecorder({})
        recorder.name_tensor(w, "parameter", "w")
        recorder.name_tensor(v, "parameter", "v")
        with recorder, recorder.saved_tensors_hooks(), recorder.functions_as_ops(packages):
            recorder.phase = "forward"
            x, y = w * 2, v * 3
            loss = Toy.apply(x, y).sum()
            recorder.resolve_pending_saves()
            recorder.hook_nodes(loss.grad_fn)
            recorder.phase = "backward"
            loss.backward()
            recorder.phase = "done"
    return recorder


def check_function_as_op(expect):
    recorder = record_toy({"__main__"})
    names = [op.aten for op in recorder.ops]
    expect(names, ["mul", "mul", "empty_like", "empty", "Toy", "sum"], "the ops recorded")
    toy = recorder.ops[names.index("Toy")]
    inner = recorder.ops[names.index("empty_like")]
    expect(toy.inputs[1:], [recorder.ops[0].outputs[0], recorder.ops[1].outputs[0]],
           "the Function's arguments follow the output its forward made")
    expect(toy.inputs[0], inner.outputs[0], "input 0: the output the forward made")
    expect((toy.node_seq is not None, inner.node_seq), (True, None),
           "the Function's node belongs to its op, not to the first op of its forward")
    saved = {recorder.tensors[t].storage for t in toy.inputs[1:]}
    expect(set(toy.saved), saved, "ctx's saves belong to the Function's op")
    expect(toy.grads[0], ["new", "new"], "a gradient edge for each argument")
    expect(toy.backward_new_grad_bytes, 2 * 8 * 16 * 4, "the two gradients it returns")
    # A Function of a package the plan does not name is recorded as before: its node goes
    # to the first op of its forward.
    other = record_toy({"fla"})
    names = [op.aten for op in other.ops]
    expect(names, ["mul", "mul", "empty_like", "empty", "sum"], "another package's Function")
    expect(other.ops[2].node_seq is not None, True, "its node on the forward's first op")


def check_refused_where_uncalled(expect, headroom):
    from test_train_refusal import CONFIG  # a toy OLMo 3: no fla kernel in its step

    with tempfile.TemporaryDirectory() as tmp:
        config = os.path.join(tmp, "toy-olmo3.json")
        with open(config, "w") as f:
            json.dump(CONFIG, f)
        plan = subprocess.run(
            [headroom, "plan", "--model", config, "--gpu", "h100-80gb", "--precision", "bf16",
             "--seq-len", "32", "--micro-batch", "1", "--kernels", "fla"],
            capture_output=True, text=True, env=dict(os.environ, HEADROOM_CACHE=tmp))
    message = plan.stderr.strip()
    print(f"plan --kernels fla: exit {plan.returncode}: {message}")
    expect(plan.returncode, 2, "plan's exit")
    expect("--kernels fla: the training step of model_type 'olmo3' calls no fla kernel"
           in message, True, "the refusal names the package and the model_type")


def main():
    checks = Expectations()
    check_mixed_sizes(checks.expect)
    check_function_as_op(checks.expect)
    if len(sys.argv) > 1:
        check_refused_where_uncalled(checks.expect, sys.argv[1])
    return checks.report()


if __name__ == "__main__":
    sys.exit(main())
