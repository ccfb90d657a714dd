# pyrmq: NameServer and Broker image.  `docker compose up` runs both (docker-compose.yml).
FROM python:3.11-slim

# The store and the NameServer's KV file live under /data; run as an unprivileged user.
RUN useradd --system --uid 10001 --home-dir /data rocketmq && mkdir -p /data && chown rocketmq /data

WORKDIR /opt/pyrmq
COPY pyproject.toml README.md ./
COPY pyrmq ./pyrmq
RUN pip install --no-cache-dir . && rm -rf /root/.cache

COPY conf/docker/ /etc/pyrmq/
USER rocketmq
ENV HOME=/data
VOLUME /data
# 9876 NameServer, 10911 broker, 10909 broker fast port (listenPort - 2), 10912 HA (listenPort + 1)
EXPOSE 9876 10909 10911 10912
ENTRYPOINT ["pyrmq"]
CMD ["standalone", "-c", "/etc/pyrmq/standalone.conf", "--namesrv-port", "9876"]
