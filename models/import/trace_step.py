"""Runs one training micro-batch of a transformers model (+ PEFT) on fake tensors, as a
user's loop runs it (from_config, get_peft_model, forward with labels, backward), and
returns what step_recorder.StepRecorder saw. Nothing is allocated: FakeTensorMode
gives every tensor its real shape and dtype and no memory.
"""

import collections.abc
import contextlib
import os

import torch
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

from image_inputs import image_batch
from step_recorder import StepRecorder
from traced_layers import text_config_of

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


@contextlib.contextmanager
def fake_tensor_artefacts_patched():
    """Where transformers or torch behave differently on fake tensors than on real ones,
    make them behave as a real run does."""
    from transformers import masking_utils

    original_find_packed = masking_utils.find_packed_sequence_indices

    def find_packed_sequence_indices(position_ids):
        # transformers' is_tracing() is true for any FakeTensor, so the data-dependent
        # check that returns None for one sequence per row (masking_utils.py,
        # find_packed_sequence_indices) is skipped and a [b, 1, s, s] mask is built that
        # a real run never builds. The loop passes no position_ids (one sequence a row).
        mask = original_find_packed(position_ids)
        if mask is not None and isinstance(mask, FakeTensor):
            (mask[:, -1] == 0).all()
            return None
        return mask

    original_module_to = torch.nn.Module.to
    from transformers import initialization

    original_trunc_normal = initialization.TORCH_INIT_FUNCTIONS["trunc_normal_"]

    def trunc_normal(tensor, *args, **kwargs):
        # torch.nn.init.trunc_normal_ reads a value back (SigLIP's lecun_normal_ weights):
        # a fake tensor has none, and a weight's initial values change no size.
        if isinstance(tensor, FakeTensor):
            return tensor
        return original_trunc_normal(tensor, *args, **kwargs)

    # transformers' torch_compilable_check (utils/import_utils.py) compares a count read
    # from the data (Gemma 3's image tokens against its image features): a fake tensor
    # holds none. Its documented switch turns the checks off; they allocate scalars only.
    original_check = os.environ.get("TRANSFORMERS_DISABLE_TORCH_CHECK")
    os.environ["TRANSFORMERS_DISABLE_TORCH_CHECK"] = "1"
    initialization.TORCH_INIT_FUNCTIONS["trunc_normal_"] = trunc_normal

    def module_to(self, *args, **kwargs):
        # PEFT moves each adapter with .to(device, dtype). On FakeTensors Module._apply
        # takes the swap_tensors path, which refuses tensors FakeTensorMode holds weak
        # references to. This does what _apply does on real tensors: Tensor.to per
        # parameter and buffer, the result replacing the original when it differs.
        device, dtype, non_blocking, _ = torch._C._nn._parse_to(*args, **kwargs)
        for module in self.modules():
            for table in (module._parameters, module._buffers):
                for key, t in table.items():
                    if t is None:
                        continue
                    floating = t.is_floating_point() or t.is_complex()
                    with torch.no_grad():
                        new = t.to(device, dtype if floating else None, non_blocking)
                    if new is t:
                        continue
                    if table is module._parameters:
                        new = torch.nn.Parameter(new, requires_grad=t.requires_grad)
                    table[key] = new
        return self

    masking_utils.find_packed_sequence_indices = find_packed_sequence_indices
    torch.nn.Module.to = module_to
    try:
        yield
    finally:
        masking_utils.find_packed_sequence_indices = original_find_packed
        torch.nn.Module.to = original_module_to
        initialization.TORCH_INIT_FUNCTIONS["trunc_normal_"] = original_trunc_normal
        if original_check is None:
            del os.environ["TRANSFORMERS_DISABLE_TORCH_CHECK"]
        else:
            os.environ["TRANSFORMERS_DISABLE_TORCH_CHECK"] = original_check


def build_model(hf_config, regime):
    import transformers

    # LoRA loads the frozen base in regime["base_dtype"] (PEFT keeps the adapters in
    # fp32); a full fine-tune loads the precision's weights (amp: fp32).
    dtype = DTYPES[regime.get("base_dtype") or ("bf16" if regime["precision"] == "bf16" else "fp32")]
    # A model_type transformers does not ship reached here only from the code the user
    # trusted (headroom_import.load_config): its config names that code in auto_map.
    remote = hf_config.model_type not in transformers.CONFIG_MAPPING
    model = transformers.AutoModelForCausalLM.from_config(
        hf_config, attn_implementation=regime["attention"], dtype=dtype,
        trust_remote_code=remote)
    model.train()
    if regime["mode"] == "lora":
        import peft

        lora = peft.LoraConfig(r=regime["lora_rank"], lora_alpha=regime["lora_alpha"],
                               lora_dropout=0.0, target_modules=list(regime["lora_targets"]),
                               task_type=peft.TaskType.CAUSAL_LM)
        model = peft.get_peft_model(model, lora)
    return model


