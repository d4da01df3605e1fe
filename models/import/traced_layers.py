"""The decoder layers an import traces, and the config of the model made of them.

A layer's kind is what the config says makes it differ (its layer type, every other
per-layer list, the index lists and the integer rules transformers reads per layer).
The import traces a few layers, each kind's last one becoming its template
(graph_lift.py), and expands them back to the config's depth (docs/graph-file.md). Two
checks keep that honest: the truncated config must give each traced layer the kind it
has in the whole model, and the expanded graph must hold exactly the parameters
transformers builds for the whole model. A size outside the layers that follows the depth
(Gemma 4's per-layer embeddings) is traced at two depths and extrapolated
(depth_scale.py).
"""

from step_recorder import UnliftableOp

# Lists of layer indices, not one value per layer (Llama 4's moe_layers, Qwen's
# mlp_only_layers): a layer's kind is whether it is in the list.
INDEX_LISTS = {"moe_layers", "mlp_only_layers", "dense_layers", "sparse_layers"}


def layer_kinds(config):
    """Per decoder layer, what makes layers differ: config.layer_types, every other
    per-layer list (SmolLM3's no_rope_layers, ...), membership of the index lists, and the
    integer rules transformers reads per layer: the first k layers dense
    (first_k_dense_replace: DeepSeek-V3, GLM-4.5) and every n-th layer sparse
    (decoder_sparse_step), joined into a template name. Returns the kinds and the config
    keys a truncated config must cut. Also the per-layer lists a config derives (Gemma 4's
    kv_sharing_modes: the last layer of each type before the shared ones stores its K/V)
    and transformers' per-layer overrides (`per_layer_config`: Gemma 4's full-attention
    layers' head_dim)."""
    n = config.num_hidden_layers
    fields = sorted(vars(config).items())
    lists = {key: value for key, value in fields
             if isinstance(value, list) and len(value) == n and key != "layer_types"
             and key not in INDEX_LISTS}
    layer_types = getattr(config, "layer_types", None)
    derived = {key: value for key, value in derived_per_layer_lists(config).items()
               if key != "layer_types" and value != layer_types}
    overrides = per_layer_overrides(config)
    index_lists = {key: set(value) for key, value in fields
                   if key in INDEX_LISTS and isinstance(value, list)}
    first_dense = getattr(config, "first_k_dense_replace", 0) or 0
    sparse_step = getattr(config, "decoder_sparse_step", 0) or 0
    kinds = []
    for k in range(n):
        parts = [str(layer_types[k])] if layer_types else []
        parts += [f"{key}={value[k]}" for key, value in {**lists, **derived}.items()]
        if k in overrides:
            parts.append("per_layer_config=" + ",".join(
                f"{attr}:{value}" for attr, value in sorted(overrides[k].items())))
        parts += [f"{key}" for key, members in index_lists.items() if k in members]
        if isinstance(first_dense, int) and k < first_dense:
            parts.append("dense")
        if isinstance(sparse_step, int) and sparse_step > 1 and (k + 1) % sparse_step != 0:
            parts.append("not-sparse")
        kinds.append("/".join(parts) or "decoder")
    keys = sorted(lists) + (["layer_types"] if layer_types else [])
    return kinds, keys


def derived_per_layer_lists(config):
    """The read-only properties of the config class that give one value per layer."""
    n = config.num_hidden_layers
    lists = {}
    for key in dir(type(config)):
        attribute = getattr(type(config), key, None)
        if not isinstance(attribute, property) or attribute.fset is not None:
            continue
        try:
            value = getattr(config, key)
        except Exception:  # noqa: BLE001 - a property that needs what this config lacks
            continue
        if isinstance(value, list) and len(value) == n:
            lists[key] = value
    return lists


def per_layer_overrides(config):
    """transformers' per-layer config overrides ({layer: {attribute: value}}), or {}."""
    spec = vars(config).get("_heterogeneity_spec")
    return dict(spec.per_layer_overrides) if spec is not None else {}


# Past this many layers, a pattern's period is not traced whole (Nemotron-H's layers
# follow no period): the first two layers of each kind are.
MAX_PERIODIC_DEPTH = 16


def layer_selections(kinds):
    """The sets of layers worth tracing, fewest first; each holds every kind, twice past
    the first layer where the model has two. One: a prefix of its own (the first dense
    layers), one period of the layer pattern after it, plus one layer. The other, for a
    pattern with no short period or a long one (Nemotron-H; Granite 4's nine Mamba-2
    layers to an attention layer): the first layer and the first two of each kind. A
    layer's program depends on its kind, not on its neighbours: each kind's template is its
    last traced layer, and graph_lift checks that the two agree."""
    firsts = {0}
    for kind in dict.fromkeys(kinds):
        firsts.update([k for k, x in enumerate(kinds) if x == kind][:2])
    prefix_and_period = periodic_prefix(kinds)
    selections = [sorted(firsts)] + ([prefix_and_period] if prefix_and_period else [])
    return sorted(selections, key=len)


def periodic_prefix(kinds):
    """The first layers up to one period past a prefix of their own, plus one; None when
    the pattern has no period short enough."""
    n = len(kinds)
    for depth in range(2, min(n, MAX_PERIODIC_DEPTH) + 1):
        for prefix in range(0, depth - 1):
            period = depth - 1 - prefix
            if all(kinds[k] == kinds[prefix + (k - prefix) % period] for k in range(prefix, n)):
                return list(range(depth))
    return None


