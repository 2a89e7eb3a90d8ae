"""Upstream source trees of the brokers and gateways that no package registry here offers (NanoMQ,
RSMB, the Paho MQTT-SN gateway), for their launchers to build from.

Each is taken from an unmodified snapshot tarball in a local sources directory when one holds it
(`$MQTTLAB_SOURCES`, else `../shared/sources` beside the repository), checked against the sha256
pinned here; otherwise from the upstream repository with git, checked by commit id. The tree is
unpacked into a fresh directory that the caller builds in."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path

from mqttlab.brokers.base import BrokerError, BrokerUnavailable, Launcher, apt_install, data_dir

SOURCES_ENV = "MQTTLAB_SOURCES"
MBEDTLS_HEADER = Path("/usr/include/mbedtls/ssl.h")
#: a clone that has not finished by then is not going to: the machine is offline or GitHub blocked
CLONE_TIMEOUT_S = 120.0


def fetched_from(source: UpstreamSource) -> str:
    """Where installing takes `source` from, as a launcher's `how_to_get` says it."""
    return f"{source.tarball} in ${SOURCES_ENV} or ../shared/sources, else from GitHub"


class SourceUnavailable(BrokerUnavailable):
    """Neither the local tarball nor the upstream repository can be had here."""


@dataclass(frozen=True)
class UpstreamSource:
    """One pinned upstream snapshot."""

    tarball: str
    sha256: str
    repository: str
    #: what git checks out: a tag or a commit id
    ref: str
    #: (path inside the tree, commit id prefix) that the fetched tree must be at
    commits: tuple[tuple[str, str], ...]
    submodules: bool = False

    @property
    def top(self) -> str:
        """The tarball's top directory."""
        return self.tarball.removesuffix(".tar.gz")


NANOMQ = UpstreamSource(
    tarball="nanomq-0.25.3.tar.gz",
    sha256="ce91546ebb450bdf0073e4983a74ea4287472a923734fe842c7a2e371f9e178d",
    repository="https://github.com/nanomq/nanomq.git",
    ref="0.25.3",
    commits=((".", "6fd7e02c435e"), ("nng", "599bd9671da0")),
    submodules=True,
)
RSMB = UpstreamSource(
    tarball="rsmb-36fd4ba.tar.gz",
    sha256="1be9bf64e9bdf9b7d9c280d30f8771c3d38e540f0ea9266438ef9ee76693fd72",
    repository="https://github.com/eclipse/mosquitto.rsmb.git",
    ref="36fd4ba9433d",
    commits=((".", "36fd4ba9433d"),),
)
PAHO_GATEWAY = UpstreamSource(
    tarball="paho.mqtt-sn.embedded-c-07a9512.tar.gz",
    sha256="5ff87df20f3db28e90104f45387fd4db4f6b40e7e7a0edccb797d1d743170467",
    repository="https://github.com/eclipse/paho.mqtt-sn.embedded-c.git",
    ref="07a95121fc40",
    commits=((".", "07a95121fc40"),),
)


def provenance(source: UpstreamSource, built: str) -> dict[str, object]:
    """What a binary built from `source` is, for a run's manifest: how it was built and the commit of
    each tree. `unpack` checks a tarball by its sha256 and a clone by these commits, so a binary
    built here is of them."""
    return {"source": built, "repository": source.repository, "ref": source.ref, "tarball_sha256": source.sha256,
            "commits": dict(source.commits)}


def sources_dir() -> Path:
    """The local directory holding the snapshot tarballs."""
    given = os.environ.get(SOURCES_ENV)
    if given:
        return Path(given).expanduser()
    return Path(__file__).resolve().parents[3].parent / "shared" / "sources"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def unpack(source: UpstreamSource, into: Path) -> Path:
    """The source tree of `source` in a fresh `into/<top>`, from the local tarball or, without
    one, from its upstream repository. Raises BrokerError in one line saying what to do."""
    if into.exists():
        shutil.rmtree(into)
    into.mkdir(parents=True)
    tarball = sources_dir() / source.tarball
    if tarball.is_file():
        actual = _sha256(tarball)
        if actual != source.sha256:
            raise BrokerError(f"{tarball} has sha256 {actual}, not the pinned {source.sha256}: "
                              "replace it with the upstream snapshot")
        with tarfile.open(tarball) as archive:
            archive.extractall(into, filter="data")
        tree = into / source.top
        if not tree.is_dir():
            raise BrokerError(f"{tarball} does not hold {source.top}/")
        return tree
    return _clone(source, into / source.top, tarball)


