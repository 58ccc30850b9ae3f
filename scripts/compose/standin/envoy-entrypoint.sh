#!/bin/sh
# Stand-in for the official envoyproxy/envoy image's entrypoint, same contract: a first
# argument that is a flag means "envoy FLAGS"; $loglevel adds --log-level; run as root, it drops
# to the image's `envoy` user (uid/gid 101, or $ENVOY_UID/$ENVOY_GID) unless ENVOY_UID=0. So
# files Envoy reads (certificates, keys, the .wasm) must be readable by uid 101, as with the
# official image. (The official image drops with su-exec; Debian has setpriv.)
set -e
if [ "${1#-}" != "$1" ]; then set -- envoy "$@"; fi
if [ "$1" = envoy ] && [ -n "${loglevel:-}" ]; then set -- "$@" --log-level "$loglevel"; fi
if [ "$(id -u)" = 0 ] && [ "${ENVOY_UID:-}" != 0 ]; then
  if [ -n "${ENVOY_UID:-}" ]; then usermod -u "$ENVOY_UID" envoy; fi
  if [ -n "${ENVOY_GID:-}" ]; then groupmod -g "$ENVOY_GID" envoy; fi
  chown envoy:envoy /dev/stdout /dev/stderr
  exec setpriv --reuid=envoy --regid=envoy --init-groups "$@"
fi
exec "$@"