def install_cuda(sm):
    """The driverless CUDA device and what the CUDA dispatcher does on a GPU of compute
    capability sm (90: an H100), once per process: fake_cuda_device.py,
    fake_cuda_semantics.py (shared with the fake-CUDA references)."""
    import fake_cuda_device
    import fake_cuda_semantics

    fake_cuda_device.install()
    capability = (sm // 10, sm % 10)
    fake_cuda_semantics.patch_device_capability(capability)
    fake_cuda_semantics.install_sdpa({}, capability)


@contextlib.contextmanager
def whole_model_cache(whole_text, layers):
    """transformers' DynamicCache, built in a truncated model's forward, made with one
    cache layer per layer of the whole model, as a real run makes it: the traced layers'
    own first (layer k of the truncated model reads cache.layers[k]), then the others.
    A sliding-window cache layer holds a tensor of its window from its construction
    (cache_utils.py, DynamicSlidingWindowLayer.__init__: `_sliding_window_tensor`),
    alive as long as the cache; traced at the truncated depth, the prologue would hold one
    per traced sliding layer."""
    from transformers import cache_utils

    original = cache_utils.get_layer_types_and_kwargs
    whole_types, whole_kwargs = original(whole_text)
    order = list(layers) + [k for k in range(len(whole_types)) if k not in layers]

    def layer_types_and_kwargs(config):
        types, kwargs = original(config)
        if types != [whole_types[k] for k in layers]:
            return types, kwargs  # not the truncated model's decoder config
        return [whole_types[k] for k in order], [whole_kwargs[k] for k in order]

    cache_utils.get_layer_types_and_kwargs = layer_types_and_kwargs
    try:
        yield
    finally:
        cache_utils.get_layer_types_and_kwargs = original


def record_step(hf_config, regime, micro_batch, seq_len, grad=True, checkpointing=False,
                whole=None):
    """The recorder after one forward and backward at (micro_batch, seq_len). With
    grad=False, only the forward, under torch.no_grad(): autograd saves nothing, so each
    storage dies when the last Python reference to it goes (graph_lift's holds). On
    regime["device"] "cuda" it runs on the fake CUDA device (install_cuda first): CUDA's
    autocast lists, its SDPA kernels and their saved tensors. With `checkpointing`, the
    program a checkpointed model runs outside its recomputations: the input embeddings'
    output requires grad (below); the planner replays the recomputations itself.
    `whole`, (the whole model's text config, the layers traced), sizes the KV cache as the
    whole model's (whole_model_cache)."""
    torch.manual_seed(0)
    device = regime["device"]
    fake_mode = FakeTensorMode(allow_non_fake_inputs=True)
    on_device = torch.device(device) if device != "cpu" else contextlib.nullcontext()
    cache = whole_model_cache(*whole) if whole else contextlib.nullcontext()
    with fake_tensor_artefacts_patched(), cache, fake_mode, on_device:
        model = build_model(hf_config, regime)
        if checkpointing:
            # transformers' activation_checkpointing_enable() hooks the input embeddings
            # so that their output requires grad (modeling_utils.py,
            # _activation_checkpointing_enable: enable_input_require_grads). Under LoRA
            # the prologue's ops on it then save tensors and take gradients (Gemma 4's
            # per-layer input projection), as the first layer's do.
            model.enable_input_require_grads()
        names = {id(m): name for name, m in model.named_modules()}
        recorder = StepRecorder(names)
        for name, p in model.named_parameters():
            recorder.name_tensor(p, "parameter", name)
        for name, b in model.named_buffers():
            recorder.name_tensor(b, "buffer", name)
        text = text_config_of(hf_config)
        ids, image_inputs = image_batch(hf_config, micro_batch, seq_len,
                                        regime.get("images", 0), text.vocab_size)
        recorder.name_tensor(ids, "input", "input_ids")
        for name, t in image_inputs.items():
            recorder.name_tensor(t, "input", name)
        autocast = regime["precision"] == "amp-bf16"
        layers_name, layers = decoder_layers(model, text.num_hidden_layers)
        recorder.layer_prefix = layers_name + "."
        recorder.layer_io = [[None, None] for _ in layers]
        recorder.layer_writes = [None for _ in layers]
        hooks = [h for k, layer in enumerate(layers) for h in layer_io_hooks(recorder, k, layer)]
        embeddings = model.get_input_embeddings()
        recorder.input_embeddings = None

        def embedding_output(_module, _args, out):
            recorder.input_embeddings = recorder.by_object[out].index

        hooks.append(embeddings.register_forward_hook(embedding_output))
        with recorder, recorder.module_tracking(), recorder.saved_tensors_hooks(), \
                recorder.functions_as_ops(regime.get("kernels", [])):
            recorder.phase = "forward"
            with torch.autocast(device, dtype=torch.bfloat16, enabled=autocast), \
                    torch.set_grad_enabled(grad):
                output = model(input_ids=ids, labels=ids, use_cache=regime["kv_cache"],
                               **image_inputs)
            loss = output.loss
            recorder.loss_index = recorder.by_object[loss].index
            del output
            recorder.forward_end_op = len(recorder.ops) - 1
            recorder.resolve_pending_saves()
            if grad:
                recorder.hook_nodes(loss.grad_fn)
                recorder.phase = "backward"
                loss.backward()
            recorder.phase = "done"
            del loss
        for h in hooks:
            h.remove()
        recorder.parameters = {name: (tuple(p.shape), p.dtype, p.requires_grad)
                               for name, p in model.named_parameters()}
    return recorder


def decoder_layers(model, num_layers):
    """The ModuleList of the decoder layers: the one with num_hidden_layers entries whose
    name ends in "layers" (PEFT prefixes base_model.model.)."""
    found = [(name, m) for name, m in model.named_modules()
             if isinstance(m, torch.nn.ModuleList) and len(m) == num_layers
             and name.rsplit(".", 1)[-1] in ("layers", "h", "blocks", "layer")]
    if len(found) != 1:
        raise RuntimeError(f"cannot tell the decoder layers: {[n for n, _ in found]}")
    return found[0]


def containers_of(args, kwargs):
    """A layer call's mutable mapping and list arguments (a dict, transformers'
    KVSharingDict, a UserDict), by name, with what each holds (by identity)."""
    mutable = (collections.abc.MutableMapping, collections.abc.MutableSequence)
    named = [(f"argument {n}", a) for n, a in enumerate(args)] + list(kwargs.items())
    return {name: (value, _contents(value)) for name, value in named
            if isinstance(value, mutable)}


def _items(container):
    mapping = isinstance(container, collections.abc.Mapping)
    return list(container.items() if mapping else enumerate(container))


def _contents(container):
    return {key: id(value) for key, value in _items(container)}


def _tensors_in(values):
    """The tensors in `values`, inside tuples and lists (Gemma 4 stores (key, value))."""
    for value in values:
        if isinstance(value, torch.Tensor):
            yield value
        elif isinstance(value, (tuple, list)):
            yield from _tensors_in(value)


def layer_io_hooks(recorder, k, layer):
    """Hooks recording decoder layer k's hidden-state input and output tensors, and the
    first mapping or list argument the layer writes into with the tensors it wrote there
    (recorder.layer_writes[k]: Gemma 4's attention stores its K/V in `shared_kv_states`)."""
    before = {}

    def pre(_module, args, kwargs):
        hidden = args[0] if args else kwargs.get("hidden_states")
        recorder.layer_io[k][0] = recorder.by_object[hidden].index
        before.clear()
        before.update(containers_of(args, kwargs))

    def post(_module, _args, _kwargs, out):
        hidden = out[0] if isinstance(out, (tuple, list)) else out
        recorder.layer_io[k][1] = recorder.by_object[hidden].index
        for name, (container, contents) in before.items():
            changed = [value for key, value in _items(container) if contents.get(key) != id(value)]
            if changed and recorder.layer_writes[k] is None:
                recorder.layer_writes[k] = (f"{name} (a {type(container).__name__})",
                                            [recorder.by_object[t].index
                                             for t in _tensors_in(changed)])
        before.clear()  # holding the containers would keep what they hold alive

    return (layer.register_forward_pre_hook(pre, with_kwargs=True),
            layer.register_forward_hook(post, with_kwargs=True))
