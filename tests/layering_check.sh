#!/usr/bin/env bash
# The planner's folders build in pipeline order: a file of an earlier folder that
# includes a later folder's header must not compile (planner/core/layering.h). Checks
# both directions for each pair of neighbouring folders, and models/ against simulate/.
#
#   bash tests/layering_check.sh c++ path/to/repo
set -uo pipefail
cxx=$1
root=$2
compiles() {  # compiles LAYER HEADER
  echo "#include \"$2\"" | "$cxx" -std=c++20 -fsyntax-only -I"$root" \
    -DHEADROOM_PLANNER_LAYER="$1" -x c++ - 2>/tmp/layering_check.$$ && return 0
  grep -q "comes later in the pipeline\|is used from planner/plan/ on\|is private to" \
    /tmp/layering_check.$$ || { cat /tmp/layering_check.$$; echo "failed for another reason"; exit 2; }
  return 1
}
failures=0
check() {  # check LAYER HEADER yes|no
  if compiles "$1" "$2"; then got=yes; else got=no; fi
  if [ "$got" = "$3" ]; then echo "ok: layer $1 includes $2: $got"
  else echo "WRONG: layer $1 includes $2: compiles=$got, wanted $3"; failures=$((failures + 1)); fi
}
check 10 planner/graph/op_graph.h no           # core -> graph
check 20 planner/graph/op_graph.h yes
check 20 planner/simulate/tensor_states.h no   # graph -> simulate
check 25 planner/simulate/tensor_states.h no   # models -> simulate
check 30 models/build_graph.h no               # simulate -> models
check 30 planner/simulate/tensor_states.h yes
check 30 planner/solve/plan_search.h no        # simulate -> solve
check 40 planner/plan/plan_request.h no        # solve -> plan
check 50 models/build_graph.h yes
check 50 planner/report/plan_report.h no       # plan -> report
check 60 planner/report/plan_report.h yes
check 40 planner/simulate/internal/simulation_tables_impl.h no  # another folder's internal/
rm -f /tmp/layering_check.$$
[ "$failures" = 0 ] && echo "layering holds" || exit 1
