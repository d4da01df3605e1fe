"""Exact fits of a quantity measured at several (micro-batch b, sequence s) to a sum of
monomials c * b^i * s^j, i in {0, 1}, j in {0, 1, 2} (docs/graph-file.md, Sizes)."""

from fractions import Fraction

MONOMIALS = [(i, j) for i in (0, 1) for j in (0, 1, 2)]


class NoExactFit(ValueError):
    pass


def _solve(rows, rhs):
    """Gauss-Jordan elimination over Fractions; rows must be square and regular."""
    n = len(rows)
    m = [list(map(Fraction, r)) + [Fraction(v)] for r, v in zip(rows, rhs)]
    for col in range(n):
        pivot = next((r for r in range(col, n) if m[r][col] != 0), None)
        if pivot is None:
            raise NoExactFit("the sample points do not determine the monomials")
        m[col], m[pivot] = m[pivot], m[col]
        for r in range(n):
            if r != col and m[r][col] != 0:
                f = m[r][col] / m[col][col]
                m[r] = [a - f * b for a, b in zip(m[r], m[col])]
    return [m[r][n] / m[r][r] for r in range(n)]


def fit(points, values):
    """[[c, i, j], ...] with c > 0 equal to `values` at every (b, s) in `points`. When the
    points have two micro-batches, the first six (two micro-batches times three sequence
    lengths) determine the six coefficients; at one micro-batch (b = 1) the first three
    determine c * s^j. The rest check them. Raises NoExactFit when a coefficient is not a
    non-negative integer or a check point disagrees."""
    if all(v == 0 for v in values):
        return []
    monomials = MONOMIALS if len({b for b, _ in points}) > 1 else [(0, j) for j in (0, 1, 2)]
    basis = points[:len(monomials)]
    coefficients = _solve([[b ** i * s ** j for i, j in monomials] for b, s in basis],
                          values[:len(monomials)])
    terms = []
    for (i, j), c in zip(monomials, coefficients):
        if c == 0:
            continue
        if c < 0 or c.denominator != 1:
            raise NoExactFit(f"coefficient {c} of b^{i} s^{j}")
        terms.append([int(c), i, j])
    for (b, s), v in zip(points, values):
        if sum(c * b ** i * s ** j for c, i, j in terms) != v:
            raise NoExactFit(f"{v} at b={b}, s={s} is not {terms}")
    return terms


# The multiples a kernel may pad a sequence to (the memory-efficient attention's
# logsumexp: 32, kAlignLSE), tried when a count is no polynomial in s. The sample points'
# lengths are multiples of 16: padding to 8 or 16 is invisible to them.
ROUND_UP_MULTIPLES = (32, 64, 128, 256)


def _round_up(s, m):
    return -(-s // m) * m


def fit_shape(points, values):
    """A tensor's element count as the dimensions of a shape: "b", "s", "s+N",
    "round_up(s,M)" and integers, e.g. ["b", "s+1", 1] for labels padded by one
    (c * b^i * s^j, or c * b^i * s^(j-1) * (s + N) when the count is such a sum), or
    ["b", 16, "round_up(s,32)"] for a count linear in s padded to a multiple of 32."""
    try:
        terms = fit(points, values)
    except NoExactFit:
        for m in ROUND_UP_MULTIPLES:
            padded = [(b, _round_up(s, m)) for b, s in points]
            try:
                terms = fit(padded, values)
            except NoExactFit:
                continue
            if len(terms) == 1 and terms[0][2] == 1:
                c, i, _ = terms[0]
                return ["b"] * i + [f"round_up(s,{m})", c]
        raise
    return _shape_of(terms)


def _shape_of(terms):
    if not terms:
        return [0]
    if len({i for _, i, _ in terms}) == 1:
        c, i, j = max(terms, key=lambda t: t[2])
        if len(terms) == 1:
            return ["b"] * i + ["s"] * j + [c]
        if len(terms) == 2:
            c2, _, j2 = min(terms, key=lambda t: t[2])
            if j2 == j - 1 and c2 % c == 0:
                return ["b"] * i + ["s"] * (j - 1) + [f"s+{c2 // c}", c]
    raise NoExactFit(f"an element count that is no shape: {terms}")
