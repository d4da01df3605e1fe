"""Python loops over the sequence's chunks, rolled (models/import/loop_roll.py), on a
program recorded by the import's own recorder: a scan over 16-token chunks beside a run
of three identical steps that is no loop (it repeats three times at every length), and
a scan that reads two iterations back, which is refused.

    python3 test_loop_roll.py
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "models", "import"))

import torch  # noqa: E402
from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402

from expectations import Expectations  # noqa: E402
from loop_roll import loop_chunk, roll, sequence_loops  # noqa: E402
from step_recorder import StepRecorder, UnliftableOp  # noqa: E402

CHUNK = 16


def record(s, two_back=False):
    """One forward and backward of the scan at sequence length s, recorded."""
    with FakeTensorMode():
        x = torch.randn(2, s, 8)
        w = torch.nn.Parameter(torch.randn(8, 8))
        rec = StepRecorder({})
        rec.name_tensor(x, "input", "x")
        rec.name_tensor(w, "parameter", "w")
        with rec, rec.saved_tensors_hooks():
            rec.phase = "forward"
            h = x @ w
            for _ in range(3):  # three steps at every length: no loop over the chunks
                h = (h * 2).tanh()
            chunks = -(-s // CHUNK)
            h = torch.nn.functional.pad(h, (0, 0, 0, chunks * CHUNK - s))
            h = h.view(2, chunks, CHUNK, 8)
            state = before = torch.zeros(2, CHUNK, 8)
            for i in range(chunks):
                if two_back:
                    state, before = before * 0.5 + h[:, i], state
                else:
                    state = state * 0.5 + h[:, i]
            loss = state.sum()
            rec.loss_index = rec.by_object[loss].index
            rec.forward_end_op = len(rec.ops) - 1
            rec.resolve_pending_saves()
            rec.phase = "backward"
            loss.backward()
            rec.phase = "done"
    rec.layer_io, rec.input_embeddings = [], None
    return rec


def main():
    checks = Expectations()
    expect = checks.expect

    points = [(2, 40), (2, 56), (2, 72)]  # 3, 4 and 5 chunks
    recs = [record(s) for _, s in points]
    loops = sequence_loops(recs, points, CHUNK)
    expect([[r for _, _, r in rec_loops] for rec_loops in loops], [[3], [4], [5]],
           "one loop, one iteration per chunk (the three fixed steps are none)")
    expect(loop_chunk(recs[1:], points[1:], (8, 16, 32, 64)), CHUNK, "the chunk found")
    body = loops[0][0][1]
    for rec, rec_loops, (_, s) in zip(recs, loops, points):
        roll(rec, rec_loops, f"s={s}")
    expect({len(rec.ops) for rec in recs}, {len(recs[0].ops)}, "one program once rolled")
    expect([rec.loops[0][1:] for rec in recs], [(body, 3), (body, 4), (body, 5)],
           "the rolled loop keeps its body and its count")
    start = recs[2].loops[0][0]
    last = recs[2].ops[start + body: start + 2 * body]
    # The last iteration reads what the middle one made: its state.
    made = {t for op in recs[2].ops[start:start + body] for t in op.outputs}
    expect(any(t in made for op in last for t in op.inputs), True,
           "the last iteration reads the middle one")

    try:
        two_back = [record(s, two_back=True) for _, s in points]
        for rec, rec_loops, (_, s) in zip(two_back, sequence_loops(two_back, points, CHUNK),
                                          points):
            roll(rec, rec_loops, f"s={s}")
        expect("rolled", "refused", "a scan reading two iterations back")
    except UnliftableOp as e:
        expect("reads other tensors" in str(e) or "other than the one before" in str(e), True,
               f"a scan reading two iterations back refused ({e})")

    return checks.report()


if __name__ == "__main__":
    sys.exit(main())
