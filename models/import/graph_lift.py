"""Lifts recordings of one training micro-batch (step_recorder.StepRecorder, one per
sample (b, s)) to a headroom graph file (docs/graph-file.md): sizes fitted exactly in
b and s, the ops split into prologue, one template per decoder-layer type and
epilogue, Python's references turned into holds.

Every recording must be the same program (the same ops on the same tensors in the
same order); only sizes may differ. Anything that cannot be lifted raises
UnliftableOp naming the op, its module and the reason: nothing is guessed.
"""

from size_fit import NoExactFit, fit_shape, fit_size
from step_recorder import UnliftableOp

ACCUMULATE_GRAD = 2 ** 64 - 1  # the sequence number of AccumulateGrad nodes
# The template of decoder layer 0 where autograd treats it apart from the others of its kind.
FIRST_LAYER = "@0"

DTYPE_NAMES = {"float32": "f32", "bfloat16": "bf16", "float16": "f16", "int64": "i64",
               "int32": "i32", "bool": "bool", "float64": "f64", "int8": "i8",
               "uint8": "u8", "complex64": "c64", "uint64": "u64"}

OP_CLASSES = {
    "mm": "matmul", "addmm": "matmul", "bmm": "matmul", "baddbmm": "matmul",
    "_grouped_mm": "matmul",
    "_scaled_dot_product_flash_attention_for_cpu": "attention",
    "_scaled_dot_product_flash_attention": "attention",
    "_scaled_dot_product_efficient_attention": "attention",
    "_scaled_dot_product_cudnn_attention": "attention",
}
# The fused CUDA attention kernels whose backward allocates scratch inside its ATen op, which
# fake tensors never see: the planner sizes it from the call's heads (traced_cost_rule.h).
FUSED_ATTENTION = {"_scaled_dot_product_flash_attention",
                   "_scaled_dot_product_efficient_attention"}
LAYOUT_OPS = {"view", "_unsafe_view", "t", "transpose", "permute", "unsqueeze", "squeeze",
              "expand", "slice", "select", "split", "split_with_sizes", "alias", "detach",
              "as_strided", "unbind", "chunk", "narrow", "reshape", "_reshape_alias"}


def _dtype(d):
    return DTYPE_NAMES.get(str(d).replace("torch.", ""), str(d).replace("torch.", ""))


def _where(rec, op):
    return f"aten.{op.aten} (module {op.module or '<top>'})"


def _program(section):
    """A section without what autograd decides (saves, gradients, backward sizes) and
    without its holds: the first layer's input is also the model's `inputs_embeds`, which
    holds it longer than a layer's caller holds its input (a hold in the epilogue)."""
    return (section["tensors"],
            [(op["aten"], op["name"], op["inputs"], op["outputs"]) for op in section["ops"]],
            section.get("output"))


