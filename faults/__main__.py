"""`python -m faults [--short] [--runs N] [--network] [CASE ...]`: runs fault cases on real processes and reports each.

`--network` runs the network cases instead (faults/partitions.py: every part a
host of its own in a network namespace; needs root).

Exit status 1 when any case failed. Postgres is started once for the suite
(each case gets its own database; the Postgres-restart case its own server);
everything else is started per case under a temporary folder.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
import time
from pathlib import Path

from feedfabric.ops import devstack

from faults.cases import CASES, Outcome, Params


async def run(names: list[str], runs: int, short: bool, root: Path, pg_server: str, keep: bool) -> list[Outcome]:
    outcomes: list[Outcome] = []
    for run_no in range(1, runs + 1):
        run_root = root / f"run-{run_no}" if keep else root  # kept runs keep their own logs
        run_root.mkdir(exist_ok=True)
        for name in names:
            try:
                outcome = await CASES[name](Params(short, run_root, pg_server))
            except Exception as exc:  # noqa: BLE001 - a case that cannot finish is a failure, reported
                from faults.checker import Verdict

                verdict = Verdict(verify_status=-1, verify_output=f"{type(exc).__name__}: {exc}")
                verdict.lost["case did not finish"] = 1
                outcome = Outcome(name, f"did not finish: {type(exc).__name__}: {exc}", 0.0, verdict, 0.0)
            print(f"run {run_no}/{runs} " + outcome.report(), flush=True)
            outcomes.append(outcome)
    return outcomes


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m faults", description=__doc__)
    parser.add_argument("cases", nargs="*", help=f"cases to run (default all): {', '.join(CASES)}")
    parser.add_argument("--short", action="store_true", help="the CI form: shorter loads, 20s of churn")
    parser.add_argument("--runs", type=int, default=1, help="run every case this many times in a row")
    parser.add_argument("--keep", action="store_true", help="keep the work folder (logs, effect logs)")
    parser.add_argument("--network", action="store_true", help="the network cases (faults/partitions.py), as root")
    args = parser.parse_args()
    if args.network:
        network_main(args.cases, args.runs, args.short, args.keep)
        return
    unknown = [c for c in args.cases if c not in CASES]
    if unknown:
        sys.exit(f"unknown case {', '.join(unknown)}; known: {', '.join(CASES)}")
    root = Path(tempfile.mkdtemp(prefix="feedfabric-faults-"))
    started = time.monotonic()
    pg = devstack.start_postgres(root / "shared-pg", database="postgres")
    try:
        outcomes = asyncio.run(run(args.cases or list(CASES), args.runs, args.short, root, pg.url, args.keep))
    finally:
        pg.stop()
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
        else:
            print(f"work folder kept: {root}")
    failed = [o for o in outcomes if not o.ok]
    print(f"\n{len(outcomes) - len(failed)}/{len(outcomes)} case runs passed in {time.monotonic() - started:.0f}s")
    sys.exit(1 if failed else 0)


def network_main(names: list[str], runs: int, short: bool, keep: bool) -> None:
    from faults.network import NetworkUnavailable, require_root
    from faults.partitions import CASES as NETWORK_CASES
    from faults.partitions import run_cases

    unknown = [c for c in names if c not in NETWORK_CASES]
    if unknown:
        sys.exit(f"unknown network case {', '.join(unknown)}; known: {', '.join(NETWORK_CASES)}")
    try:
        require_root()
    except NetworkUnavailable as error:
        sys.exit(str(error))
    root = Path(tempfile.mkdtemp(prefix="feedfabric-net-faults-"))
    started = time.monotonic()
    try:
        results = asyncio.run(run_cases(names or list(NETWORK_CASES), runs, short, root))
    finally:
        if not keep:
            shutil.rmtree(root, ignore_errors=True)
        else:
            print(f"work folder kept: {root}")
    failed = [r for r in results if not r.ok]
    print(
        f"\n{len(results) - len(failed)}/{len(results)} network case runs passed in {time.monotonic() - started:.0f}s"
    )
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
