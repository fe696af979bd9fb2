"""A profsvc batch on SLURM: one SLURM job per GPU, each a Dask worker running its own profsvc service.

    pip install './client[jobqueue]' -e '.[cluster]'   # one environment the login and GPU nodes share
    python examples/slurm_batch.py problems/ --out results.parquet --jobs 4 --partition gpu --account myproj
    python examples/slurm_batch.py problems/ --out results.parquet --jobs 4 --partition gpu --print-job-script

dask-jobqueue submits the jobs with sbatch; each job asks for one GPU (`--gres=gpu:1`, so SLURM sets its
CUDA_VISIBLE_DEVICES), declares it to Dask (`--resources GPU=1`) and loads profsvc's worker preload, which starts
the service on the node. The batch runs from this process (the scheduler lives here too): rerun the same command
to resume. Dask's TCP between this node and the jobs is not authenticated: run it on a cluster network only
trusted users reach, or pass Dask TLS settings (`security=`) to SLURMCluster.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from dask_jobqueue import SLURMCluster
from distributed import Client

from profsvc_client.batch import discover, run_command
from profsvc_client.cluster_batch import run_on_cluster
from profsvc_client.cluster_local import PRELOAD


def slurm_cluster(
    *, partition: str, account: str | None, walltime: str, cores: int, memory: str, state_dir: str
) -> SLURMCluster:
    """The cluster: its jobs are started by `scale(jobs=N)` (or `adapt`)."""
    return SLURMCluster(
        queue=partition,
        account=account,
        walltime=walltime,
        cores=cores,
        memory=memory,
        processes=1,
        job_name="profsvc",
        job_extra_directives=["--gres=gpu:1"],
        # The node's local disk: the build cache and job folders (a shared file system would be slower).
        job_script_prologue=[f"export PROFSVC_STATE_DIR={state_dir}"],
        # Threads: the job's cores (`cores` // `processes`); the GPU resource keeps `--per-gpu` profiles at once.
        worker_extra_args=["--resources", "GPU=1", "--preload", PRELOAD],
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("input", type=Path, help="a folder of problems or a JSONL manifest (as profsvc batch)")
    parser.add_argument("--out", type=Path, required=True, help="the parquet to write")
    parser.add_argument("--jobs", type=int, default=1, help="SLURM jobs, one GPU each")
    parser.add_argument("--partition", required=True, help="the SLURM partition with the GPUs")
    parser.add_argument("--account", default=None, help="the SLURM account to charge")
    parser.add_argument("--walltime", default="02:00:00", help="each job's time limit")
    parser.add_argument("--cores", type=int, default=8, help="CPU cores per job (builds run on them)")
    parser.add_argument("--memory", default="64GB", help="memory per job")
    parser.add_argument("--state-dir", default="${TMPDIR:-/tmp}/profsvc", help="the node's profsvc state folder")
    parser.add_argument("--per-gpu", type=int, choices=(1, 2, 4), default=2, help="problems at once per GPU")
    parser.add_argument("--print-job-script", action="store_true", help="print the job script; submit nothing")
    args = parser.parse_args(argv)
    with slurm_cluster(
        partition=args.partition,
        account=args.account,
        walltime=args.walltime,
        cores=args.cores,
        memory=args.memory,
        state_dir=args.state_dir,
    ) as cluster:
        if args.print_job_script:
            print(cluster.job_script())
            return 0
        problems = discover(args.input)
        cluster.scale(jobs=args.jobs)
        with Client(cluster) as dask:
            return run_command(lambda: run_on_cluster(problems, args.out, dask, per_gpu=args.per_gpu), args.out)


if __name__ == "__main__":
    sys.exit(main())
