"""Seed 002's closed forms (Luo, Zhang, Wei 2018, "Alltoall 通信性能模型研究").

Units: times in µs, sizes in bytes, alpha in µs, beta in µs per byte (1/bandwidth).
"""

import math


def lg(p):
    """ceil(log2 p), the number of rounds of a doubling algorithm over p members (0 for p <= 1)."""
    return 0 if p <= 1 else math.ceil(math.log2(p))


def bruck(p, k, alpha, beta):
    """Seed 002 eq. (1): store-and-forward (Bruck) alltoall of k-byte blocks over p ranks:
    lg p rounds, each rank moving half of its p-1 blocks per round."""
    return lg(p) * alpha + 0.5 * lg(p) * (p - 1) * k * beta


def long_message(p, k, alpha, beta):
    """Seed 002 eq. (2): pairwise (or ring) exchange, p-1 steps of one k-byte message."""
    return (p - 1) * (alpha + k * beta)


def mg1_wait(rho, radix):
    """Seed 002 eq. (3): mean wait in cycles at a radix x radix output-queued switch when a
    packet reaches each input with probability rho per cycle (uniform destinations):
    arrivals per output are binomial(radix, rho/radix), so E = rho and
    V = rho(1 - rho/radix); the M/G/1 mean queue gives w = V/(2E(1-E)) - 1/2
    = (1 - 1/radix) rho / (2 (1 - rho))."""
    if not 0 <= rho < 1:
        raise ValueError(f"rho must be in [0, 1), got {rho}")
    return (1 - 1 / radix) * rho / (2 * (1 - rho))


def packets(k, packet_bits):
    """Packets of packet_bits bits that carry k bytes (k/k_p of eq. (4), unrounded as in the paper)."""
    return k * 8 / packet_bits


def contention_step(k, hops, rho, radix, packet_bits, cycle_us):
    """The contention term of eq. (4) for one k-byte message: every packet waits w cycles at
    each of n_hop switches: (k/k_p) * n_hop * w * t_c (µs)."""
    return packets(k, packet_bits) * hops * mg1_wait(rho, radix) * cycle_us


def contention(p, k, alpha, beta, hops, rho, radix, packet_bits, cycle_us):
    """Seed 002 eq. (4): T = (p-1)(alpha + k beta + (k/k_p) n_hop w t_c)."""
    return (p - 1) * (alpha + k * beta
                      + contention_step(k, hops, rho, radix, packet_bits, cycle_us))


def rho_from_wait(w, radix):
    """Inverse of mg1_wait: the load rho that gives a mean wait of w cycles."""
    x = w / ((1 - 1 / radix) / 2)          # x = rho / (1 - rho)
    return x / (1 + x)
