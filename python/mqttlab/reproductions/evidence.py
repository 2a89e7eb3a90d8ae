"""A reproduction page's evidence: the compact part of the results it was made from, committed
beside the page (docs/reproductions/<page>/evidence.tar.xz), so that the page can be made again
and any number on it audited without re-running the suite.

What goes in, per results directory: the manifest, the scenario, plan, result and summary, the
per-second series (the time-series figures), the host's CPU load while it ran (host-load.json,
where the run kept one), the latency histogram the comparison pools (e2e
or rtt) and, for a captured run, the figures its capture gives (capture/figures.json: each MQTT
packet's bytes, the exchanges, the connections, each message's round trip; see
analysis/captures.py) instead of the capture, which is too large to commit; nothing else (no other
histograms, no logs). Per source directory: the
suite's copy of its file, its command log and its skipped brokers; for seed 000's `smc paper`
directory its tables, paper.json and the learned coefficients; for a directory of `mqttlab
capacity` searches, each search's capacity.json, search.json and curve.csv (not its probes). Runs that the comparison left out
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
from typing import Iterator, Optional, Union

from mqttlab.analysis.captures import FIGURES_FILE
from mqttlab.analysis.compare import SKIPPED_BROKERS
from mqttlab.analysis.runs import find_result_directories
from mqttlab.environment.host_load import HOST_LOAD
from mqttlab.results import INVOCATIONS

EVIDENCE = "evidence.tar.xz"
INDEX = "evidence.json"  # the archive's own list of its source directories
CAPTURE_FIGURES = f"capture/{FIGURES_FILE}"  # made from the capture when it is there
# The pooled latency histograms: a run's end-to-end and round-trip ones, and a publishers-only run's
# acknowledgement one when that is what it is compared by (its latency measure, analysis.runs).
ACK_HISTOGRAMS = {"pubcomp": "histograms/pubcomp.hdr", "puback": "histograms/puback.hdr"}
RUN_FILES = ("manifest.json", "scenario.yaml", "plan.json", "result.json", "summary.json", "series.csv", HOST_LOAD,
             "histograms/e2e.hdr", "histograms/rtt.hdr", *ACK_HISTOGRAMS.values(), CAPTURE_FIGURES)
SOURCE_FILES = ("suite.yaml", INVOCATIONS, SKIPPED_BROKERS)
SMC_PATTERNS = ("paper.json", "*.csv", "*/learn/coefficients.csv")


class EvidenceError(Exception):
    """An evidence archive that cannot be read; the message names it."""


def is_evidence(path: Path) -> bool:
    return Path(path).is_file() and Path(path).name.endswith(".tar.xz")


def evidence_files(sources: list[Path]) -> dict[str, Union[Path, bytes]]:
    """Archive name -> file (or its bytes, for what is made here: a capture's figures), for every
    source directory (as `s0/...`, `s1/...`)."""
    from mqttlab.reproductions.capacity_searches import is_capacity_source, search_files
    from mqttlab.reproductions.paper_figures import is_smc_directory

    files: dict[str, Union[Path, bytes]] = {}
    for index, source in enumerate(Path(s) for s in sources):
        prefix = f"s{index}"
        if is_smc_directory(source):
            for pattern in (*SMC_PATTERNS, INVOCATIONS):
                files.update({f"{prefix}/{p.relative_to(source).as_posix()}": p for p in source.glob(pattern) if p.is_file()})
            continue
        files.update({f"{prefix}/{name}": source / name for name in SOURCE_FILES if (source / name).is_file()})
        if is_capacity_source(source):  # its searches' reports and curves, not their probes
            files.update({f"{prefix}/{name}": found for name, found in search_files(source).items()})
            continue
        for run in find_result_directories([source]):
            where = run.relative_to(source).as_posix()
            measured_by = ACK_HISTOGRAMS.get(_latency_measure_of(run) or "")
            for name in RUN_FILES:
                if name in (CAPTURE_FIGURES, *ACK_HISTOGRAMS.values()) and name != measured_by:
                    continue
                if (run / name).is_file():
                    files[f"{prefix}/{where}/{name}".replace("/./", "/")] = run / name
            figures = _capture_figures(run)
            if figures is not None:
                files[f"{prefix}/{where}/{CAPTURE_FIGURES}".replace("/./", "/")] = figures
    return files


def _latency_measure_of(run: Path) -> Optional[str]:
    from mqttlab.analysis.runs import latency_measure

    try:
        return latency_measure(json.loads((run / "summary.json").read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return None


def _capture_figures(run: Path) -> Optional[bytes]:
    """A captured run's figures as figures.json holds them, from its capture or as kept before."""
    from mqttlab.analysis.captures import CaptureAnalysisError, figures_json
    from mqttlab.netem.capture import CAPTURE_FILE

    if not ((run / "capture" / CAPTURE_FILE).is_file() or (run / CAPTURE_FIGURES).is_file()):
        return None
    try:
        return figures_json(run).encode()
    except CaptureAnalysisError:
        return None  # a capture without its manifest section: nothing a page can read from it either


def write_evidence(sources: list[Path], archive: Path) -> Path:
    files = evidence_files(sources)
    index = json.dumps({"sources": [f"s{i}" for i in range(len(sources))]}, indent=1).encode()
    archive.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:xz", preset=9) as tar:
        members = [(name, found if isinstance(found, bytes) else found.read_bytes()) for name, found in sorted(files.items())]
        for name, data in [(INDEX, index), *members]:
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
