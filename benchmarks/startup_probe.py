"""Where `farm sweep`'s start-up goes, and what it adds up to (issue "Scale out", item 7: <= 8 s).

    python benchmarks/startup_probe.py [--out $OUT]         # about a minute on a GPU host

1. Phases, in one process and in the order `farm sweep` runs them (cli/sweep.py): the driver's
   imports and spec (no torch: tests/farm/test_driver_imports.py), `import ray`, `ray.init` of a
   new local Ray, one GPU worker created, the driver's database modules and a database created
   while the worker starts, the worker up. Then a fresh actor times the worker's own parts:
   import torch, the CUDA context, farm's GPU modules (Triton), the variant's module, and on a
   GPU a first compile (Triton's one-time set-up included) against a second one.
2. Whole commands: `python -m cli sweep --spec SPEC --workers 1`, from the command's start to its
   first stored point: starting its own Ray (empty Triton cache), then joining a `ray start --head`
   started just before (token auth on, as Ray 2.60 has it), from an empty and from a warm cache;
   then with `--keep-workers`: a sweep that leaves its worker running, and two that take it over
   (the same kernel, and one not compiled yet).

Without a GPU the worker runs Triton's interpreter, so the default spec is a 64^3 point there
(benchmarks/startup.yaml's 2048^3 on a GPU). Writes startup_probe.csv under --out (kept as
docs/results/startup_probe.csv). On an H200 host:
23.5 s to the first point with its own Ray, 15.4 s joining a running head, 3.5-4.3 s taking over
kept workers.
"""

from __future__ import annotations

import time

T0 = time.perf_counter()

import argparse  # noqa: E402
import logging  # noqa: E402
import os  # noqa: E402
import secrets  # noqa: E402
import shutil  # noqa: E402
import sqlite3  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
from datetime import UTC, datetime  # noqa: E402
from pathlib import Path  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
CPU_SPEC = """\
name: startup-cpu
dtypes: [float16]
variants: [grouped]
shapes:
  - {m: 64, n: 64, k: 64}
configs: {block_m: [32], block_n: [32], block_k: [32], group_m: [1], num_warps: [4], num_stages: [3]}
"""
ROWS: list[tuple[str, float]] = []


def mark(what: str, since: float) -> float:
    now = time.perf_counter()
    ROWS.append((what, now - since))
    print(f"{now - T0:6.2f} s  {what} ({now - since:.2f} s)", flush=True)
    return now


def phases(spec_path: str, gpus: int) -> None:
    t = T0
    from farm import cluster, gpu_wait
    from farm.plan import check_variants
    from farm.spec import load_spec

    spec = load_spec(path=spec_path)
    check_variants(spec)
    t = mark(f"driver imports and spec (torch imported: {'torch' in sys.modules})", t)
    import ray

    t = mark("import ray", t)
    # A new local Ray, as cluster.connect starts one (it would join a head running here).
    ray.init(num_gpus=gpus or 1, include_dashboard=False, logging_level=logging.WARNING, log_to_driver=False)
    t = mark("ray.init (a new local Ray)", t)
    created = t
    workers = cluster.start_workers(
        ray, [], backend="auto", compile_threads=8, workers=1, max_restarts=0, inflight_per_worker=2
    )
    t = mark("worker created (asynchronous)", t)
    from db.engine import make_engine
    from db.schema import ensure_current
    from farm import driver  # noqa: F401

    with tempfile.TemporaryDirectory() as folder:
        ensure_current(make_engine(str(Path(folder) / "probe.db")), create=True)
    t = mark("driver's database modules, database created (while the worker starts)", t)
    gpu_wait.await_workers(ray, workers)
    t = mark("worker up", t)
    ROWS.append(("  worker: created to up", time.perf_counter() - created))
    cluster.stop_workers(ray, workers)

    @ray.remote(num_gpus=1, num_cpus=0)
    class Parts:
        """The worker's own start-up, part by part, in a fresh worker process."""

        def times(self, interpreter: bool) -> list[tuple[str, float]]:
            os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="probe-triton-")  # empty: compiles
            out, t = [], time.perf_counter()
            import torch

            out.append(("  worker: import torch", time.perf_counter() - t))
            t = time.perf_counter()
            if interpreter:
                os.environ["TRITON_INTERPRET"] = "1"
            else:
                torch.zeros(1, device="cuda")
                out.append(("  worker: CUDA context", time.perf_counter() - t))
            t = time.perf_counter()
            import farm.compile
            import farm.gpu  # noqa: F401

            out.append(("  worker: farm.gpu, farm.compile (Triton)", time.perf_counter() - t))
            t = time.perf_counter()
            from kernels import MatmulConfig, get_variant

            launch = get_variant("grouped").launch  # imports kernels/grouped.py
            out.append(("  worker: a variant's module", time.perf_counter() - t))
            if interpreter:
                return out
            # The first compile in a process pays Triton's backend set-up once; the second config
            # shows what a compile alone costs (an empty cache of its own, set above).
            a = torch.randn(2048, 2048, device="cuda", dtype=torch.bfloat16)
            b = torch.randn(2048, 2048, device="cuda", dtype=torch.bfloat16)
            for label, cfg in (
                ("first compile and launch (empty cache)", MatmulConfig(128, 128, 64, 8, 1, 8, 3)),
                ("another config's compile and launch", MatmulConfig(64, 128, 64, 8, 1, 4, 4)),
            ):
                t = time.perf_counter()
                launch(a, b, cfg)
                torch.cuda.synchronize()
                out.append((f"  worker: {label}", time.perf_counter() - t))
            # farm.clock times kernels with torch.profiler (CUPTI): its first session in a process
            # may carry a set-up cost that every worker's first timed point pays.
            from torch.profiler import ProfilerActivity, profile

            for label in ("first torch.profiler session", "second torch.profiler session"):
                t = time.perf_counter()
                with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                    launch(a, b, MatmulConfig(128, 128, 64, 8, 1, 8, 3))
                    torch.cuda.synchronize()
                prof.events()
                out.append((f"  worker: {label} (one launch)", time.perf_counter() - t))
            return out

    t = time.perf_counter()
    parts = ray.get(Parts.remote().times.remote(gpus == 0))
    ROWS.extend(parts)
    mark("  a fresh actor up and its parts timed", t)
    ray.shutdown()


