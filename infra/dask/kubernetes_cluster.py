"""Start a Dask cluster on Kubernetes with dask-kubernetes (the Dask operator) and print its scheduler address.

    pip install dask-kubernetes          # and the Dask operator installed in the cluster
    python infra/dask/kubernetes_cluster.py --workers 8 --image registry.example/perseval:latest
    perseval run configs/experiments/gpu.yaml --dask-address <printed address>

The image must hold this repository installed as `make install` does, and every pod must mount the
experiment's output_root at the same absolute path as the flow (a shared volume: stage outputs are files).
"""
import argparse
import time

from dask_kubernetes.operator import KubeCluster

if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--image", required=True)
    ap.add_argument("--namespace", default="perseval")
    args = ap.parse_args()
    cluster = KubeCluster(name="perseval", image=args.image, namespace=args.namespace, n_workers=args.workers,
                          resources={"requests": {"cpu": "2", "memory": "8Gi"}, "limits": {"cpu": "2", "memory": "8Gi"}},
                          env={"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
    print(cluster.scheduler_address, flush=True)
    while True:  # keep the cluster alive until interrupted
        time.sleep(60)
