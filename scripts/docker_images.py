#!/usr/bin/env python3
"""Build pyrmq's container images with no image registry: ``make docker-images``.

1. ``pyrmq-base:bookworm``: Debian bookworm from Debian's packages (``debootstrap`` into a temporary
   folder, then ``docker import``). It trusts the certificate authorities the host added locally
   (``/usr/local/share/ca-certificates``, Debian's place for them: a site's TLS-inspecting proxy
   or an enterprise CA), so pip and apt inside reach what the host reaches. Its tag carries a
   digest of the recipe (suite, variant, packages, mirror, those CA files), so a later build finds
   it and reuses it; change the recipe and a new base is made.
2. ``pyrmq:latest``: the NameServer/Broker image (``Dockerfile``) on that base.
3. ``pyrmq-jdk:latest``: a JDK 17 runtime (``docker/jdk.Dockerfile``) for the Java scenario runner
   and the Apache RocketMQ reference servers in the compat suite.

With a registry the same Dockerfiles build on ``python:3.11-slim`` / ``debian:bookworm-slim``
(their default ``BASE``). Needs root (debootstrap) and a Docker engine (``DOCKER_HOST``, or the
private one ``scripts/dockerd-private`` starts). Standard library only: it runs before the
virtualenv exists.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BASE_REPO = "pyrmq-base"
RECIPE = {
    "suite": "bookworm",
    "variant": "minbase",
    # passwd: useradd for the unprivileged user; ca-certificates: pip and apt over https
    "include": ["ca-certificates", "passwd"],
    "mirror": os.environ.get("PYRMQ_DEBIAN_MIRROR", "http://deb.debian.org/debian"),
    "version": 1,   # bump when the steps below change
}


def docker(*args: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", *args], check=True, **kwargs)


def image_exists(tag: str) -> bool:
    return subprocess.run(["docker", "image", "inspect", tag], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL).returncode == 0


LOCAL_CA_DIR = Path("/usr/local/share/ca-certificates")


def local_cas() -> dict[str, str]:
    """The host's locally added CA certificates: name -> sha256 of the file."""
    if not LOCAL_CA_DIR.is_dir():
        return {}
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(LOCAL_CA_DIR.glob("*.crt"))}


def base_tag() -> str:
    recipe = {**RECIPE, "local_cas": local_cas()}
    digest = hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:12]
    return f"{BASE_REPO}:{RECIPE['suite']}-{digest}"


def build_base() -> str:
    """The base image's tag, built unless an image of the same recipe is there."""
    tag = base_tag()
    if image_exists(tag):
        print(f"base image {tag}: cached")
    else:
        if shutil.which("debootstrap") is None:
            sys.exit("docker_images: debootstrap is missing (apt-get install debootstrap)")
        with tempfile.TemporaryDirectory(prefix="pyrmq-rootfs-", dir="/var/tmp") as tmp:
            rootfs = Path(tmp) / "rootfs"
            print(f"base image {tag}: debootstrap {RECIPE['suite']} ({RECIPE['variant']})", flush=True)
            subprocess.run(["debootstrap", f"--variant={RECIPE['variant']}", f"--include={','.join(RECIPE['include'])}",
                            RECIPE["suite"], str(rootfs), RECIPE["mirror"]], check=True, stdout=subprocess.DEVNULL)
            cas = local_cas()
            if cas:
                target = rootfs / LOCAL_CA_DIR.relative_to("/")
                target.mkdir(parents=True, exist_ok=True)
                for name in cas:
                    shutil.copyfile(LOCAL_CA_DIR / name, target / name)
                subprocess.run(["chroot", str(rootfs), "update-ca-certificates"], check=True, stdout=subprocess.DEVNULL)
            # Nothing of the build host's apt state in the image: lists are fetched again when used.
            for cache in ("var/lib/apt/lists", "var/cache/apt/archives"):
                for entry in (rootfs / cache).glob("*"):
                    if entry.is_file():
                        entry.unlink()
            tar = subprocess.Popen(["tar", "--numeric-owner", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
            docker("import", "--change", "CMD [\"/bin/bash\"]", "-", tag, stdin=tar.stdout, stdout=subprocess.DEVNULL)
            tar.stdout.close()
            if tar.wait() != 0:
                sys.exit("docker_images: tar of the root filesystem failed")
    docker("tag", tag, f"{BASE_REPO}:{RECIPE['suite']}")
    return tag


def build(tag: str, dockerfile: Path, context: Path, base: str) -> None:
    print(f"image {tag} on {base}", flush=True)
    docker("build", "--quiet", "--build-arg", f"BASE={base}", "-f", str(dockerfile), "-t", tag, str(context),
           stdout=subprocess.DEVNULL)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=("base", "pyrmq", "jdk"), action="append",
                        help="build only these (default: all three)")
    args = parser.parse_args(argv)
    wanted = set(args.only or ("base", "pyrmq", "jdk"))
    base = build_base()
    if "pyrmq" in wanted:
        build("pyrmq:latest", REPO / "Dockerfile", REPO, base)
    if "jdk" in wanted:
        build("pyrmq-jdk:latest", REPO / "docker" / "jdk.Dockerfile", REPO / "docker", base)
    return 0


if __name__ == "__main__":
    sys.exit(main())
