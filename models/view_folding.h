// The recorded views an imported graph can leave out: about a third of a traced decoder
// layer's ops are views (view, _unsafe_view, transpose, unsqueeze) that allocate nothing,
// save nothing and pass their output's gradient through as their input's. Where such a
// view is the only reader of an activation and hands on exactly its bytes, reading the
// activation in the view's place replays the same step: the same buffer, the same uses,
// the same gradient in the same slot (docs/graph-file.md, "Views left out").
#pragma once

#include <map>
#include <vector>

#include "models/graph_file.h"

namespace headroom {

// Per section of `program`, per op: true where the op is a view the expansion reads
// through (none when not `fold`).
using FoldedViews = std::map<const ImportedSection*, std::vector<bool>>;
FoldedViews FindFoldableViews(const ImportedProgram& program, bool fold = true);

}  // namespace headroom
