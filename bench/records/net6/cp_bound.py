"""The most the CP bcast (first_arrival) can win on `mcoll-bench -m arrival` (2 hosts x
2 ranks, root on host A, every rank late by U[0, 1 ms)), with no scheduling and no
copies: the time from the last arrival to the last completion, mean over draws.

  fixed, rendezvous: the wire starts when the root and the fixed leader are both in
  fixed, eager:      the wire starts when the root is in (the data waits in the
                     leader's socket: it needs no leader to move)
  first_arrival:     the wire starts when the root and the node's first rank are both
                     in, plus the announcement's hop (hop_ms)
"""
import random
import statistics

random.seed(1)
print("| size (wire ms) | hop ms | fixed rendezvous | fixed eager | first_arrival "
      "| rendezvous/first | eager/first |")
print("|---|---|---|---|---|---|---|")
for label, wire in (("64 KiB (0.52)", 0.52), ("256 KiB (2.1)", 2.1), ("1 MiB (8.4)", 8.4)):
    for hop in (0.0, 0.05):
        rndv, eager, first = [], [], []
        for _ in range(200000):
            root, mate, lead, other = (random.random() for _ in range(4))
            last = max(root, mate, lead, other)
            rndv.append(max(max(root, lead) + wire, last) - last)
            eager.append(max(root + wire, last) - last)
            first.append(max(max(root, min(lead, other) + hop) + wire, last) - last)
        r, e, f = (statistics.mean(x) for x in (rndv, eager, first))
        print(f"| {label} | {hop} | {r:.3f} | {e:.3f} | {f:.3f} | {r / f:.2f} | {e / f:.2f} |")
