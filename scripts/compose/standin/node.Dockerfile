# Stand-in for node:20-bookworm-slim (and, for lack of Alpine here, node:20-alpine): the
# machine's node 20 binary on a debootstrapped Debian bookworm, the `node` user (uid 1000).
# No npm/npx/yarn, no curl. apt points at a local repository inside the image holding only the
# pinned packages the images built on it install: iptables and its dependencies
# (scripts/compose/app.Dockerfile) and libjemalloc2 (feed/image/Dockerfile), so their
# `apt-get install` works offline here as it does online with the official image.
ARG BASE
FROM ${BASE}
RUN groupadd --gid 1000 node && useradd --uid 1000 --gid node --shell /bin/bash --create-home node
COPY node /usr/local/bin/node
COPY apt-repo/ /var/lib/mdf-apt/
RUN rm -f /etc/apt/sources.list /etc/apt/sources.list.d/* \
 && echo 'deb [trusted=yes] file:/var/lib/mdf-apt ./' > /etc/apt/sources.list.d/stand-in.list
CMD ["node"]