def truncated(config, layers, per_layer_keys):
    """The config of a model made of `layers` alone: the per-layer lists cut to them, the
    index lists (moe_layers, ...), first_k_dense_replace and num_kv_shared_layers
    renumbered."""
    import copy

    small = copy.deepcopy(config)
    for key in per_layer_keys:
        # A per-layer list the config derives from other fields (a read-only property,
        # e.g. MambaConfig.layer_types) follows num_hidden_layers by itself.
        attribute = getattr(type(config), key, None)
        if isinstance(attribute, property) and attribute.fset is None:
            continue
        values = list(getattr(config, key))
        setattr(small, key, [values[k] for k in layers])
    for key in INDEX_LISTS:
        members = getattr(config, key, None)
        if isinstance(members, list):
            setattr(small, key, [new for new, old in enumerate(layers) if old in members])
    first_dense = getattr(config, "first_k_dense_replace", None)
    if isinstance(first_dense, int):
        small.first_k_dense_replace = sum(1 for k in layers if k < first_dense)
    # The last num_kv_shared_layers layers read an earlier layer's K/V (Gemma 4).
    shared = getattr(config, "num_kv_shared_layers", None)
    if isinstance(shared, int) and shared > 0:
        small.num_kv_shared_layers = sum(1 for k in layers
                                         if k >= config.num_hidden_layers - shared)
    small.num_hidden_layers = len(layers)
    overrides = per_layer_overrides(config)
    if overrides:
        small.per_layer_config = {new: dict(overrides[old])
                                  for new, old in enumerate(layers) if old in overrides}
    return small


def text_config_of(config):
    """The config of the decoder layers: a vision-language model's text_config (Gemma 3's
    Gemma3ForConditionalGeneration holds a vision tower beside its language model), else
    the config itself."""
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    return text if text is not config and hasattr(config, "text_config") else config


def with_text_config(config, text):
    """`config` with its decoder layers' config replaced by `text`."""
    import copy

    if text_config_of(config) is config:
        return text
    whole = copy.deepcopy(config)
    whole.text_config = text
    return whole


def traced_model_config(config, regime):
    """The layers traced and the config of the model made of them, and the whole model's
    parameter count: the fewest layers whose truncated config gives each one the kind it
    has in the whole model (a rule read from layer numbers, such as decoder_sparse_step,
    holds only on a prefix) and the parameters outside the layers their shapes in the
    whole model. Where those shapes follow the depth (Gemma 4's per-layer inputs, which are
    num_hidden_layers x 256 wide), those layers and one more, whose shapes extrapolate
    to the whole model's (depth_scale.py); else every layer. Returns the kinds, a list of
    (layers, config) -- one, or the two depths -- and the count. A vision tower is traced
    whole, outside the layers."""
    text = text_config_of(config)
    kinds, per_layer_keys = layer_kinds(text)
    outside, whole = parameters_on_meta(config, regime)

    def traced(layers):
        """The config of `layers` and its parameters outside them, or None when the
        truncation changes a layer's kind."""
        small = truncated(text, layers, per_layer_keys)
        if layer_kinds(small)[0] != [kinds[k] for k in layers]:
            return None
        small_config = with_text_config(config, small)
        return small_config, parameters_on_meta(small_config, regime)[0]

    for layers in layer_selections(kinds):
        shallow = traced(layers)
        if not shallow:
            continue
        if shallow[1] == outside:
            return kinds, [(layers, shallow[0])], whole
        # One layer more: the first one left out whose truncation keeps every kind.
        for extra in (k for k in range(len(kinds)) if k not in layers):
            deeper = sorted(layers + [extra])
            deep = traced(deeper)
            if deep:
                if _extrapolates_to(shallow[1], deep[1], len(kinds) - len(layers), outside):
                    return kinds, [(layers, shallow[0]), (deeper, deep[0])], whole
                break
    return kinds, [(list(range(len(kinds))), config)], whole


def _extrapolates_to(shallow, deep, steps, whole):
    """Whether the parameter shapes of two depths, carried `steps` layers on, are the
    whole model's."""
    from depth_scale import extrapolated

    if not shallow.keys() == deep.keys() == whole.keys():
        return False
    try:
        return all(extrapolated(list(shallow[name]), list(deep[name]), steps, name,
                                field="shape") == list(shape)
                   for name, shape in whole.items())
    except UnliftableOp:
        return False


def parameters_on_meta(config, regime):
    """The shapes of the parameters outside the decoder layers, and the count of all of
    them, of the model built on the meta device (no memory)."""
    import torch

    from trace_step import build_model, decoder_layers

    with torch.device("meta"):
        model = build_model(config, regime)
    prefix = decoder_layers(model, text_config_of(config).num_hidden_layers)[0] + "."
    outside = {name: tuple(p.shape) for name, p in model.named_parameters()
               if not name.startswith(prefix)}
    return outside, sum(p.numel() for p in model.parameters())


def check_parameter_count(sections, kinds, whole):
    """The graph expanded to the config's depth holds the `whole` model's parameters, or
    the import stops: a parameter whose size follows the number of layers would be planned
    at the traced depth."""
    import math

    def parameters(section):
        return {t["name"]: math.prod(t["shape"]) for t in section["tensors"]
                if t["role"] == "parameter"}

    outside = {**parameters(sections["prologue"]), **parameters(sections["epilogue"])}
    per_template = {kind: sum(parameters(t).values())
                    for kind, t in sections["templates"].items()}
    expanded = sum(outside.values()) + sum(per_template[kind] for kind in kinds)
    if expanded != whole:
        raise UnliftableOp(f"the graph expanded to {len(kinds)} layers holds {expanded:,} "
                           f"parameters where transformers builds {whole:,}")