def _git(args: list[str], cwd: Path | None, what: str) -> str:
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0"}
    try:
        done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, env=env,
                              timeout=CLONE_TIMEOUT_S, stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        raise BrokerError(f"{what}: git is not installed (apt-get install git)") from None
    except subprocess.TimeoutExpired:
        raise BrokerError(f"{what}: git {args[0]} took over {CLONE_TIMEOUT_S:.0f} s") from None
    if done.returncode != 0:
        lines = [line for line in (done.stderr or done.stdout).splitlines() if line.strip()]
        raise BrokerError(f"{what}: {lines[-1].strip() if lines else f'git {args[0]} failed'}")
    return done.stdout.strip()


def _clone(source: UpstreamSource, tree: Path, tarball: Path) -> Path:
    what = (f"no {source.tarball} in {tarball.parent} (set {SOURCES_ENV} to a directory holding it) "
            f"and fetching {source.repository} at {source.ref} failed")
    try:
        _git(["clone", "--quiet", source.repository, str(tree)], None, what)
        _git(["checkout", "--quiet", source.ref], tree, what)
        if source.submodules:
            _git(["submodule", "update", "--init", "--quiet"], tree, what)
    except BrokerError as error:
        raise SourceUnavailable(str(error)) from None
    for path, commit in source.commits:
        head = _git(["rev-parse", "HEAD"], tree / path, what)
        if not head.startswith(commit):
            raise BrokerError(f"{source.repository} at {source.ref}: {path} is at {head[:12]}, not the pinned {commit}")
    return tree


def install_build_tools(*, cmake: bool = True, mbedtls: bool = False, cxx: bool = False) -> None:
    """Debian's build tools a source build needs, installed with apt only when missing."""
    wanted = []
    if cmake and shutil.which("cmake") is None:
        wanted.append("cmake")
    if shutil.which("make") is None or shutil.which("cc") is None:
        wanted.append("build-essential")
    if cxx and shutil.which("c++") is None:
        wanted.append("g++")
    if mbedtls and not MBEDTLS_HEADER.is_file():
        wanted.append("libmbedtls-dev")
    if wanted:
        apt_install(*wanted)


def keep_built(built: Path, target: Path, *, source_tree: Path | None = None) -> None:
    """Puts a finished build's binary in place: copied beside `target`, then renamed, so that an
    interrupted build is never taken for an install; the source tree is removed afterwards."""
    if not built.is_file():
        raise BrokerError(f"the build finished without {built}")
    partial = target.with_name(target.name + ".partial")
    shutil.copy2(built, partial)
    partial.replace(target)
    if source_tree is not None:
        shutil.rmtree(source_tree, ignore_errors=True)


class SourceBuiltLauncher(Launcher):
    """A broker built from a pinned upstream source into mqttlab's broker folder
    (`data_dir()/NAME/VERSION/BINARY`), found there afterwards."""

    source_version: str = ""
    binary: str = ""
    #: the pinned snapshot it is built from
    upstream: UpstreamSource | None = None

    def build_record(self) -> dict[str, object]:
        return provenance(self.upstream, self.source) if self.upstream is not None else super().build_record()

    @property
    def home(self) -> Path:
        return data_dir() / self.name / self.source_version

    def executable(self) -> Path:
        return self.home / self.binary

    def find(self) -> bool:
        return self.executable().is_file()

    def version(self) -> str | None:
        # The version recorded is the pinned upstream one that was built (the binaries print it
        # only in their log or usage text).
        return f"{self.name} {self.source_version}" if self.find() else None