class Lifter:
    def __init__(self, recordings, points, layer_prefix, layer_types, no_grad_recording,
                 loop_chunk=0, checkpointed=False):
        self.recs = recordings
        # Recorded for gradient checkpointing: a layer may not read another layer's tensor.
        self.checkpointed = checkpointed
        # The chunk of the sequence the recordings' rolled loops run over (loop_roll.py).
        self.loop_chunk = loop_chunk
        self.points = points
        self.base = recordings[0]
        # The same forward under torch.no_grad() at points[0]: where autograd saves a
        # tensor, only this run shows how long Python's own references keep it.
        self.python = no_grad_recording
        self.layer_prefix = layer_prefix  # "model.layers." (qualified, with its dot)
        self.layer_types = layer_types    # per traced layer: its template name
        self._check_same_program()
        self.section_of_op = [self._section_of(op) for op in self.base.ops]
        self._check_sections_contiguous()
        self.owner = self._tensor_sections()

    # ---- the program ------------------------------------------------------------------
    def _check_same_program(self):
        self._align_no_grad()
        for rec, point in zip(self.recs[1:], self.points[1:]):
            if len(rec.ops) != len(self.base.ops):
                raise UnliftableOp(f"the forward runs {len(rec.ops)} ops at b={point[0]}, "
                                   f"s={point[1]} and {len(self.base.ops)} at "
                                   f"b={self.points[0][0]}, s={self.points[0][1]}: the "
                                   f"program depends on the sizes")
            for a, b in zip(self.base.ops, rec.ops):
                if (a.aten, a.module, a.inputs, a.outputs) != (b.aten, b.module, b.inputs,
                                                               b.outputs):
                    raise UnliftableOp(f"{_where(self.base, a)} differs at b={point[0]}, "
                                       f"s={point[1]} (aten.{b.aten} in {b.module}): the "
                                       f"program depends on the sizes")

    def _align_no_grad(self):
        """Maps the no_grad forward's ops and tensors onto the recorded forward's. They run
        the same ops, except the copies autograd makes of a tensor an in-place op is about
        to change when its backward needs the original (a router's `top_k /= sum`): the
        no_grad forward has none, and nothing in the forward reads them."""
        base, py = self.base.ops, self.python.ops
        self.py_op, self.py_tensor = {}, {}
        i = 0
        for j, op in enumerate(py):
            while i < len(base) and not self._same_op(op, base[i]):
                if not self._autograd_copy(base[i]):
                    raise UnliftableOp(
                        f"the forward runs other ops under torch.no_grad() (a checkpointed "
                        f"layer's first forward) than with autograd: op {i} is "
                        f"{_where(self.base, base[i])} with autograd, "
                        f"{_where(self.python, op)} without")
                i += 1
            if i == len(base):
                raise UnliftableOp(f"{_where(self.python, op)} runs under torch.no_grad() "
                                   f"only")
            self.py_op[j] = i
            for a, b in zip(op.inputs + op.outputs, base[i].inputs + base[i].outputs):
                known = self.py_tensor.setdefault(a, b)
                # A view autograd replayed reads the same storage as the view it replaces.
                if self.base.tensors[known].storage != self.base.tensors[b].storage:
                    raise UnliftableOp(f"{_where(self.base, base[i])} reads other tensors "
                                       f"under torch.no_grad() than with autograd")
            i += 1
        if any(not self._autograd_copy(op) for op in base[i:]):
            raise UnliftableOp("the forward runs more ops with autograd than under "
                               "torch.no_grad()")
        self.py_op[self.python.forward_end_op] = self.base.forward_end_op

    def _same_op(self, py_op, op):
        """The no_grad forward's op `py_op` is the recorded `op`: the same op of the same
        module reading the same storages (a view autograd replays after an in-place op on
        a view is the same op as the next view the code takes)."""
        if (op.aten, op.module) != (py_op.aten, py_op.module) or \
                len(op.inputs) != len(py_op.inputs):
            return False
        tensors = self.base.tensors
        return all(a not in self.py_tensor
                   or tensors[self.py_tensor[a]].storage == tensors[b].storage
                   for a, b in zip(py_op.inputs, op.inputs))

    def _autograd_copy(self, op):
        """An op only autograd runs: a copy of a tensor an in-place op changes that nothing
        in the forward reads, or a view it replays after an in-place op on a view (no
        storage of its own)."""
        tensors = self.base.tensors
        if op.aten == "clone":
            return all(not tensors[t].consumers for t in op.outputs)
        return self._is_view(op)

    def _is_view(self, op):
        tensors = self.base.tensors
        inputs = {tensors[i].storage for i in op.inputs}
        return op.aten in LAYOUT_OPS and all(tensors[t].storage in inputs for t in op.outputs)

    def _section_of(self, op):
        module = op.module + "."
        if module.startswith(self.layer_prefix):
            return int(module[len(self.layer_prefix):].split(".", 1)[0])
        return None

    def _check_sections_contiguous(self):
        layers = len(self.layer_types)
        current = -1  # -1 prologue, k layer k, layers epilogue
        self.transparent = {}  # a whole alias between layers -> the tensor it aliases
        resolved, between = [], {}
        for op, section in zip(self.base.ops, self.section_of_op):
            if section is None:
                section = -1 if current == -1 else layers if current >= layers - 1 else None
                # A whole-tensor alias taken between two layers (Gemma 4 slices its
                # inputs to logits_to_keep, the whole sequence in training, before its
                # first KV-shared layer) is the tensor it aliases to every reader.
                if section is None and self._whole_alias(op):
                    self.transparent[op.outputs[0]] = op.inputs[0]
                    resolved.append(None)
                    continue
                # A view the model takes for the next layer between two layers (Gemma 4's
                # per_layer_inputs[:, :, i, :]) allocates nothing: it is that layer's.
                if section is None and self._is_view(op):
                    between.setdefault(current + 1, []).append(len(resolved))
                    resolved.append(current + 1)
                    continue
                if section is None:
                    raise UnliftableOp(f"{_where(self.base, op)} runs between decoder layers "
                                       f"{current} and {current + 1}")
            if section < current:
                raise UnliftableOp(f"{_where(self.base, op)} runs after a later layer")
            current = section
            resolved.append(section)
        self._first_layer_views_to_it(resolved, between)
        self.section_of_op = resolved

    def _whole_alias(self, op):
        tensors = self.base.tensors
        return (op.aten == "alias" and len(op.inputs) == 1 and len(op.outputs) == 1
                and tensors[op.outputs[0]].shape == tensors[op.inputs[0]].shape
                and tensors[op.outputs[0]].storage == tensors[op.inputs[0]].storage)

    def _first_layer_views_to_it(self, resolved, between):
        """The views the model takes for each layer between two layers (Gemma 4's
        per_layer_inputs[:, :, i, :]) are that layer's; the same views taken for layer 0,
        at the end of the prologue, are layer 0's."""
        views = [self.base.ops[o].aten for o in between.get(1, [])]
        start = resolved.index(0) if 0 in resolved and views else 0
        ops = range(start - len(views), start)
        if (not views or start < len(views)
                or [self.base.ops[o].aten for o in ops] != views
                or any(resolved[o] != -1 or not self._is_view(self.base.ops[o]) for o in ops)):
            return
        for o in ops:
            resolved[o] = 0

    def _tensor_sections(self):
        """The section each tensor belongs to: its producer's, or its first reader's."""
        owner = {}
        for t in self.base.tensors:
            if t.producer is not None:
                owner[t.index] = self.section_of_op[t.producer]
            elif t.consumers and t.role != "literal":
                owner[t.index] = self.section_of_op[t.consumers[0]]
        return owner

    # ---- sizes --------------------------------------------------------------------------
    def _fit(self, what, values, monomial=False):
        try:
            return fit_shape(self.points, values) if monomial else fit_size(self.points, values)
        except NoExactFit as e:
            raise UnliftableOp(f"{what}: no exact size in b and s ({e})") from None

    def numel(self, index):
        op = self.base.ops[self.base.tensors[index].producer] \
            if self.base.tensors[index].producer is not None else None
        what = _where(self.base, op) if op else self.base.tensors[index].name
        return self._fit(f"{what}, tensor {index}", [r.tensors[index].numel for r in self.recs],
                         monomial=True)

    # ---- sections -----------------------------------------------------------------------
    def sections(self):
        layers = len(self.layer_types)
        out = {"prologue": self._section(-1)}
        # The last traced layer of each type is its template, layer 0 apart (below); the
        # others of a type must run the same program.
        templates = {}
        first = None
        for k, kind in enumerate(self.layer_types):
            section = self._section(k)
            if (kind in templates and templates[kind] is not first
                    and _program(templates[kind]) != _program(section)):
                raise UnliftableOp(f"decoder layers of type '{kind}' differ between traced "
                                   f"layers ({self._first_difference(templates[kind], section)})")
            templates[kind] = section
            if k == 0:
                first = section
        # The first layer's input may not require grad (a frozen embedding under LoRA):
        # autograd saves less there (its norm's inputs) and may run fewer ops (no view
        # replayed after an in-place op on a view that needs no gradient), so it gets a
        # template of its own, its recorded program.
        if first != templates[self.layer_types[0]]:
            templates[self.layer_types[0] + FIRST_LAYER] = first
        out["templates"] = templates
        out["epilogue"] = self._section(layers)
        return out

    @staticmethod
    def _first_difference(a, b):
        for key, x_list, y_list in zip(("tensors", "ops", "output"), _program(a),
                                       _program(b)):
            if not isinstance(x_list, list):
                x_list, y_list = [x_list], [y_list]
            for i, (x, y) in enumerate(zip(x_list, y_list)):
                if x != y:
                    return f"{key}[{i}]: {x} vs {y}"
            if len(x_list) != len(y_list):
                return f"{key}: {len(x_list)} vs {len(y_list)} entries"
        return "nothing"

    def _section(self, k):
        layers = len(self.layer_types)
        op_ids = [i for i, s in enumerate(self.section_of_op) if s == k]
        tensor_ids = sorted(t for t, s in self.owner.items() if s == k)
        local = {t: n for n, t in enumerate(tensor_ids)}
        local_op = {o: n for n, o in enumerate(op_ids)}
        section_input = None
        if k >= 0:
            section_input = self.base.layer_io[k - 1][1] if k > 0 else self.base.layer_io[0][0]
            if k == layers:
                section_input = self.base.layer_io[layers - 1][1]

        def ref(t, where):
            while t in self.transparent:
                t = self.transparent[t]
            if t in local:
                return ["local", local[t]]
            if section_input is not None and self._same_value(t, section_input):
                return ["input"]
            if self.owner.get(t) == -1:
                return ["shared", self._prologue_index(t)]
            # The input's storage under its name before an in-place op of the previous
            # layer made the input (Gemma 4's `hidden_states *= self.layer_scalar`).
            if section_input is not None and (self.base.tensors[t].storage
                                              == self.base.tensors[section_input].storage):
                return ["input"]
            earlier = self.owner.get(t)
            if earlier is not None and 0 < earlier < k:
                return self._earlier_layer_ref(t, earlier, k, where)
            raise UnliftableOp(f"{where} reads tensor {t} of section {self.owner.get(t)}, "
                               f"neither its own, its input, an earlier layer's nor the "
                               f"prologue's")

        self._ref = ref
        prefix = f"{self.layer_prefix}{k}." if 0 <= k < layers else ""
        self._prefix = prefix
        section = {"tensors": [self._tensor(t, ref, prefix) for t in tensor_ids],
                   "ops": [self._op(o, ref) for o in op_ids]}
        if k < layers:
            output = self.base.layer_io[k][1] if k >= 0 else self.base.layer_io[0][0]
            if output not in local:
                raise UnliftableOp(f"the output of section {k} is not made there")
            section["output"] = local[output]
        self._current = k
        section["holds"], section["held_until_forward_end"] = self._holds(op_ids, local_op, ref)
        loops = self._loops(local_op)
        if loops:
            section["loops"] = loops
        if 0 <= k < layers and getattr(self.base, "layer_writes", [None] * layers)[k]:
            section["kept_by_arguments"] = self._kept_by_arguments(k, ref)
        if k == layers:
            section["loss"] = ref(self.base.loss_index, "the loss")[1]
        if k == -1 and self.base.input_embeddings is not None:
            section["input_embeddings"] = local[self.base.input_embeddings]
        return section

    def _loops(self, local_op):
        """The rolled loops of a section (loop_roll.py): the local index of the middle
        iteration's first op, its op count, and the iterations as a dimension of s."""
        loops = []
        for start, p, _ in getattr(self.base, "loops", []):
            if start not in local_op:
                continue
            if any(o not in local_op or local_op[o] != local_op[start] + o - start
                   for o in range(start - p, start + 2 * p)):
                raise UnliftableOp(f"{_where(self.base, self.base.ops[start])}: a loop that "
                                   f"spans sections")
            loops.append({"first_op": local_op[start], "ops": p,
                          "iterations": f"chunks(s,{self.loop_chunk})"})
        return loops

    def _kept_by_arguments(self, k, ref):
        """The tensors layer k wrote into a Python object among its arguments (Gemma 4's
        K/V in shared_kv_states, written by the last layer of each type even when no
        layer shares them), as local indices. torch.utils.checkpoint keeps a layer's
        arguments for the recomputation, which writes them again: docs/graph-file.md."""
        written, tensors = self.base.layer_writes[k]
        kept = []
        for t in tensors:
            r = ref(t, f"what layer {k} writes into its {written}")
            if r[0] != "local":
                raise UnliftableOp(f"layer {k} writes into its {written} a tensor it did "
                                   f"not make")
            kept.append(r[1])
        return kept

    def _earlier_layer_ref(self, t, earlier, k, where):
        """A tensor an earlier layer made, read by layer k: Gemma 4's KV-shared layers read
        the K/V the last layer of their type before them stored (`shared_kv_states`, a
        dict keyed by layer type: the latest writer wins). Named by the template of the
        layer that made it, ["layer", KIND, index]: the planner reads it from the latest
        layer of that kind it expanded, which must be the one the recording read."""
        if self.checkpointed:
            # torch.utils.checkpoint saves a layer's tensor arguments; this one reaches
            # the layer inside a Python object (Gemma 4's shared_kv_states dict, which the
            # recomputations read again in the backward), a lifetime the planner's
            # checkpointing does not model.
            raise UnliftableOp(f"{where} reads tensor {t} of layer {earlier} outside the "
                               f"layer's arguments: gradient checkpointing of such layers "
                               f"is not modelled (plan it with --checkpoint none)")
        kind = self.layer_types[earlier]
        latest = max(j for j in range(k) if self.layer_types[j] == kind)
        if latest != earlier:
            raise UnliftableOp(f"{where} reads tensor {t} of layer {earlier}, not of the "
                               f"latest layer of its kind '{kind}' (layer {latest})")
        return ["layer", kind, self._local_index(t, earlier)]

    def _same_value(self, t, section_input):
        return t == section_input

    def _prologue_index(self, t):
        return self._local_index(t, -1)

    def _local_index(self, t, section):
        """Tensor t's index among its section's tensors (as _section lists them)."""
        return sorted(x for x, s in self.owner.items() if s == section).index(t)

    def _tensor(self, t, ref, prefix):
        rec = self.base.tensors[t]
        entry = {"name": rec.name[len(prefix):] if prefix and rec.name.startswith(prefix)
                 else rec.name,
                 "role": rec.role, "shape": self.numel(t), "dtype": _dtype(rec.dtype)}
        if rec.role == "parameter":
            entry["trainable"] = rec.requires_grad
            entry["lora"] = "lora_" in rec.name
        owner = self.base.storages[rec.storage].owner
        entry["alias_of"] = ref(owner, f"tensor {t}") if owner != t and owner >= 0 else None
        return entry

    def _op(self, o, ref):
        op = self.base.ops[o]
        where = _where(self.base, op)
        inputs = [i for i in op.inputs if self.base.tensors[i].role != "literal"]
        out_storages = {self.base.tensors[t].storage for t in op.outputs}
        in_storages = [self.base.tensors[i].storage for i in inputs]
        saved = set(op.saved)
        module = op.module
        if self._prefix and (module + ".").startswith(self._prefix):
            module = module[len(self._prefix):]
        entry = {"name": f"{module}/{op.aten}", "aten": op.aten,
                 "class": self._class(op, inputs),
                 "inputs": [ref(i, where) for i in inputs],
                 "outputs": [ref(t, where)[1] for t in op.outputs],
                 "aliases_input": bool(inputs) and all(
                     self.base.tensors[t].storage == in_storages[0] for t in op.outputs),
                 "saves_inputs": [s in saved for s in in_storages],
                 "saved_outputs": [self.base.tensors[t].storage in saved for t in op.outputs]}
        extra = [k for k in dict.fromkeys(op.saved)
                 if k not in out_storages and k not in in_storages]
        entry["saved_extra"] = [self._fit(f"{where}: saved storage",
                                          [self._nth_saved_bytes(r, o, n, op) for r in self.recs])
                                for n in range(len(extra))]
        entry["grads"] = self._grads(op, inputs, where)
        entry["backward_workspace"] = self._fit(
            f"{where}: backward workspace",
            [max(0, r.ops[o].backward_peak - r.ops[o].backward_new_grad_bytes)
             for r in self.recs])
        entry["flops"] = {
            "forward": self._fit(f"{where}: flops", [r.ops[o].flops for r in self.recs]),
            "backward": self._fit(f"{where}: backward flops",
                                  [r.ops[o].backward_flops for r in self.recs])}
        if op.aten in FUSED_ATTENTION:
            entry["attention_heads"] = self._attention_heads(o, where)
        return entry

    def _attention_heads(self, o, where):
        """[heads, kv_heads, head_dim] of a fused attention call, whose q at every sample
        point is [b, heads, s, head_dim] (the rule reads b and s from the plan)."""
        heads = set()
        for rec, (b, s) in zip(self.recs, self.points):
            q, k = (rec.tensors[i].shape for i in rec.ops[o].inputs[:2])
            if len(q) != 4 or len(k) != 4 or q[0] != b or q[2] != s or k[2] != s:
                raise UnliftableOp(f"{where}: attention on q {q}, k {k} at b={b}, s={s} "
                                   f"(not [b, heads, s, head_dim])")
            heads.add((q[1], k[1], q[3]))
        if len(heads) != 1:
            raise UnliftableOp(f"{where}: attention heads change with b and s: {sorted(heads)}")
        return list(heads.pop())

    @staticmethod
    def _nth_saved_bytes(rec, o, n, base_op):
        op = rec.ops[o]
        ins = {rec.tensors[i].storage for i in op.inputs}
        outs = {rec.tensors[t].storage for t in op.outputs}
        extra = [k for k in dict.fromkeys(op.saved) if k not in ins and k not in outs]
        return rec.storages[extra[n]].nbytes

    def _class(self, op, inputs):
        if op.aten in OP_CLASSES:
            return OP_CLASSES[op.aten]
        if op.aten in LAYOUT_OPS:
            return "layout"
        if not inputs:
            return "constant"
        return "elementwise"

    def _grads(self, op, inputs, where):
        """Per input: what the op's backward hands on for it. The node's edges are matched
        to the inputs that require grad in order (an activation by its producer's node, a
        parameter by AccumulateGrad)."""
        if op.grads is None:
            if op.node_seq is not None and op.grad_mode:
                # The node never ran: nothing downstream needed a gradient from it.
                return ["none"] * len(inputs)
            return ["none"] * len(inputs)
        flows, edges = op.grads
        # A rolled loop's last iteration reads what iteration 1 stands for (loop_roll.py).
        alias = getattr(self.base, "seq_alias", {})
        seqs = [None if n is None else alias.get(n._sequence_nr(), n._sequence_nr())
                for n in edges]
        result = []
        cursor = 0
        for n, i in enumerate(inputs):
            t = self.base.tensors[i]
            # An in-place op on a view hands its gradient to the base it read (input 0)
            # and to what it wrote; the view's own node is not in the backward's graph.
            if not self._requires_grad(t) or (op.writes_view and n == 1):
                result.append("none")
                continue
            expected = ACCUMULATE_GRAD if t.producer is None else \
                self.base.ops[t.producer].node_seq
            match = next((e for e in range(cursor, len(seqs)) if seqs[e] == expected), None)
            if match is None:
                raise UnliftableOp(f"{where}: no gradient edge for input tensor {i}")
            result.append(flows[match])
            cursor = match + 1
        self._check_side_outputs(inputs, flows, seqs, where)
        return result

    def _check_side_outputs(self, inputs, flows, seqs, where):
        """A custom Function's outputs after the first are lifted without its node
        (step_recorder.functions_as_ops): refused when the backward handed one a gradient."""
        side = getattr(self.base, "function_side_outputs", {})
        for i in inputs:
            node = side.get(i)
            if node is not None and any(s == node and f != "none" for s, f in zip(seqs, flows)):
                raise UnliftableOp(f"{where}: hands a gradient to a custom autograd Function's "
                                   f"second output, which is not lifted")

    def _requires_grad(self, t):
        """An activation requires grad when its op made an autograd node (inside the
        dispatch its output had no autograd metadata yet) and it is floating-point."""
        if t.producer is None:
            return t.requires_grad
        return self.base.ops[t.producer].node_seq is not None and (t.dtype.is_floating_point or
                                                                   t.dtype.is_complex)

    # ---- Python's references --------------------------------------------------------------
    def _held_into_epilogue(self, t, freed):
        """A layer's tensor, other than the last layer's output (the epilogue's input),
        that Python holds until an op after the last layer: Gemma 4's shared K/V dict,
        which dies when the model's forward returns (after its final norm). Planned as
        held to the forward's end: for the few epilogue ops between, a little longer than
        the real code holds it, never shorter."""
        layers = len(self.layer_types)
        owner = self.owner.get(t)
        last_output = self.base.layer_io[layers - 1][1]
        return (owner is not None and 0 <= owner < layers and freed in self.py_op
                and self.section_of_op[self.py_op[freed]] == layers
                and self.base.tensors[t].storage != self.base.tensors[last_output].storage)

    def _holds(self, op_ids, local_op, ref):
        """Storages that outlive their last reader in the forward: a Python variable (or
        autocast's cache) holds them until the op after which they die. Read from the
        forward under no_grad, where no save hides a Python reference. Those that die only
        when the forward returns (the model output, the KV cache) are held until then."""
        holds, until_end = [], []
        rec = self.python
        readers = {}
        for t in rec.tensors:
            for c in t.consumers:
                readers[t.storage] = max(readers.get(t.storage, -1), c)
        for key, st in rec.storages.items():
            if st.owner is None or st.owner < 0:
                continue
            owner = rec.tensors[st.owner]
            if owner.role in ("parameter", "buffer", "literal") or st.owner == rec.loss_index:
                continue
            if st.owner not in self.py_tensor:
                continue  # no op of the recorded forward reads or makes it
            base_owner = self.py_tensor[st.owner]
            freed = st.freed_after_op if st.freed_phase == "forward" else None
            if freed is None:
                if owner.role != "input":
                    raise UnliftableOp(f"tensor {st.owner} ({owner.name or 'activation'}) "
                                       f"outlives the forward without autograd holding it")
                continue
            last = readers.get(key, owner.producer if owner.producer is not None else -1)
            if freed <= last:
                continue
            if freed == rec.forward_end_op or self._held_into_epilogue(base_owner, freed):
                if self.owner.get(base_owner) == self._current:
                    until_end.append(ref(base_owner, f"tensor {base_owner}"))
            elif self.py_op.get(freed) in local_op:
                holds.append({"tensor": ref(base_owner, f"the hold of tensor {base_owner}"),
                              "until_op": local_op[self.py_op[freed]]})
        return holds, until_end