def first_point(
    spec_path: str, folder: Path, env: dict, db: Path | None = None, extra: list[str] = ()
) -> tuple[float, float]:
    """(command start to first stored point, whole command) of one `farm sweep`, in seconds; the
    Triton cache is the folder's (empty the first time: the kernel compiles)."""
    db = db or folder / "startup.db"
    env = {**env, "TRITON_CACHE_DIR": str(folder / "triton-cache")}
    command = [sys.executable, "-m", "cli", "sweep", "--spec", spec_path, "--db", str(db)]
    command += ["--workers", "1", "--no-progress", *extra]
    start, wall_start = time.monotonic(), datetime.now(UTC)
    done = subprocess.run(command, env=env, cwd=REPO, capture_output=True, text=True)
    command_s = time.monotonic() - start
    if done.returncode != 0:
        raise RuntimeError(f"farm sweep exited {done.returncode}:\n{done.stderr[-2000:]}")
    with sqlite3.connect(db) as conn:
        (first,) = conn.execute("SELECT MIN(created_at) FROM measurements").fetchone()
    when = datetime.fromisoformat(first)
    when = when if when.tzinfo else when.replace(tzinfo=UTC)
    return (when - wall_start).total_seconds(), command_s


def commands(spec_path: str, gpus: int, folder: Path) -> None:
    from tools.ports import free_port, stop_group  # the checkout is on sys.path by now (main)

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    # RAY_TMPDIR of its own: no head running on this node is found, the command starts its Ray.
    own_tmp = tempfile.mkdtemp(prefix="ray-", dir="/tmp")  # socket paths stay under 108 bytes
    first, total = first_point(spec_path, Path(tempfile.mkdtemp(dir=folder)), {**env, "RAY_TMPDIR": own_tmp})
    shutil.rmtree(own_tmp, ignore_errors=True)
    ROWS.append(("farm sweep, a new local Ray: first point", first))
    ROWS.append(("farm sweep, a new local Ray: whole command", total))
    print(f"new local Ray: first point {first:.2f} s, command {total:.2f} s", flush=True)

    # A head of its own: its temp dir, port and token (Ray 2.60 turns token auth on for a head).
    temp_dir = Path(tempfile.mkdtemp(prefix="ray-", dir="/tmp"))  # socket paths stay under 108 bytes
    token = temp_dir / "auth_token"
    token.write_text(secrets.token_hex(32))
    head_env = {
        **env,
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN_PATH": str(token),
        "RAY_TMPDIR": str(temp_dir),
    }
    port = free_port()
    ray_cli = Path(sys.executable).parent / "ray"  # a venv's console script; else Ray's module
    ray_cli = [str(ray_cli)] if ray_cli.exists() else [sys.executable, "-m", "ray.scripts.scripts"]
    head = [*ray_cli, "start", "--head", "--block", f"--port={port}", "--include-dashboard=false"]
    head += [f"--temp-dir={temp_dir}/ray"] + (["--num-gpus=1"] if gpus == 0 else [])
    t = time.perf_counter()
    proc = subprocess.Popen(
        head, env=head_env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        address = f"127.0.0.1:{port}"
        while not (temp_dir / "ray" / "ray_current_cluster").exists() and time.perf_counter() - t < 120:
            if proc.poll() is not None:
                raise RuntimeError("ray start --head exited")
            time.sleep(0.2)
        ROWS.append(("ray start --head (once per node)", time.perf_counter() - t))
        run = Path(tempfile.mkdtemp(dir=folder))
        for cache in ("empty", "warm"):  # warm: the first run's kernels are in the Triton cache
            db = run / f"{cache}.db"  # a database of its own: the point is measured again
            first, total = first_point(spec_path, run, {**head_env, "RAY_ADDRESS": address}, db)
            ROWS.append((f"farm sweep joining the head, {cache} Triton cache: first point", first))
            ROWS.append((f"farm sweep joining the head, {cache} Triton cache: whole command", total))
            print(f"joined head, {cache} cache: first point {first:.2f} s, command {total:.2f} s", flush=True)
        kept_workers(spec_path, run, {**head_env, "RAY_ADDRESS": address})
    finally:
        stop_group(proc, 5)  # the head's graceful stop takes long
        shutil.rmtree(temp_dir, ignore_errors=True)


def kept_workers(spec_path: str, run: Path, env: dict) -> None:
    """`--keep-workers` on the running head: a first sweep leaves its worker running; the next ones
    take it over, with the same kernel (in the worker's memory) and with one not compiled yet."""
    import yaml

    spec = yaml.safe_load(Path(spec_path).read_text())
    warps = spec["configs"]["num_warps"]
    spec["configs"]["num_warps"] = [max(1, w // 2) for w in warps]  # another kernel: compiled anew
    new_kernel = run / "new-kernel.yaml"
    new_kernel.write_text(yaml.safe_dump(spec))
    keep = ["--keep-workers"]
    try:
        for what, path in (
            ("first, leaving its worker", spec_path),
            ("again, the kept worker, same kernel", spec_path),
            ("again, the kept worker, a new kernel", str(new_kernel)),
        ):
            db = run / f"kept-{len(ROWS)}.db"
            first, total = first_point(path, run, env, db, extra=keep)
            ROWS.append((f"farm sweep --keep-workers, {what}: first point", first))
            ROWS.append((f"farm sweep --keep-workers, {what}: whole command", total))
            print(f"--keep-workers, {what}: first point {first:.2f} s, command {total:.2f} s", flush=True)
    finally:
        subprocess.run([sys.executable, "-m", "cli", "workers", "--stop"], env=env, cwd=REPO, check=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--spec", help="a one-point spec (default: benchmarks/startup.yaml, a 64^3 one without a GPU)"
    )
    parser.add_argument("--parts", nargs="+", choices=("phases", "commands"), default=["phases", "commands"])
    parser.add_argument("--out", default=os.environ.get("OUT"), help="write startup_probe.csv here")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    # The workers import farm from this checkout (Ray's worker processes inherit the environment).
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    os.environ.pop("RAY_ADDRESS", None)
    from farm.ray_connect import nvml_gpu_count, visible_gpus

    gpus = visible_gpus(nvml_gpu_count(), os.environ.get("CUDA_VISIBLE_DEVICES"))
    folder = Path(tempfile.mkdtemp(prefix="startup-probe-"))
    spec = args.spec
    if spec is None and gpus == 0:
        spec = str(folder / "startup-cpu.yaml")
        Path(spec).write_text(CPU_SPEC)
    spec = spec or str(REPO / "benchmarks" / "startup.yaml")
    if "phases" in args.parts:
        phases(spec, gpus)
    if "commands" in args.parts:
        commands(spec, gpus, folder)
    shutil.rmtree(folder, ignore_errors=True)
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        with open(Path(args.out) / "startup_probe.csv", "w") as fh:
            fh.write("what,seconds\n" + "".join(f'"{w.strip()}",{s:.2f}\n' for w, s in ROWS))
    print(
        f"\n{'start-up of farm sweep (' + ('GPU' if gpus else 'CPU, interpreter') + ')':62s} {'seconds':>8s}"
    )
    for what, seconds in ROWS:
        print(f"{what:62s} {seconds:8.2f}")


if __name__ == "__main__":
    main()
