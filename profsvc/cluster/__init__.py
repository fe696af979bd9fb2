"""profsvc on a Dask cluster: the worker side.

Each Dask worker loads `profsvc.cluster.worker` (`--preload profsvc.cluster.worker`), which starts one profsvc
service for the worker's GPU (the one CUDA_VISIBLE_DEVICES names; none on a CPU-only worker) and keeps it, with
its warm workers and the node's build cache, across every task the worker runs. The batch's tasks
(profsvc_client.cluster_batch) reach it through the worker plugin it registers.
"""
