"""A graph traced at two depths, extrapolated to the model's own.

Some models hold parameters outside their decoder layers whose size follows the number of
layers: Gemma 4's per-layer inputs (modeling_gemma4.py: `embed_tokens_per_layer` and
`per_layer_model_projection` are num_hidden_layers x hidden_size_per_layer_input wide,
and the model reshapes their outputs to one slice per layer). A model truncated to a few
layers runs the same program with those tensors narrower. Rather than trace every layer
(Gemma 4 E2B: 30 layers, 15 traces), the import traces two truncated depths, d and d + 1,
and extrapolates each size linearly to the whole depth: a slice per layer adds the same
bytes, FLOPs and gradient to each.

Only sizes are extrapolated (a tensor's shape, an op's saved extra storages, backward
workspace and FLOPs); everything else (the program, indices, names, dtypes) must be the
same at both depths, or the import traces the whole depth instead. The parameters of the
result are checked against transformers' count of the whole model (traced_layers.py).
"""

import json

from step_recorder import UnliftableOp

# The fields of a graph section that hold sizes, as graph_lift.py writes them: a shape's
# integer dimensions (size_fit.fit_shape), or fits, each a list of terms [c, i, j(, x)]
# whose coefficient c alone may follow the depth (size_fit.fit_size).
SHAPE_FIELDS = {"shape"}
FIT_FIELDS = {"saved_extra", "backward_workspace", "flops"}


def extrapolated(shallow, deep, steps, path="graph", field=None):
    """`shallow` (traced at depth d) carried `steps` layers past `deep` (traced at d + 1):
    each size v(d) + steps * (v(d + 1) - v(d)); all else equal at both depths. Raises
    UnliftableOp naming the first field that is neither."""
    if type(shallow) is not type(deep):
        raise UnliftableOp(f"{path}: {shallow!r} at one depth, {deep!r} at the next")
    if isinstance(shallow, dict):
        if shallow.keys() != deep.keys():
            raise UnliftableOp(f"{path}: fields {sorted(shallow)} at one depth, "
                               f"{sorted(deep)} at the next")
        return {key: extrapolated(shallow[key], deep[key], steps, f"{path}.{key}",
                                  field or ("shape" if key in SHAPE_FIELDS else
                                            "fit" if key in FIT_FIELDS else None))
                for key in shallow}
    if isinstance(shallow, list):
        if len(shallow) != len(deep):
            raise UnliftableOp(f"{path}: {len(shallow)} entries at one depth, {len(deep)} "
                               f"at the next")
        if field == "fit" and shallow and _is_int(shallow[0]):
            # A term: its coefficient scales, its powers of b and s must not change.
            return [_scaled(shallow[0], deep[0], steps, f"{path}[0]")] + [
                extrapolated(a, b, steps, f"{path}[{n}]")
                for n, (a, b) in enumerate(zip(shallow[1:], deep[1:]), 1)]
        return [extrapolated(a, b, steps, f"{path}[{n}]", field)
                for n, (a, b) in enumerate(zip(shallow, deep))]
    if shallow == deep:
        return shallow
    if field == "shape" and _is_int(shallow):
        return _scaled(shallow, deep, steps, path)
    raise UnliftableOp(f"{path}: {shallow!r} at one depth, {deep!r} at the next")


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _scaled(shallow, deep, steps, path):
    value = shallow + steps * (deep - shallow)
    if value <= 0:
        raise UnliftableOp(f"{path}: {shallow} and {deep} at two depths extrapolate to "
                           f"{value}")
    return value


def whole_depth_graph(shallow, deep, depth, whole_depth):
    """The sections traced at `depth` and `depth` + 1 layers, extrapolated to
    `whole_depth`. Compared as the graph file will hold them (a fit is a tuple or a list
    before it is written)."""
    as_written = [json.loads(json.dumps(sections)) for sections in (shallow, deep)]
    return extrapolated(*as_written, whole_depth - depth)
