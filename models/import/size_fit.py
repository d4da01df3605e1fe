"""Exact fits of a quantity measured at several (micro-batch b, sequence s) to a sum of
monomials c * b^i * s^j, i in {0, 1}, j in {0, 1, 2} (docs/graph-file.md, Sizes)."""

import functools
from fractions import Fraction

MONOMIALS = [(i, j) for i in (0, 1) for j in (0, 1, 2)]


class NoExactFit(ValueError):
    pass


@functools.lru_cache(maxsize=None)
def _inverse(rows):
    """The inverse of the square matrix `rows` (a tuple of tuples) over Fractions, by
    Gauss-Jordan elimination: one per set of sample points, shared by every fit."""
    n = len(rows)
    m = [list(map(Fraction, r)) + [Fraction(int(k == c)) for k in range(n)]
         for c, r in enumerate(rows)]
    for col in range(n):
        pivot = next((r for r in range(col, n) if m[r][col] != 0), None)
        if pivot is None:
            raise NoExactFit("the sample points do not determine the monomials")
        m[col], m[pivot] = m[pivot], m[col]
        m[col] = [a / m[col][col] for a in m[col]]
        for r in range(n):
            if r != col and m[r][col] != 0:
                f = m[r][col]
                m[r] = [a - f * b for a, b in zip(m[r], m[col])]
    return tuple(tuple(row[n:]) for row in m)


def _solve(rows, rhs):
    """The solution of rows x = rhs; rows must be square and regular."""
    inverse = _inverse(tuple(tuple(r) for r in rows))
    return [sum((a * v for a, v in zip(row, rhs) if v), Fraction(0)) for row in inverse]


def fit(points, values):
    return _fit(tuple(map(tuple, points)), tuple(values))


@functools.lru_cache(maxsize=None)
def _fit(points, values):
    """[[c, i, j], ...] with c > 0 equal to `values` at every (b, s) in `points`. When the
    points have two micro-batches, the first six (two micro-batches times three sequence
    lengths) determine the six coefficients; at one micro-batch (b = 1) the first three
    determine c * s^j. The rest check them. Raises NoExactFit when a coefficient is not a
    non-negative integer or a check point disagrees."""
    if all(v == 0 for v in values):
        return ()
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
    return tuple(tuple(t) for t in terms)


def fit_size(points, values):
    """fit(), else the same monomials in a padded length or a number of chunks, each term
    [c, i, j, "round_up(s,M)"] or [c, i, j, "chunks(s,M)"]: c * b^i * x^j."""
    try:
        return fit(points, values)
    except NoExactFit:
        for name, size in _padded_sizes():
            padded = [(b, size(s)) for b, s in points]
            try:
                terms = fit(padded, values)
            except NoExactFit:
                continue
            return [[c, i, j, name] if j else [c, i, j] for c, i, j in terms]
        for m in ROUND_UP_MULTIPLES:
            terms = _fit_with_chunks(points, values, m)
            if terms:
                return terms
        raise


def _fit_with_chunks(points, values, m):
    """The quantity as c * b^i * s + c' * b^i * chunks(s,m) + c'' * b^i, i in {0, 1}: a
    Triton package's scratch, some of it per token and some per chunk (fla's gated delta
    rule: its states h per 64-token chunk beside its per-token w and u). Solved from the
    first points that determine it, checked at all; None when no such sum fits."""
    chunks = f"chunks(s,{m})"
    batches = (0, 1) if len({b for b, _ in points}) > 1 else (0,)
    monomials = [(i, var) for i in batches for var in ("1", "s", chunks)]

    def value_of(var, s):
        if var == "1":
            return 1
        return s if var == "s" else _round_up(s, m) // m

    basis = points[:len(monomials)]
    try:
        coefficients = _solve([[b ** i * value_of(var, s) for i, var in monomials]
                               for b, s in basis], values[:len(monomials)])
    except NoExactFit:
        return None
    if any(c < 0 or c.denominator != 1 for c in coefficients):
        return None
    if any(sum(c * b ** i * value_of(var, s) for c, (i, var) in zip(coefficients, monomials))
           != v for (b, s), v in zip(points, values)):
        return None
    return [[int(c), i, 0] if var == "1" else [int(c), i, 1] if var == "s" else
            [int(c), i, 1, var] for c, (i, var) in zip(coefficients, monomials) if c]


