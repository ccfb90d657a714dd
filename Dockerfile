# pyrmq: the NameServer and Broker image, standalone by default (docker run -p 9876:9876 -p 10911:10911 pyrmq).
# `make docker-images` builds it on a base made from Debian's packages, no image registry needed
# (scripts/docker_images.py); with a registry, `docker build -t pyrmq .` starts from python:3.11-slim.
ARG BASE=python:3.11-slim
FROM ${BASE}

# A base without Python (the debootstrapped Debian) gets Debian's own, 3.11 in bookworm.
RUN if ! python3 -c "import venv, ensurepip" 2>/dev/null; then \
      apt-get update -qq \
      && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3 python3-venv \
      && rm -rf /var/lib/apt/lists/*; \
    fi

# The store and the NameServer's KV file live under /data; the servers run as an unprivileged user.
RUN useradd --system --uid 10001 --home-dir /data rocketmq && mkdir -p /data && chown rocketmq /data

WORKDIR /opt/pyrmq
COPY pyproject.toml README.md ./
COPY pyrmq ./pyrmq
# pip trusts the system's CA bundle (the base's, which has any CA the site added), not only its own.
# The C extensions (the send path's pyrmq/codec/_native.c, the group commit's pyrmq/store/_syncer.c)
# need a compiler and Python's headers for the install: what is installed for it is purged in the same layer (every package that was not there
# before, and the downloaded .debs), so the image keeps the built module only.
RUN build_deps="" \
 && if ! command -v gcc >/dev/null; then build_deps="gcc libc6-dev"; fi \
 && if ! python3 -c "import os, sys, sysconfig; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()['include'], 'Python.h')))"; then \
      build_deps="$build_deps python3-dev"; fi \
 && dpkg-query -W -f='${Package}\n' | sort > /tmp/packages-before \
 && if [ -n "$build_deps" ]; then \
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $build_deps; fi \
 && python3 -m venv /opt/pyrmq/venv \
 && PIP_CERT=/etc/ssl/certs/ca-certificates.crt /opt/pyrmq/venv/bin/pip install --no-cache-dir -q . \
 && (cd / && /opt/pyrmq/venv/bin/python -c "import pyrmq.codec._native, pyrmq.store._syncer") \
 && dpkg-query -W -f='${Package}\n' | sort | comm -13 /tmp/packages-before - > /tmp/packages-added \
 && if [ -s /tmp/packages-added ]; then xargs apt-get purge -y -qq < /tmp/packages-added; fi \
 && apt-get clean && rm -rf /var/lib/apt/lists/* /tmp/packages-* /root/.cache /opt/pyrmq/build
ENV PATH=/opt/pyrmq/venv/bin:$PATH

COPY conf/docker/ /etc/pyrmq/
USER rocketmq
ENV HOME=/data
VOLUME /data
# 9876 NameServer, 10911 broker, 10909 broker fast port (listenPort - 2), 10912 HA (listenPort + 1)
EXPOSE 9876 10909 10911 10912
# `docker stop` sends SIGTERM: pyrmq stops accepting, finishes in-flight requests, flushes the store,
# persists its configs and exits 0 (the default 10 s grace is plenty for that).
STOPSIGNAL SIGTERM
# Healthy when the broker and the NameServer answer over the remoting protocol (pyrmq health);
# a container running only one of them overrides this (docker-compose.yml does).
HEALTHCHECK --interval=5s --timeout=5s --start-period=30s --retries=3 CMD ["pyrmq", "health"]
ENTRYPOINT ["pyrmq"]
CMD ["standalone", "-c", "/etc/pyrmq/standalone.conf", "--namesrv-port", "9876"]
