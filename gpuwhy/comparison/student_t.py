"""Student's t distribution for whole degrees of freedom: its quantiles, which the
comparison of several runs a side needs (gpuwhy does not depend on SciPy for one
function).

The distribution function has a closed form for whole ``df`` (Abramowitz & Stegun
26.7.3-26.7.4, in terms of theta = atan(t / sqrt(df))); the quantile is found by
bisection on it, to 1e-10.
"""

from __future__ import annotations

import math


def two_sided_mass(t: float, df: int) -> float:
    """P(|T| <= t) for T ~ t(df), t >= 0 (A&S 26.7.3/26.7.4)."""
    if df < 1:
        raise ValueError("degrees of freedom must be at least 1")
    theta = math.atan(t / math.sqrt(df))
    s, c2 = math.sin(theta), math.cos(theta) ** 2
    if df % 2 == 0:
        term = total = 1.0
        for k in range(1, df // 2):  # 1 + 1/2 c^2 + 1*3/(2*4) c^4 + ...
            term *= c2 * (2 * k - 1) / (2 * k)
            total += term
        return s * total
    if df == 1:
        return 2 * theta / math.pi
    c = math.cos(theta)
    term = total = c
    for k in range(1, (df - 1) // 2):  # c + 2/3 c^3 + 2*4/(3*5) c^5 + ...
        term *= c2 * (2 * k) / (2 * k + 1)
        total += term
    return 2 / math.pi * (theta + s * total)


def quantile(p: float, df: int) -> float:
    """The t(df) quantile: P(T <= x) = p, for 0 < p < 1."""
    if not 0 < p < 1:
        raise ValueError("p must lie strictly between 0 and 1")
    if p == 0.5:
        return 0.0
    mass = abs(2 * p - 1)  # P(|T| <= x) for the upper point x
    low, high = 0.0, 1.0
    while two_sided_mass(high, df) < mass:
        high *= 2
    for _ in range(200):
        middle = (low + high) / 2
        if two_sided_mass(middle, df) < mass:
            low = middle
        else:
            high = middle
        if high - low < 1e-10:
            break
    x = (low + high) / 2
    return x if p > 0.5 else -x
