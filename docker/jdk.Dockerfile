# A Java 17 runtime from Debian's packages: the compat suite runs the official Java client (its
# scenario runner) and the Apache RocketMQ reference servers in containers of this image.
# `make docker-images` builds it on the registry-free Debian base (scripts/docker_images.py).
ARG BASE=debian:bookworm-slim
FROM ${BASE}
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends openjdk-17-jre-headless \
 && rm -rf /var/lib/apt/lists/*
CMD ["java", "-version"]
