"""The model's buffers no op reads, added to the graph as leaves.

A recording sees a tensor only when an op reads it. Some buffers are never read, yet
`model.to(device)` moves them with the rest and they stay the whole run: the rotary
module's `original_inv_freq`, a clone of `inv_freq` kept for dynamic RoPE
(`self.original_inv_freq = nn.Buffer(inv_freq.clone(), persistent=False)`,
modeling_llama.py). Each becomes a buffer tensor of the section it belongs to: the
template of its layer's type, or the prologue for one outside the decoder layers.
"""

from graph_lift import FIRST_LAYER, _dtype


def _names(section):
    return {t["name"] for t in section["tensors"]}


def _leaf(name, buffer):
    return {"name": name, "role": "buffer", "shape": [max(buffer.numel(), 1)],
            "dtype": _dtype(buffer.dtype), "alias_of": None}


def add_unread_buffers(programs, model, layer_prefix, traced_kinds):
    """Adds to each program (sections as the graph file holds them) the buffers of `model`
    (the traced model, on the meta device) that no section holds. `traced_kinds`: the
    template type of each of the traced model's decoder layers. Returns the names added."""
    added = []
    for name, buffer in model.named_buffers():
        if name.startswith(layer_prefix):
            index, relative = name[len(layer_prefix):].split(".", 1)
            kind = traced_kinds[int(index)]
            for program in programs:
                for template_kind, section in program["templates"].items():
                    if template_kind in (kind, kind + FIRST_LAYER) and \
                            relative not in _names(section):
                        section["tensors"].append(_leaf(relative, buffer))
                        added.append(name)
            continue
        for program in programs:
            if name not in _names(program["prologue"]) | _names(program["epilogue"]):
                program["prologue"]["tensors"].append(_leaf(name, buffer))
                added.append(name)
    return sorted(set(added))
