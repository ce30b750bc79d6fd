"""Run a training / evaluation stage script under params.yaml's ``launcher`` (dvc.yaml's cmd).

    python pipelines/launch.py pipelines/train.py <encoding>

``launcher: ""`` (default): ``python <script> <args>``; ``launcher: "torchrun --nproc_per_node 8"``
or ``"accelerate launch --num_processes 8"``: ``<launcher> <script> <args>``. The launcher is not
a DVC parameter of the stages: a run on 8 processes gives what 1 process gives (tests/training/test_multiprocess.py),
so changing it does not rerun anything; each train_summary.json / results.json records its world size.
"""

import sys

from common import params, run_stage

if __name__ == "__main__":
    if len(sys.argv) < 2:
        print("usage: python pipelines/launch.py <stage script> [args...]", file=sys.stderr)
        sys.exit(2)
    run_stage(params(), sys.argv[1], sys.argv[2:])