def _padded_sizes():
    """(name, size of s) of the padded lengths and chunk counts tried, smallest first."""
    for m in ROUND_UP_MULTIPLES:
        yield f"round_up(s,{m})", lambda s, m=m: _round_up(s, m)
        yield f"chunks(s,{m})", lambda s, m=m: _round_up(s, m) // m


# The multiples a kernel may pad a sequence to (the memory-efficient attention's
# logsumexp: 32, kAlignLSE), tried when a count is no polynomial in s. The sample points'
# lengths are multiples of 16: padding to 8 or 16 is invisible to them.
ROUND_UP_MULTIPLES = (32, 64, 128, 256)


def _round_up(s, m):
    return -(-s // m) * m


def fit_shape(points, values):
    """A tensor's element count as the dimensions of a shape: "b", "s", "s+N",
    "round_up(s,M)", "chunks(s,M)" and integers, e.g. ["b", "s+1", 1] for labels padded by one
    (c * b^i * s^j, or c * b^i * s^(j-1) * (s + N) when the count is such a sum), or
    ["b", "round_up(s,32)", 16] for a count linear in s padded to a multiple of 32."""
    try:
        terms = fit(points, values)
    except NoExactFit:
        # Padded points repeat (two lengths in one chunk): the count is tried as
        # c * b^i * (x + N) with x = round_up(s, M) or ceil(s / M) (a dimension of chunks),
        # fitted directly rather than solved for.
        for name, size in _padded_sizes():
            for i in (1, 0):
                shape = _padded_fit(points, values, name, size, i)
                if shape:
                    return shape
        raise
    return _shape_of(terms)


def _padded_fit(points, values, name, size, i):
    """The count as c * b^i * (x + N) or c * b^i * (x + N) * (x + K), x = size(s) (a
    padded length or a number of chunks; Mamba-2's decay between chunks is [chunks + 1]^2):
    the shape ["b"] * i + [name+N, (name+K,) c], or None. Fitted from the first points with
    distinct x, checked at all."""
    samples = [(size(s), Fraction(v, b ** i)) for (b, s), v in zip(points, values)]
    xs = list(dict.fromkeys(x for x, _ in samples))
    first = dict(reversed(samples))  # the first value seen at each x
    for degree in (1, 2):
        if len(xs) <= degree:
            return None
        poly = _solve([[x ** j for j in range(degree + 1)] for x in xs[:degree + 1]],
                      [first[x] for x in xs[:degree + 1]])
        if any(sum(p * x ** j for j, p in enumerate(poly)) != y for x, y in samples):
            continue
        c = poly[-1]
        # c * prod (x + r) with non-negative integer r: its offsets from the other coefficients.
        offsets = _integer_roots(poly)
        if c <= 0 or c.denominator != 1 or offsets is None:
            return None
        return ["b"] * i + [name + (f"+{r}" if r else "") for r in offsets] + [int(c)]
    return None


def _integer_roots(poly):
    """[N] for c * (x + N), [N, K] for c * (x + N) * (x + K), with N, K >= 0 integers."""
    c = poly[-1]
    if len(poly) == 2:
        n = poly[0] / c
        return [int(n)] if n >= 0 and n.denominator == 1 else None
    total, product = poly[1] / c, poly[0] / c  # N + K and N * K
    for n in range(0, int(total) + 1 if total >= 0 else 0):
        if n * (total - n) == product and (total - n).denominator == 1:
            return [n, int(total - n)]
    return None


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
