"""`farm workers`: the GPU workers kept on the Ray cluster by `farm sweep --keep-workers`.

farm workers            # list them
farm workers --stop     # stop them (their GPUs are free again)
"""

from __future__ import annotations

import argparse


def register(sub, add_db_argument) -> None:
    p = sub.add_parser(
        "workers",
        help="list (or --stop) the GPU workers that `farm sweep --keep-workers` left running",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--address", help="the Ray cluster; default: $RAY_ADDRESS, else the head on this node")
    p.add_argument("--stop", action="store_true", help="stop every kept worker")
    p.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    import ray

    from farm import cluster, ray_connect

    ray_connect.connect(ray, args.address, None, join_only=True)
    try:
        names = cluster.kept_worker_names(ray)
        if args.stop:
            cluster.stop_kept_workers(ray)
            print(f"stopped {len(names)} kept worker(s)")
        else:
            print("\n".join(names) if names else "no kept workers")
    finally:
        ray.shutdown()  # the driver's connection only: the cluster runs on
    return 0
