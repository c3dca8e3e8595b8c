"""mcoll's performance model: seed 002's formulas, a cost function per mcoll algorithm
(cost_table.json), machine files (machine.py), the seed 002 reproduction and predictions.

    python3 -m mcoll_model reproduce-002
    python3 -m mcoll_model predict --machine fat_tree_256x32 --coll alltoall
"""
