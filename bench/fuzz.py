"""Coverage-guided fuzzing of pyrmq's decoders and recovery with atheris (libFuzzer).

    .venv/bin/python bench/fuzz.py [--inputs 1000000] [--targets frame,fastjson,...] [--seed 1]
                                   [--jobs 2] [--findings DIR] [--json FILE]

Every target of tests/fuzz/targets.py (and the store recovery of tests/fuzz/store_target.py) runs
in its own worker process: pyrmq's modules are imported under atheris' coverage instrumentation,
the corpus starts from the target's seeds (the captured fixtures), half the mutations are
libFuzzer's and half the target's own structured ones (tests/fuzz/mutate.py), and every input is
held to tests/fuzz/oracle.py's property.  A violation does not stop the run: it is written to the
findings directory (``<target>-<digest>.bin`` and a ``.txt`` saying what failed) and counted by
signature (the kind, the exception type, the innermost pyrmq frame).  --inputs is split over the
targets by weight (the store target costs ~10 ms an input, the codec ones ~0.1-2 ms).

It prints one line per target and a total (inputs, seconds, inputs/s, distinct findings); the
exit status is 1 if anything was found.  A benchmark, not a test: tests/fuzz/test_atheris.py runs
a short seeded version of it in CI.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

# Share of --inputs per target (normalised over the targets chosen).
WEIGHTS = {"frame": 14, "json_header": 12, "rocketmq_header": 10, "message": 10, "batch": 6, "properties": 6,
           "offset_msg_id": 2, "fastjson": 12, "admin_body": 10, "commit_log_walk": 10, "store_recovery": 3,
           "ha_frames": 6}

_DONE = re.compile(r"Done (\d+) runs in (\d+) second")


def plan(total: int, names: list[str]) -> dict[str, int]:
    weight = sum(WEIGHTS[n] for n in names)
    runs = {n: max(1, total * WEIGHTS[n] // weight) for n in names}
    runs[names[0]] += total - sum(runs.values())
    return runs


def run_worker(name: str, runs: int, seed: int, findings: Path, log_dir: Path) -> dict[str, object]:
    started = time.monotonic()
    log_path = log_dir / f"{name}.log"
    # the corpus is made and removed here: libFuzzer ends the worker with exit(), past any cleanup of its own
    with open(log_path, "wb") as log, tempfile.TemporaryDirectory(prefix=f"pyrmq-fuzz-corpus-{name}-") as corpus:
        proc = subprocess.run([sys.executable, __file__, "--worker", name, "--runs", str(runs), "--seed", str(seed),
                               "--findings", str(findings), "--corpus", corpus], stdout=log, stderr=subprocess.STDOUT,
                              cwd=REPO, env=dict(os.environ, PYTHONHASHSEED=str(seed)))   # same seed, same run
    text = log_path.read_text(errors="replace")
    done = _DONE.search(text)
    signatures = sorted({p.read_text().splitlines()[0] for p in findings.glob(f"{name}-*.txt")})
    # what libFuzzer itself caught: a hard crash, an input over -timeout, memory over -rss_limit_mb
    crashes = sorted(p.name for kind in ("crash", "timeout", "oom") for p in findings.glob(f"{name}-{kind}-*"))
    return {"target": name, "runs": int(done.group(1)) if done else None,
            "seconds": round(time.monotonic() - started, 1), "exit": proc.returncode, "findings": signatures,
            "libfuzzer_artifacts": crashes, "log": str(log_path)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--inputs", type=int, default=1_000_000, help="total inputs over all targets")
    parser.add_argument("--targets", default=",".join(WEIGHTS), help="comma-separated target names")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=2, help="workers at a time")
    parser.add_argument("--findings", type=Path, help="where violations are written (default: a temp dir)")
    parser.add_argument("--json", type=Path, help="write the summary here too")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--runs", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--corpus", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.runs, args.seed, args.findings, args.corpus)
        return 0   # not reached: libFuzzer exits the process

    names = [n for n in args.targets.split(",") if n]
    unknown = set(names) - set(WEIGHTS)
    if unknown:
        parser.error(f"unknown targets: {', '.join(sorted(unknown))}")
    findings = args.findings or Path(tempfile.mkdtemp(prefix="pyrmq-fuzz-findings-"))
    findings.mkdir(parents=True, exist_ok=True)
    log_dir = findings / "logs"
    log_dir.mkdir(exist_ok=True)
    runs = plan(args.inputs, names)
    started = time.monotonic()
    with ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(lambda n: run_worker(n, runs[n], args.seed, findings, log_dir), names))
    elapsed = time.monotonic() - started
    print(f"{'target':<18}{'inputs':>10}{'seconds':>9}{'inputs/s':>10}  findings")
    for r in results:
        rate = f"{r['runs'] / r['seconds']:.0f}" if r["runs"] and r["seconds"] else "-"
        print(f"{r['target']:<18}{r['runs'] or '?':>10}{r['seconds']:>9}{rate:>10}  "
              f"{len(r['findings']) + len(r['libfuzzer_artifacts'])}"
              + ("" if r["exit"] == 0 else f" (exit {r['exit']}, see {r['log']})"))
        for signature in (*r["findings"], *r["libfuzzer_artifacts"]):
            print(f"    {signature}")
    total_runs = sum(r["runs"] or 0 for r in results)
    found = sum(len(r["findings"]) + len(r["libfuzzer_artifacts"]) for r in results)
    print(f"{'total':<18}{total_runs:>10}{elapsed:>9.0f}{total_runs / elapsed:>10.0f}  {found}"
          f"   (wall clock, {args.jobs} jobs; findings in {findings})")
    if args.json:
        args.json.write_text(json.dumps({"seed": args.seed, "inputs": total_runs, "seconds": round(elapsed, 1),
                                         "jobs": args.jobs, "targets": results}, indent=2))
    ok = found == 0 and all(r["exit"] == 0 and r["runs"] for r in results)
    if ok and args.findings is None:
        shutil.rmtree(findings, ignore_errors=True)
    return 0 if ok else 1


def worker(name: str, runs: int, seed: int, findings: Path, corpus: Path) -> None:
    """One target under libFuzzer, its corpus growing in ``corpus`` (an empty directory the caller
    removes); never returns."""
    import hashlib
    import random

    import atheris

    with atheris.instrument_imports(include=["pyrmq"]):
        from tests.fuzz.oracle import Violation, check
        from tests.fuzz.targets import all_targets
    target = all_targets()[name]
    seeds = target.seeds()
    for seed_input in seeds:
        (corpus / hashlib.sha1(seed_input).hexdigest()).write_bytes(seed_input[:target.max_len])
    seen: set[str] = set()

    def test_one_input(data: bytes) -> None:
        try:
            check(target, data)
        except Violation as v:
            signature = v.signature()
            if signature not in seen:   # one example per distinct bug is enough
                seen.add(signature)
                stem = findings / f"{name}-{v.digest()}"
                stem.with_suffix(".bin").write_bytes(v.data)
                stem.with_suffix(".txt").write_text(f"{signature}\n{v}\n")
                print(f"FINDING {signature}: {v}", flush=True)

    def custom_mutator(data: bytes, max_size: int, mutation_seed: int) -> bytes:
        if mutation_seed % 2:
            return atheris.Mutate(data, max_size)
        return target.mutate(data, random.Random(mutation_seed), seeds)[:max_size]

    # -reload=0: libFuzzer re-reads the corpus on a timer otherwise, and a seeded run would not repeat
    atheris.Setup([sys.argv[0], f"-runs={runs}", f"-seed={seed}", f"-max_len={target.max_len}", "-timeout=30",
                   "-reload=0", "-rss_limit_mb=4096", f"-artifact_prefix={findings}/{name}-", "-print_final_stats=1",
                   str(corpus)],
                  test_one_input, custom_mutator=custom_mutator)
    atheris.Fuzz()


if __name__ == "__main__":
    sys.exit(main())
