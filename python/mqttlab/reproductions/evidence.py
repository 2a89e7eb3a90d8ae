"""A reproduction page's evidence: the compact part of the results it was made from, committed
beside the page (docs/reproductions/<page>/evidence.tar.xz), so that the page can be made again
and any number on it audited without re-running the suite.

What goes in, per results directory: the manifest, the scenario, plan, result and summary, the
per-second series (the time-series figures) and the latency histogram the comparison pools (e2e
or rtt); nothing else (no other histograms, no captures, no logs). Per source directory: the
suite's copy of its file, its command log and its skipped brokers; for seed 000's `smc paper`
directory its tables, paper.json and the learned coefficients. Runs that the comparison left out
go in too, so the page made again leaves them out for the same reason.

The archive is deterministic (sorted members, no times or owners, fixed xz preset), so the same
results give the same bytes: a page remade from its evidence rewrites the evidence unchanged.
`mqttlab compare EVIDENCE --page PAGE` reads it back (unpacked into a temporary directory)."""

from __future__ import annotations

import contextlib
import io
import json
import tarfile
import tempfile
from pathlib import Path
from typing import Iterator

from mqttlab.analysis.compare import SKIPPED_BROKERS
from mqttlab.analysis.runs import find_result_directories
from mqttlab.results import INVOCATIONS

EVIDENCE = "evidence.tar.xz"
INDEX = "evidence.json"  # the archive's own list of its source directories
RUN_FILES = ("manifest.json", "scenario.yaml", "plan.json", "result.json", "summary.json", "series.csv",
             "histograms/e2e.hdr", "histograms/rtt.hdr")
SOURCE_FILES = ("suite.yaml", INVOCATIONS, SKIPPED_BROKERS)
SMC_PATTERNS = ("paper.json", "*.csv", "*/learn/coefficients.csv")


class EvidenceError(Exception):
    """An evidence archive that cannot be read; the message names it."""


def is_evidence(path: Path) -> bool:
    return Path(path).is_file() and Path(path).name.endswith(".tar.xz")


def evidence_files(sources: list[Path]) -> dict[str, Path]:
    """Archive name -> file, for every source directory (as `s0/...`, `s1/...`)."""
    from mqttlab.reproductions.paper_figures import is_smc_directory

    files: dict[str, Path] = {}
    for index, source in enumerate(Path(s) for s in sources):
        prefix = f"s{index}"
        if is_smc_directory(source):
            for pattern in (*SMC_PATTERNS, INVOCATIONS):
                files.update({f"{prefix}/{p.relative_to(source).as_posix()}": p for p in source.glob(pattern) if p.is_file()})
            continue
        files.update({f"{prefix}/{name}": source / name for name in SOURCE_FILES if (source / name).is_file()})
        for run in find_result_directories([source]):
            where = run.relative_to(source).as_posix()
            for name in RUN_FILES:
                if (run / name).is_file():
                    files[f"{prefix}/{where}/{name}".replace("/./", "/")] = run / name
    return files


def write_evidence(sources: list[Path], archive: Path) -> Path:
    files = evidence_files(sources)
    index = json.dumps({"sources": [f"s{i}" for i in range(len(sources))]}, indent=1).encode()
    archive.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:xz", preset=9) as tar:
        for name, data in [(INDEX, index), *((name, files[name].read_bytes()) for name in sorted(files))]:
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            tar.addfile(info, io.BytesIO(data))
    if not archive.is_file() or archive.read_bytes() != buffer.getvalue():
        archive.write_bytes(buffer.getvalue())
    return archive


@contextlib.contextmanager
def opened(archive: Path) -> Iterator[list[Path]]:
    """The source directories of the evidence, unpacked into a temporary directory for the block."""
    with tempfile.TemporaryDirectory(prefix="mqttlab-evidence-") as scratch:
        root = Path(scratch)
        try:
            with tarfile.open(archive, mode="r:xz") as tar:
                tar.extractall(root, filter="data")
            sources = json.loads((root / INDEX).read_text(encoding="utf-8"))["sources"]
        except (OSError, tarfile.TarError, ValueError, KeyError) as error:
            raise EvidenceError(f"{archive}: not a page's evidence archive ({error}); give the {EVIDENCE} that "
                                "`mqttlab compare … --page` wrote beside a page") from None
        yield [root / name for name in sources]
