"""Start a Dask cluster on SLURM with dask-jobqueue and print its scheduler address.

    pip install dask-jobqueue
    python infra/dask/slurm_cluster.py --jobs 4
    perseval run configs/experiments/gpu.yaml --dask-address <printed address>

Workers need the same environment as the flow (this repository installed, PREFECT_API_URL set).
"""
import argparse
import time

from dask_jobqueue import SLURMCluster

if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=4)
    ap.add_argument("--queue", default="cpu")
    args = ap.parse_args()
    cluster = SLURMCluster(queue=args.queue, cores=8, processes=4, memory="32GB", walltime="04:00:00",
                           job_extra_directives=["--exclusive"])
    cluster.scale(jobs=args.jobs)
    print(cluster.scheduler_address, flush=True)
    while True:  # keep the cluster alive until interrupted
        time.sleep(60)
