"""Records one training micro-batch of a real transformers model, op by op, on fake
tensors: every ATen op the dispatcher runs below autograd in the forward, the tensors
it reads and makes, the storages it allocates, which of them autograd saves for the
op's backward, and what each op's backward allocates and hands on.

How each fact is observed (torch 2.15):
* ops and storages: a TorchDispatchMode (below autograd, so one op per autograd node;
  CompositeImplicit ops arrive decomposed), each storage's end by a weakref on it
  (PyTorch keeps one Python object per storage);
* which autograd node an op made: autograd numbers nodes in creation order
  (at::sequence_number) and creates an op's node before it redispatches, so inside the
  dispatch `_get_sequence_nr() - 1` is the op's node when the counter moved;
* saves: saved_tensors_hooks' pack runs while the node is current, so the counter
  names the node there too (an input saved before the dispatch, an output after it);
* the backward: `_current_autograd_node()` inside the dispatch names the node running,
  and a hook on each node sees the gradients it returns (a new storage, the output's
  gradient passed on, or none);
* a kernel package's custom autograd Function (fla's chunk_gated_delta_rule): one op
  standing for it (functions_as_ops), since its node is made before its forward runs ops
  that, under no_grad, make none.
"""

import contextlib
import weakref

import torch
from torch._subclasses.fake_tensor import FakeTensor
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.flop_counter import flop_registry
from torch.utils.weak import WeakIdKeyDictionary

_NEXT_SEQ = torch._C._autograd._get_sequence_nr


class TensorRecord:
    __slots__ = ("index", "shape", "dtype", "numel", "storage", "alias_of", "role", "name",
                 "producer", "requires_grad", "consumers")

    def __init__(self, index, t, storage, alias_of, role, name, producer):
        self.index = index
        self.shape = tuple(t.shape)
        self.dtype = t.dtype
        self.numel = t.numel()
        self.storage = storage
        self.alias_of = alias_of
        self.role = role
        self.name = name
        self.producer = producer
        self.requires_grad = bool(t.requires_grad)
        self.consumers = []


class StorageRecord:
    __slots__ = ("key", "nbytes", "owner", "freed_after_op", "freed_phase", "saved_by", "ref")

    def __init__(self, key, nbytes, owner):
        self.key = key
        self.nbytes = nbytes
        self.owner = owner           # the TensorRecord that made it
        self.freed_after_op = None   # forward op index after which it died
        self.freed_phase = None
        self.saved_by = set()        # forward op indices whose nodes saved it
        self.ref = None


class OpRecord:
    __slots__ = ("index", "aten", "module", "inputs", "outputs", "node_seq", "grad_mode",
                 "saved", "grads", "backward_peak", "backward_new_grad_bytes", "inplace",
                 "flops", "backward_flops", "writes_view")

    def __init__(self, index, aten, module, inputs, outputs, grad_mode, inplace):
        self.index = index
        self.aten = aten
        self.module = module
        self.inputs = inputs      # TensorRecord indices, in argument order
        self.outputs = outputs
        self.node_seq = None
        self.grad_mode = grad_mode
        self.saved = []           # storage keys its node saved
        self.grads = None         # per input: "new" | "pass" | "none"
        self.backward_peak = 0    # bytes its backward held at most beyond what it returns
        self.backward_new_grad_bytes = 0
        self.inplace = inplace
        self.flops = 0
        self.backward_flops = 0
        # An in-place op on a view: it reads its base (input 0) and makes the base's next
        # version (its last output), as autograd's CopySlices does.
        self.writes_view = False


def _flops(func, args, kwargs, out):
    """The op's floating-point operations by torch.utils.flop_counter's formulas (matrix
    products, convolutions, attention); 0 for the ops it does not count."""
    formula = flop_registry.get(func.overloadpacket)
    if formula is None:
        return 0
    return int(formula(*args, **kwargs, out_val=out))


class UnliftableOp(RuntimeError):
    """An op whose recorded behaviour cannot become a graph op (names op and module)."""


