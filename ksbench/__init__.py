"""What the benchmarks and the experiments share: the harness (one thread, the revision stamp, search
then time), result files and the measured cases both run.

Below both (they may not import each other), above the applications whose searches it measures.
"""
