"""Python loops over the sequence, rolled up to three iterations.

The reference code of the gated delta rule (transformers' torch_chunk_gated_delta_rule,
modeling_qwen3_next.py and its copies in Qwen3.5) scans the sequence in a Python loop,
one iteration per 64-token chunk, so its op count grows with the sequence. Each
recording is rewritten to keep a loop's first iteration, its second (standing for every
middle one) and its last, dropping the rest: recordings at different lengths then run
the same program, the lifter fits their sizes as usual, and the graph file names the
loop (its middle iteration repeated `iterations - 2` times, docs/graph-file.md).

A loop is a run of ops of one module that repeats a body of P ops once per chunk of the
sequence, ceil(s / M) times, at every length recorded (a fixed repetition, the same op on
q, k and v, is none). Each middle iteration must read what the
one before it made, or what the loop did not make, exactly as that one did; a tensor
made in the loop may be freed by Python one iteration later at most. Anything else is
refused: nothing is guessed.
"""

from step_recorder import UnliftableOp

MAX_BODY_OPS = 256  # the longest loop body looked for
# The iterations a rolled loop keeps: the first, one middle, the last.
KEPT_ITERATIONS = 3


def periodic_runs(rec):
    """(start, P, R): non-overlapping runs of ops of one module made of R >= 2 repeats of a
    body of P ops (by op, module and shapes), the longest runs first, then the shortest
    bodies."""
    sigs = [(op.aten, op.module,
             tuple((rec.tensors[t].shape, rec.tensors[t].dtype) for t in op.outputs),
             tuple(rec.tensors[t].shape for t in op.inputs)) for op in rec.ops]
    candidates, first = [], 0
    for i in range(1, len(sigs) + 1):
        if i == len(sigs) or rec.ops[i].module != rec.ops[first].module:
            candidates += _runs_between(sigs, first, i)
            first = i
    taken, chosen = set(), []
    for start, p, r in sorted(candidates, key=lambda c: (-c[1] * c[2], c[1], c[0])):
        span = range(start, start + p * r)
        if not taken.intersection(span):
            taken.update(span)
            chosen.append((start, p, r))
    return sorted(chosen)