class StepRecorder(TorchDispatchMode):
    """Records while entered; `phase` is "forward" or "backward" (set by the caller)."""

    def __init__(self, module_names):
        super().__init__()
        self.module_names = module_names  # id(module) -> qualified name
        self.module_stack = []
        self.tensors = []                 # TensorRecord
        self.by_object = WeakIdKeyDictionary()  # tensor -> TensorRecord (latest)
        self.storages = {}                # key -> StorageRecord (live and dead)
        self.live_storage = {}            # id(storage) -> key while alive
        self.ops = []
        self.phase = "setup"
        self.node_to_op = {}              # node sequence number -> op index
        self._seq_seen = _NEXT_SEQ()
        self._quiet = 0
        self._storage_serial = 0
        self._named = {}                  # id(tensor) -> (role, name), before the forward
        self._backward_node = None
        self._backward_live = 0
        self._backward_base = 0
        self._live_bytes = 0
        self._backward_returned = set()
        self._in_function = 0             # custom autograd Functions' forwards running
        self.function_side_outputs = {}   # their outputs after the first: tensor -> node

    # ---- names of the tensors that exist before the forward ----------------------------
    def name_tensor(self, t, role, name):
        self._named[id(t)] = (role, name, t)

    @contextlib.contextmanager
    def quiet(self):
        self._quiet += 1
        try:
            yield
        finally:
            self._quiet -= 1

    # ---- storages -----------------------------------------------------------------------
    def _storage_key(self, t, owner_index):
        st = t.untyped_storage()
        key = self.live_storage.get(id(st))
        if key is not None and self.storages[key].ref() is st:
            return key, False
        self._storage_serial += 1
        key = self._storage_serial
        rec = StorageRecord(key, st.nbytes(), owner_index)
        recorder = self

        def on_free(_ref, key=key, sid=id(st)):
            rec_ = recorder.storages[key]
            if recorder.live_storage.get(sid) == key:
                del recorder.live_storage[sid]
            rec_.freed_after_op = len(recorder.ops) - 1
            rec_.freed_phase = recorder.phase
            recorder._live_bytes -= rec_.nbytes
            if rec_.owner == -1:  # made in the backward
                recorder._backward_live -= rec_.nbytes

        rec.ref = weakref.ref(st, on_free)
        self.storages[key] = rec
        self.live_storage[id(st)] = key
        self._live_bytes += rec.nbytes
        return key, True

    def record_of(self, t):
        """The record of a tensor read by an op; tensors made before the forward are named
        by name_tensor, others (made outside any op) are refused."""
        rec = self.by_object.get(t)
        if rec is not None:
            return rec
        named = self._named.get(id(t))
        if named is not None and named[2] is t:
            role, name, _ = named
        elif not isinstance(t, FakeTensor):
            # A literal made outside any op (torch.tensor([...]) before lift_fresh copies
            # it to a fake tensor): host memory of the Python call, not the device's.
            role, name = "literal", ""
        else:
            raise UnliftableOp(f"a tensor {tuple(t.shape)} {t.dtype} that no recorded op made "
                               f"(module {self.current_module()})")
        index = len(self.tensors)
        key, new = self._storage_key(t, index)
        alias = None if new else self.storages[key].owner
        rec = TensorRecord(index, t, key, alias, role, name, None)
        self.tensors.append(rec)
        self.by_object[t] = rec
        return rec

    def current_module(self):
        return self.module_stack[-1] if self.module_stack else ""

    # ---- dispatch -----------------------------------------------------------------------
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if self._quiet or self.phase not in ("forward", "backward"):
            return func(*args, **kwargs)
        if self.phase == "backward":
            return self._backward_op(func, args, kwargs)
        seq = _NEXT_SEQ()
        out = func(*args, **kwargs)
        out_tensors = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
        if not out_tensors:  # prim::device, .item(), shape queries: no storage, no node
            return out
        # Inside a custom Function's forward the counter moved for the Function's node,
        # which the op standing for the Function takes (functions_as_ops).
        made_node = seq != self._seq_seen and not self._in_function
        self._seq_seen = _NEXT_SEQ()
        flat_args = [a for a in tree_flatten((args, kwargs))[0] if isinstance(a, torch.Tensor)]
        inputs = [self.record_of(a) for a in flat_args]
        # In place on a view (`out[:, :, i] = x`): autograd makes the base's next version
        # (CopySlices), read here as input 0 and made as the last output, so that what
        # reads the base later reads this write.
        base = flat_args[0]._base if func._schema.is_mutable and flat_args else None
        if base is not None:
            inputs = [self.record_of(base)] + inputs
        index = len(self.ops)
        op = OpRecord(index, str(func.overloadpacket.__name__), self.current_module(),
                      [r.index for r in inputs], [], torch.is_grad_enabled(),
                      func._schema.is_mutable)
        op.writes_view = base is not None
        if made_node:
            op.node_seq = seq - 1
            self.node_to_op[op.node_seq] = index
        elif func._schema.is_mutable:
            self._take_node_from_autograd_clone(op, seq, inputs)
        self.ops.append(op)
        for r in inputs:
            r.consumers.append(index)
        for t in out_tensors:
            op.outputs.append(self._output(t, index).index)
        if base is not None:
            op.outputs.append(self._output(base, index).index)
        op.flops = _flops(func, args, kwargs, out)
        return out

    def _take_node_from_autograd_clone(self, op, seq, inputs):
        """An in-place op whose backward needs the original (`top_k /= sum`): autograd
        makes its node, then clones the original (a node of its own, which nothing in the
        backward reaches), then runs the op. The number before the clone's is the op's
        node, and what the clone's node saved, the op's node saved."""
        prev = self.ops[-1] if self.ops else None
        if (prev is None or prev.aten != "clone" or prev.node_seq is None
                or prev.node_seq != seq - 1 or not inputs
                or self.tensors[prev.inputs[0]].storage != inputs[0].storage
                or prev.node_seq - 1 in self.node_to_op):
            return
        op.node_seq = prev.node_seq - 1
        self.node_to_op[op.node_seq] = op.index
        # Its saves were packed after the clone, under the clone's number.
        op.saved, prev.saved = prev.saved, []
        for key in op.saved:
            self.storages[key].saved_by.discard(prev.index)
            self.storages[key].saved_by.add(op.index)

    def _output(self, t, op_index):
        index = len(self.tensors)
        key, new = self._storage_key(t, index)
        alias = None if new else self.storages[key].owner
        rec = TensorRecord(index, t, key, alias, "activation", "", op_index)
        self.tensors.append(rec)
        self.by_object[t] = rec
        return rec

    def _backward_op(self, func, args, kwargs):
        node = torch._C._current_autograd_node()
        seq = node._sequence_nr() if node is not None else None
        if seq != self._backward_node:
            self._backward_node = seq
            self._backward_base = self._backward_live
        out = func(*args, **kwargs)
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor):
                st = t.untyped_storage()
                if id(st) not in self.live_storage:
                    key, _ = self._storage_key(t, -1)
                    self._backward_live += self.storages[key].nbytes
        op_index = self.node_to_op.get(seq)
        if op_index is not None and seq not in self._backward_returned:
            op = self.ops[op_index]
            op.backward_peak = max(op.backward_peak, self._backward_live - self._backward_base)
            op.backward_flops += _flops(func, args, kwargs, out)
        return out

    # ---- custom autograd Functions ----------------------------------------------------------
    @contextlib.contextmanager
    def functions_as_ops(self, packages):
        """A custom autograd Function of one of `packages` (the kernel packages a plan
        names: fla) as one op; other Functions are recorded as before. Function.apply
        makes the node first, then runs the forward under no_grad (its ops make no node,
        and are recorded as what they allocate), then packs what ctx saved. The op
        standing for the Function takes the node, the saves (pending until
        resolve_pending_saves) and the backward: its input 0 is the output the forward
        made, which its output aliases, then the Function's tensor arguments, whose
        gradient edges the node holds."""
        recorder = self
        original = vars(torch.autograd.Function)["apply"]

        def apply(cls, *args, **kwargs):
            if (recorder.phase != "forward" or recorder._quiet
                    or cls.__module__.split(".")[0] not in packages):
                return original.__get__(None, cls)(*args, **kwargs)
            seq = _NEXT_SEQ()
            recorder._in_function += 1
            try:
                out = original.__get__(None, cls)(*args, **kwargs)
            finally:
                recorder._in_function -= 1
            recorder._function_op(cls.__name__, seq, (args, kwargs), out)
            return out

        torch.autograd.Function.apply = classmethod(apply)
        try:
            yield
        finally:
            torch.autograd.Function.apply = original

    def _function_op(self, name, seq, arguments, out):
        outs = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
        if self._in_function or not outs:
            return  # inside another Function's forward (its ops are that one's), or no tensor
        if any(t not in self.by_object for t in outs):
            raise UnliftableOp(f"the custom autograd Function {name} returns a tensor its "
                               f"forward did not make (module {self.current_module()})")
        # Its other outputs (fla's final state, which the cache keeps) stay the tensors the
        # forward made, with no node: the lift refuses a backward that hands them a gradient.
        self.function_side_outputs.update(
            {self.by_object[t].index: seq for t in outs[1:]})
        made = self.by_object[outs[0]]
        args = [a for a in tree_flatten(arguments)[0] if isinstance(a, torch.Tensor)]
        inputs = [made] + [self.record_of(a) for a in args]
        op = OpRecord(len(self.ops), name, self.current_module(), [r.index for r in inputs],
                      [], torch.is_grad_enabled(), False)
        # Under no_grad, or with no argument requiring grad, the Function made no node: the
        # op stands for it all the same, so that both programs run the same ops.
        if any(t.grad_fn is not None and t.grad_fn._sequence_nr() == seq for t in outs):
            op.node_seq = seq
            self.node_to_op[seq] = op.index
        self.ops.append(op)
        for r in inputs:
            r.consumers.append(op.index)
        op.outputs.append(self._output(outs[0], op.index).index)
        self._seq_seen = _NEXT_SEQ()

    # ---- saves ---------------------------------------------------------------------------
    def saved_tensors_hooks(self):
        recorder = self

        def pack(t):
            if recorder.phase == "forward" and isinstance(t, torch.Tensor):
                op_index = recorder.node_to_op.get(_NEXT_SEQ() - 1)
                st = t.untyped_storage()
                key = recorder.live_storage.get(id(st))
                if op_index is not None and key is not None:
                    recorder.storages[key].saved_by.add(op_index)
                    recorder.ops[op_index].saved.append(key)
                elif op_index is None and key is not None:
                    # The node made before this op's dispatch: pack runs before it (inputs).
                    pending = recorder._pending_saves.setdefault(_NEXT_SEQ() - 1, [])
                    pending.append(key)
            with recorder.quiet():
                return t.detach()  # no grad_fn: holds the storage, not the node

        def unpack(t):
            return t

        self._pending_saves = {}
        return torch.autograd.graph.saved_tensors_hooks(pack, unpack)

    def resolve_pending_saves(self):
        """Inputs packed before their op's dispatch registered its node."""
        for seq, keys in self._pending_saves.items():
            op_index = self.node_to_op.get(seq)
            if op_index is None:
                continue  # a node of no recorded op (AccumulateGrad has no number)
            for key in keys:
                self.storages[key].saved_by.add(op_index)
                self.ops[op_index].saved.append(key)
        self._pending_saves = {}

    # ---- gradient flow ----------------------------------------------------------------
    def hook_nodes(self, root):
        """Registers, on every node reachable from `root` that a recorded op made, a hook
        that records what its backward returns per input."""
        seen = set()
        stack = [root]
        while stack:
            node = stack.pop()
            if node is None or node in seen:
                continue
            seen.add(node)
            op_index = self.node_to_op.get(node._sequence_nr())
            if op_index is None and node.name().endswith("CopySlices"):
                op_index = self._copy_slices_op(node._sequence_nr())
            if op_index is not None:
                node.register_hook(self._grad_hook(op_index, node))
            stack.extend(n for n, _ in node.next_functions)

    def _copy_slices_op(self, seq):
        """The in-place op on a view whose node autograd wraps, after the op, in the
        CopySlices numbered next: that node is the op's in the graph the backward runs."""
        op_index = self.node_to_op.get(seq - 1)
        if op_index is None or not self.ops[op_index].writes_view:
            return None
        del self.node_to_op[seq - 1]
        self.node_to_op[seq] = op_index
        self.ops[op_index].node_seq = seq
        return op_index

    def _grad_hook(self, op_index, node):
        recorder = self
        edges = [n for n, _ in node.next_functions]

        def hook(grad_inputs, grad_outputs):
            out_storages = {id(g.untyped_storage()) for g in grad_outputs
                            if isinstance(g, torch.Tensor)}
            flows = []
            new_bytes = 0
            for g in grad_inputs:
                if not isinstance(g, torch.Tensor):
                    flows.append("none")
                elif id(g.untyped_storage()) in out_storages:
                    flows.append("pass")
                else:
                    flows.append("new")
                    new_bytes += g.untyped_storage().nbytes()
            # What runs after this in the same node is the engine summing the gradients
            # into the next nodes' input buffers, which the simulator models itself.
            recorder._backward_returned.add(node._sequence_nr())
            op = recorder.ops[op_index]
            op.grads = (flows, edges)
            op.backward_new_grad_bytes = new_bytes

        return hook

    # ---- modules ------------------------------------------------------------------------
    @contextlib.contextmanager
    def module_tracking(self):
        def pre(module, _args):
            # A module made inside a forward (an activation built on the fly) has no name:
            # its ops belong to the module that made it.
            parent = self.module_stack[-1] if self.module_stack else ""
            self.module_stack.append(self.module_names.get(id(module), parent))

        def post(module, _args, _out):
            if self.module_stack:
                self.module_stack.pop()

        h1 = torch.nn.modules.module.register_module_forward_pre_hook(pre)
        h2 = torch.nn.modules.module.register_module_forward_hook(post, always_call=True)
        try:
            yield
        finally:
            h1.remove()
            h2.remove()
