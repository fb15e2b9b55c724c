"""Per-output-channel bit-width allocation under an average budget (Algorithm 1 of the paper, and the baselines').

Input everywhere: re [C, 8], re[i, B-1] = RE(W_i, B) (metric.py). Output: bits int64 [C] in 1..8 with
sum(bits) == total_bits(C, budget) = floor(C * budget): the budget is met exactly and never exceeded.

Why greedy is optimal (section 4.1): total RE is a sum of per-channel terms, and when each channel's gains
g[i, B] = RE(i, B) - RE(i, B+1) are non-increasing in B, taking the K = total - C largest gains overall is the same
as raising channels one bit at a time by the largest next gain, and no other choice of K unit steps removes more
error. With non-convex gains (the exact cosine metric can have them) a large later gain can hide behind a small
earlier one and greedy may be suboptimal; tests/quant/test_allocate.py measures how often and by how much.
"""
from __future__ import annotations

import heapq
import math

import torch

from harness.quant.metric import MAX_BITS


def total_bits(channels: int, budget: float) -> int:
    """floor(C * budget), robust to binary fractions such as 4.35 * 20 = 86.99999999999999."""
    check_budget(budget)
    return math.floor(round(channels * budget, 9))


def check_budget(budget: float) -> None:
    if not isinstance(budget, (int, float)) or not math.isfinite(budget) or not 1 <= budget <= MAX_BITS:
        raise ValueError(f"budget_bits must be a number in [1, {MAX_BITS}], got {budget!r}")


def gains(re: torch.Tensor) -> torch.Tensor:
    """[C, 7]: g[i, B-1] = RE(i, B) - RE(i, B+1), the error removed by raising channel i from B to B+1 bits."""
    return re[:, :-1] - re[:, 1:]


def allocate_greedy_heap(re: torch.Tensor, budget: float) -> torch.Tensor:
    """Algorithm 1, literally: all channels at 1 bit, then pop the largest next gain from a max-heap, C log C.

    Ties go to the lower channel index (heap entries are (-gain, channel)).
    """
    g = gains(re).tolist()
    c = len(g)
    bits = [1] * c
    heap = [(-g[i][0], i) for i in range(c)]
    heapq.heapify(heap)
    remain = total_bits(c, budget) - c
    while remain > 0:
        _, i = heapq.heappop(heap)
        bits[i] += 1
        remain -= 1
        if bits[i] < MAX_BITS:
            heapq.heappush(heap, (-g[i][bits[i] - 1], i))
    return torch.tensor(bits, dtype=torch.int64)


def allocate_greedy_sorted(re: torch.Tensor, budget: float) -> torch.Tensor:
    """The same allocation as the heap for non-increasing gains, vectorised: keep the K largest gains overall.

    A stable sort over the row-major flattened gains breaks ties by (channel, bit) exactly as the heap does. With
    non-increasing rows the kept gains of each channel form a prefix, so a channel's count of kept gains is the
    number of bits it was raised by.
    """
    g = gains(re)
    c = g.shape[0]
    k = total_bits(c, budget) - c
    order = torch.sort(-g.flatten(), stable=True).indices[:k]
    return 1 + torch.bincount(order // (MAX_BITS - 1), minlength=c)


def allocate_greedy(re: torch.Tensor, budget: float) -> torch.Tensor:
    """Greedy allocation: the vectorised form when every channel's gains are non-increasing, else the heap."""
    g = gains(re)
    if bool((g[:, :-1] >= g[:, 1:]).all()):
        return allocate_greedy_sorted(re, budget)
    return allocate_greedy_heap(re, budget)


def allocate_uniform(re: torch.Tensor, budget: float) -> torch.Tensor:
    """Every channel at `budget` bits (INT8, INT4, SmoothQuant, shadow outlier): the budget must be an integer."""
    check_budget(budget)
    if budget != int(budget):
        raise ValueError(f"budget_bits={budget} must be an integer for a uniform-precision quantizer")
    return torch.full((re.shape[0],), int(budget), dtype=torch.int64)


def allocate_two_level(re: torch.Tensor, budget: float) -> torch.Tensor:
    """CMPQ's allocation, moved to output channels: two adjacent precisions floor(budget) and floor(budget) + 1;
    the channels with the largest RE at the lower precision get the higher one, as many as the budget pays for."""
    c = re.shape[0]
    low = min(int(math.floor(budget)), MAX_BITS)
    extra = total_bits(c, budget) - low * c  # channels raised to low + 1 (0 when the budget is an integer)
    bits = torch.full((c,), low, dtype=torch.int64)
    if extra > 0:
        ranked = torch.sort(-re[:, low - 1], stable=True).indices
        bits[ranked[:extra]] += 1
    return bits


def allocate_optimal_dp(re: torch.Tensor, budget: float) -> torch.Tensor:
    """The exact optimum for any gains, convex or not: a multiple-choice knapsack by dynamic programming,
    O(C * total * 8) time and O(C * total) bytes. A reference for checking greedy, not used by the quantizers.

    best[t] = least total RE of the channels seen so far using exactly t bits; choice[i, t] = bits of channel i.
    """
    c = re.shape[0]
    total = total_bits(c, budget)
    re = re.double()
    best = torch.full((total + 1,), float("inf"), dtype=torch.float64)
    best[0] = 0.0
    choice = torch.zeros(c, total + 1, dtype=torch.int8)
    for i in range(c):
        new = torch.full_like(best, float("inf"))
        for b in range(1, min(MAX_BITS, total) + 1):
            cand = torch.full_like(best, float("inf"))
            cand[b:] = best[: total + 1 - b] + re[i, b - 1]
            better = cand < new
            new = torch.where(better, cand, new)
            choice[i] = torch.where(better, torch.tensor(b, dtype=torch.int8), choice[i])
        best = new
    t = int(torch.argmin(best))  # the optimum may use fewer bits than allowed only if gains can be negative
    bits = torch.zeros(c, dtype=torch.int64)
    for i in range(c - 1, -1, -1):
        bits[i] = int(choice[i, t])
        t -= int(bits[i])
    return bits


def total_re(re: torch.Tensor, bits: torch.Tensor) -> float:
    return float(re.gather(1, (bits - 1)[:, None]).sum())