def _runs_between(sigs, lo, hi):
    runs = []
    for p in range(1, min(MAX_BODY_OPS, (hi - lo) // 2) + 1):
        i = lo
        while i + p < hi:
            j = i
            while j + p < hi and sigs[j] == sigs[j + p]:
                j += 1
            if (j - i + p) // p >= 2:
                runs.append((i, p, (j - i + p) // p))
            i = j + 1
    return runs


def sequence_loops(recs, points, chunk):
    """Per recording, its loops over `chunk`-token chunks of the sequence, as
    [(start, P, R)]: the runs of R = ceil(s / chunk) repeats of a body of two ops or more,
    the same bodies at every (b, s) of `points`, which must not all hold as many chunks."""
    loops = [[run for run in periodic_runs(rec) if run[1] > 1 and run[2] == -(-s // chunk)]
             for rec, (_, s) in zip(recs, points)]
    # A run of a fixed count (the same op on q, k and v) may equal ceil(s / chunk) at one
    # length: a loop over the chunks is one at every length.
    common = set.intersection(*[{_key(rec, run) for run in rec_loops}
                                for rec, rec_loops in zip(recs, loops)])
    loops = [[run for run in rec_loops if _key(rec, run) in common]
             for rec, rec_loops in zip(recs, loops)]
    keys = [[_key(rec, run) for run in rec_loops] for rec, rec_loops in zip(recs, loops)]
    for rec_keys, point in zip(keys[1:], points[1:]):
        if rec_keys != keys[0]:
            raise UnliftableOp(f"the loops over {chunk}-token chunks at b={point[0]}, "
                               f"s={point[1]} are not those at b={points[0][0]}, "
                               f"s={points[0][1]}: the program depends on the sizes")
    return loops


def _key(rec, run):
    start, p, _ = run
    return rec.ops[start].module, tuple(op.aten for op in rec.ops[start:start + p])


def loop_chunk(recs, points, candidates):
    """The one M of `candidates` over whose chunks the recordings loop (the same loops,
    ceil(s / M) iterations each), or None."""
    fits = []
    for m in candidates:
        try:
            loops = sequence_loops(recs, points, m)
        except UnliftableOp:
            continue
        if loops[0]:
            fits.append(m)
    return fits[0] if len(fits) == 1 else None


def matching_runs(rec, like):
    """The runs of `rec` that are the rolled loops of `like`, the same forward at the same
    size without autograd, as (start, P, R): in the same module, of as many iterations
    (autograd's own copies may make a body of `like` longer)."""
    runs = periodic_runs(rec)
    found = []
    for start, _, r in like.loops:
        module = like.ops[start].module
        found.append(max((run for run in runs if rec.ops[run[0]].module == module
                          and run[2] == r), key=lambda run: run[1], default=None))
    if None in found:
        raise UnliftableOp("the loops under torch.no_grad() (a checkpointed layer's first "
                           "forward) are not those with autograd")
    return found


def roll(rec, loops, where):
    """Rewrites `rec` in place to keep iterations 0, 1 and R - 1 of each (start, P, R) of
    `loops`; sets rec.loops to [(start of iteration 1, P, R)] in the new numbering and
    rec.seq_alias to the autograd node of a kept iteration-1 op for each dropped op's."""
    position = {}  # op -> (loop, iteration, offset)
    for n, (start, p, r) in enumerate(loops):
        if r < KEPT_ITERATIONS:
            raise UnliftableOp(f"{where}: a loop of {r} iterations in {rec.ops[start].module} "
                               f"(at least {KEPT_ITERATIONS} are needed to roll it)")
        for o in range(start, start + p * r):
            position[o] = (n, (o - start) // p, (o - start) % p)
        _check_iterations(rec, n, loops[n], position, where)
    dropped = {o for o, (n, it, _) in position.items() if 2 <= it < loops[n][2] - 1}
    stands_for = {o: loops[n][0] + loops[n][1] + j for o in dropped
                  for n, _, j in [position[o]]}
    tensor_for = {t: rec.ops[stands_for[o]].outputs[k] for o in dropped
                  for k, t in enumerate(rec.ops[o].outputs)}
    storage_for = {rec.tensors[t].storage: rec.tensors[u].storage for t, u in tensor_for.items()
                   if rec.storages[rec.tensors[t].storage].owner == t}

    def reader_ok(o, t):
        """A kept op may read a dropped tensor only as the last iteration reading the one
        before it (which iteration 1 stands for)."""
        n, it, _ = position.get(rec.tensors[t].producer, (None, None, None))
        mine = position.get(o)
        return mine is not None and mine[0] == n and mine[1] == loops[n][2] - 1 \
            and it == mine[1] - 1

    kept_ops = [o for o in range(len(rec.ops)) if o not in dropped]
    for o in kept_ops:
        for t in rec.ops[o].inputs:
            if t in tensor_for and not reader_ok(o, t):
                raise UnliftableOp(f"{where}: aten.{rec.ops[o].aten} (module "
                                   f"{rec.ops[o].module}) reads a tensor of a loop's middle "
                                   f"iteration other than the one before it")
    rec.seq_alias = {rec.ops[o].node_seq: rec.ops[stands_for[o]].node_seq
                     for o in dropped if rec.ops[o].node_seq is not None}
    _renumber(rec, kept_ops, tensor_for, storage_for,
              _free_after(rec, loops, position, dropped, where))
    new_index = {o: k for k, o in enumerate(kept_ops)}
    rec.loops = [(new_index[start + p], p, r) for start, p, r in loops]


def _check_iterations(rec, n, loop, position, where):
    """Each middle and last iteration reads, op by op, what the one before it read,
    shifted by one iteration (or the same tensor, made outside the loop)."""
    start, p, r = loop

    def relative(t, it):
        rec_t = rec.tensors[t]
        if rec_t.role == "literal":
            return ("literal",)
        pos = position.get(rec_t.producer) if rec_t.producer is not None else None
        if pos is None or pos[0] != n:
            return ("outside", t)
        return ("made", it - pos[1], pos[2], rec.ops[rec_t.producer].outputs.index(t))

    for it in range(2, r):
        for j in range(p):
            op, before = rec.ops[start + it * p + j], rec.ops[start + (it - 1) * p + j]
            now = [relative(t, it) for t in op.inputs]
            then = [relative(t, it - 1) for t in before.inputs]
            if now != then or any(x[0] == "made" and x[1] > 1 for x in now):
                raise UnliftableOp(f"{where}: aten.{op.aten} (module {op.module}) reads other "
                                   f"tensors in iteration {it} of a loop than in iteration "
                                   f"{it - 1}: not a loop that can be rolled")


def _free_after(rec, loops, position, dropped, where):
    """The op after which each kept storage dies, for the kept numbering's sake: a tensor
    of iteration 1 that Python frees in iteration 2 dies at the same op of the last
    iteration (the one after it once rolled); a free inside another dropped iteration
    would depend on the number of iterations, and is refused."""
    frees = {}
    for key, st in rec.storages.items():
        f = st.freed_after_op
        if f is None or f not in dropped or st.freed_phase != "forward":
            continue
        n, it, j = position[f]
        owner = rec.tensors[st.owner] if st.owner is not None and st.owner >= 0 else None
        made = position.get(owner.producer) if owner and owner.producer is not None else None
        if made is not None and made[1] >= 2 and made[0] == n:
            continue  # made in a dropped iteration too: dropped with it
        if made is None or made[0] != n or made[1] != 1 or it != 2:
            raise UnliftableOp(f"{where}: a storage that Python frees in iteration {it} of "
                               f"the loop in {rec.ops[loops[n][0]].module}, made "
                               f"{'outside it' if made is None else f'in iteration {made[1]}'}"
                               f": its lifetime depends on the number of iterations")
        start, p, r = loops[n]
        frees[key] = start + (r - 1) * p + j
    return frees


def _renumber(rec, kept_ops, tensor_for, storage_for, frees):
    """Drops the ops of `dropped`, the tensors they made and the storages those own, and
    numbers the rest afresh: reads of a dropped tensor become reads of the iteration-1
    tensor it stands for."""
    new_op = {o: k for k, o in enumerate(kept_ops)}
    made_by_dropped = set(tensor_for)
    consumed = {t for o in kept_ops for t in rec.ops[o].inputs}
    kept_tensors = [t.index for t in rec.tensors if t.index not in made_by_dropped
                    and (t.producer is not None or t.index in consumed or not t.consumers)]
    new_t = {t: k for k, t in enumerate(kept_tensors)}

    def tensor(t):
        return None if t is None else new_t[tensor_for.get(t, t)]

    def storage(key):
        return storage_for.get(key, key)

    last_op = len(rec.ops) - 1
    storages = {}
    for key, st in rec.storages.items():
        if key in storage_for:
            continue
        if st.owner is not None and st.owner >= 0:
            if st.owner not in new_t:
                continue  # a literal only dropped ops read
            st.owner = new_t[st.owner]
        if key in frees:
            st.freed_after_op = new_op[frees[key]]
        elif st.freed_after_op is not None and st.freed_after_op >= 0:
            f = min(st.freed_after_op, last_op)
            st.freed_after_op = new_op[f] if f in new_op else new_op[max(o for o in kept_ops
                                                                          if o <= f)]
        st.saved_by = {new_op[o] for o in st.saved_by if o in new_op}
        storages[key] = st
    ops = []
    for o in kept_ops:
        op = rec.ops[o]
        op.index = new_op[o]
        op.inputs = [tensor(t) for t in op.inputs]
        op.outputs = [tensor(t) for t in op.outputs]
        op.saved = [storage(k) for k in op.saved]
        ops.append(op)
    tensors = []
    for t in kept_tensors:
        rec_t = rec.tensors[t]
        rec_t.index = new_t[t]
        rec_t.storage = storage(rec_t.storage)
        rec_t.alias_of = tensor(rec_t.alias_of)
        rec_t.producer = None if rec_t.producer is None else new_op[rec_t.producer]
        rec_t.consumers = []
        tensors.append(rec_t)
    for op in ops:
        for t in op.inputs:
            tensors[t].consumers.append(op.index)
    rec.ops, rec.tensors, rec.storages = ops, tensors, storages
    rec.layer_io = [[tensor(a), tensor(b)] for a, b in rec.layer_io]
    rec.layer_writes = [(w[0], [tensor(t) for t in w[1]]) if w else None
                        for w in getattr(rec, "layer_writes", [])]
    rec.loss_index = tensor(rec.loss_index)
    rec.input_embeddings = tensor(rec.input_embeddings)
    rec.forward_end_op = new_op[rec.forward_end_op]
